#!/usr/bin/env bash
# Print the absolute path of a usable terraform binary (and nothing else on stdout).
#
# Order: $TF_ACC_TERRAFORM_PATH (if executable), `terraform` on PATH, a cached
# <repo>/.tools/bin/terraform, else build Terraform v1.5.7 (the last MPL
# release) from source with `go install` into <repo>/.tools/bin (a few minutes,
# needs only the Go module proxy). Never downloads from releases.hashicorp.com.
set -euo pipefail

TERRAFORM_VERSION=v1.5.7
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
tools_bin=$root/.tools/bin

abspath() {
	case $1 in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s/%s\n' "$(cd "$(dirname "$1")" && pwd -P)" "$(basename "$1")" ;;
	esac
}

if [[ -n "${TF_ACC_TERRAFORM_PATH:-}" ]]; then
	if [[ -f "$TF_ACC_TERRAFORM_PATH" && -x "$TF_ACC_TERRAFORM_PATH" ]]; then
		abspath "$TF_ACC_TERRAFORM_PATH"
		exit 0
	fi
	echo "ensure-terraform: TF_ACC_TERRAFORM_PATH=$TF_ACC_TERRAFORM_PATH is not an executable file; looking elsewhere" >&2
fi

if tf=$(command -v terraform 2>/dev/null) && [[ -n "$tf" && -x "$tf" ]]; then
	abspath "$tf"
	exit 0
fi

if [[ -x "$tools_bin/terraform" ]]; then
	printf '%s\n' "$tools_bin/terraform"
	exit 0
fi

command -v go >/dev/null 2>&1 || {
	echo "ensure-terraform: terraform not found and go is not available to build it" >&2
	exit 1
}

mkdir -p "$tools_bin"
build() {
	# Re-check under the lock: a parallel caller may have built it already.
	if [[ -x "$tools_bin/terraform" ]]; then
		return 0
	fi
	echo "ensure-terraform: terraform not found; building terraform $TERRAFORM_VERSION from source into $tools_bin (takes ~5 minutes)..." >&2
	local start=$SECONDS
	# Build outside the repo so the provider's go.mod/go.work play no part.
	(
		cd /
		GOBIN=$tools_bin GOFLAGS='' GOWORK=off CGO_ENABLED=0 \
			go install "github.com/hashicorp/terraform@$TERRAFORM_VERSION"
	) >&2
	echo "ensure-terraform: built $tools_bin/terraform in $((SECONDS - start))s" >&2
}
if command -v flock >/dev/null 2>&1; then
	(
		flock 9
		build
	) 9>"$tools_bin/.terraform.lock"
else
	build
fi

[[ -x "$tools_bin/terraform" ]] || {
	echo "ensure-terraform: building terraform failed" >&2
	exit 1
}
printf '%s\n' "$tools_bin/terraform"
