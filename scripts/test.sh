#!/usr/bin/env bash
# The project's test command (`make test`, also what CI runs via .ci/run).
#
#  1. gofmt check (fails listing unformatted files)
#  2. go vet ./... and golangci-lint (make lint)
#  3. docs staleness check (only when tools/go.mod and docs/ exist)
#  4. go test -count=1 -timeout 30m $TESTFLAGS ./... with TF_ACC=1, against a
#     throwaway PostgreSQL (scripts/with-postgres.sh; set IPAM_TEST_DATABASE_URL
#     to use an existing server instead) and the terraform binary from
#     scripts/ensure-terraform.sh.
#
# go test runs last so its closing lines are the last output.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

step() { printf '==> %s\n' "$*" >&2; }

step "gofmt"
mapfile -t gofiles < <(find . -name '*.go' -not -path './.tools/*' -not -path './vendor/*' -not -path './.demo/*' | sort)
if ((${#gofiles[@]} > 0)); then
	unformatted=$(gofmt -l "${gofiles[@]}")
	if [[ -n "$unformatted" ]]; then
		echo "These files are not gofmt-formatted (run make fmt):" >&2
		while IFS= read -r f; do printf '  %s\n' "$f"; done <<<"$unformatted" >&2
		exit 1
	fi
fi

step "go vet ./..."
go vet ./...

# golangci-lint (installed into .tools/bin on first use), including the rule
# that keeps terraform-plugin-* out of internal/ipamcore.
step "make lint"
make --no-print-directory lint

if [[ -f tools/go.mod && -d docs ]]; then
	step "docs staleness check (make docs)"
	make --no-print-directory docs
	stale=0
	if ! git diff --exit-code --stat -- docs/ >&2; then
		stale=1
	fi
	untracked=$(git status --porcelain --untracked-files=all -- docs/ | grep '^??' || true)
	if [[ -n "$untracked" ]]; then
		printf '%s\n' "$untracked" >&2
		stale=1
	fi
	if ((stale)); then
		echo "docs/ is stale: run make docs and commit" >&2
		exit 1
	fi
fi

step "locating terraform"
TF_ACC_TERRAFORM_PATH=$(bash scripts/ensure-terraform.sh)
export TF_ACC_TERRAFORM_PATH
export TF_ACC=1
export CHECKPOINT_DISABLE=1
# A TF_CLI_CONFIG_FILE naming a missing file only makes terraform print warnings.
if [[ -n "${TF_CLI_CONFIG_FILE:-}" && ! -f "$TF_CLI_CONFIG_FILE" ]]; then
	unset TF_CLI_CONFIG_FILE
fi
step "terraform: $TF_ACC_TERRAFORM_PATH ($("$TF_ACC_TERRAFORM_PATH" version | head -n 1))"

step "fuzz: every target for 2s (make fuzz runs 60s)"
bash scripts/fuzz.sh 2s

# TESTFLAGS is split on whitespace (e.g. TESTFLAGS="-v -run TestAcc").
read -r -a testflags <<<"${TESTFLAGS:-}"
step "go test -count=1 -timeout 30m ${testflags[*]} ./..."
exec bash scripts/with-postgres.sh go test -count=1 -timeout 30m "${testflags[@]}" ./...
