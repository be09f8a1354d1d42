#!/usr/bin/env bash
# The project's test command (`make test`, also what CI runs via .ci/run), in
# named tiers, so that a failure says which tier broke:
#
#   check  gofmt, go vet, golangci-lint (make lint), docs/ fresh (make docs)
#   unit   the core, the public Go API, ipamctl, the benchmark harness, the
#          migrations: Go tests against a throwaway PostgreSQL
#   acc    the provider's acceptance tests (TF_ACC=1, the real terraform)
#   e2e    end-to-end and reliability tests (terraform, ipamctl, faults)
#
# scripts/test.sh TIER...   runs those tiers (make check|unit|acc|e2e)
# scripts/test.sh all       (make test) runs check, then e2e, acc and unit in
#                           one go test run (its packages in parallel) and
#                           names the tiers of the packages that failed.
#
# Go tests run against a throwaway PostgreSQL (scripts/with-postgres.sh; set
# IPAM_TEST_DATABASE_URL to use an existing server instead) with the
# terraform binary from scripts/ensure-terraform.sh. Fuzz targets run their
# seed corpus as tests; timed fuzzing is `make fuzz`. TESTFLAGS is passed to
# go test (split on whitespace, e.g. TESTFLAGS="-v -run TestAcc").
#
# Every wall-clock limit of a test, and go test's -timeout here, is a bound on
# hangs, generous for a busy machine (all packages run at once), never a
# performance target: performance is `make bench`'s.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

step() { printf '==> %s\n' "$*" >&2; }

check() {
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

	step "every mutant still applies to its guard"
	bash scripts/mutants.sh --check

	# The go line is what a program importing the ipam package inherits from
	# `go mod tidy`: it must be the lowest the dependencies allow, never raised
	# for the provider's sake. go vet (below) then checks that no file uses a
	# standard library API newer than it, and the compiler its language level.
	step "go.mod's go line is the lowest the dependencies allow"
	local goline need
	goline=$(go mod edit -json | sed -n 's/^[[:space:]]*"Go": "\(.*\)",*$/\1/p')
	need=$(go list -deps -test -f '{{with .Module}}{{if not .Main}}{{.GoVersion}}{{end}}{{end}}' ./... | grep . | sort -uV | tail -n 1)
	if [[ "$goline" != "$need" ]]; then
		echo "go.mod says go $goline; the dependencies need go $need, and a higher line would force it on every" >&2
		echo "program that imports the ipam package: set go $need (go mod edit -go=$need)" >&2
		exit 1
	fi
	go build -gcflags=-lang="go$(cut -d. -f1,2 <<<"$goline")" ./ipam

	step "go vet ./..."
	go vet ./...

	# golangci-lint (a tool of tools/go.mod, built on first use), including the rule
	# that keeps terraform-plugin-* out of the ipam package.
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
}

# go test runs at most GOMAXPROCS test binaries at once (-p; 2 on a
# two-core machine), in the order of its arguments: the core's package
# (./ipam/..., minutes) comes first in its tier, so that it runs beside the
# e2e package rather than after the others (make test took 944 s with it
# last, 880 s with it first). More binaries at once (-p 4) was slower, 996
# s: the cores saturate and every package slows.
declare -A tier_packages=(
	[unit]="./ipam/... ./ ./bench/... ./cmd/... ./deploy/... ./internal/testdb/... ./migrations/..."
	[acc]="./internal/provider/..."
	[e2e]="./internal/e2e/..."
)

# tier_of names the tier of a package import path.
tier_of() {
	case "$1" in
	*/internal/provider*) echo acc ;;
	*/internal/e2e*) echo e2e ;;
	*) echo unit ;;
	esac
}

# cli_version prints a CLI's version line ("Terraform v1.15.9", "OpenTofu v1.12.6").
cli_version() {
	"$1" version 2>/dev/null | grep -m 1 -E '^(Terraform|OpenTofu) v' || true
}

gotest() { # tiers...
	# IPAM_CLI: a CLI of the matrix (IPAM_TF_MATRIX) instead of the default.
	if [[ -n "${IPAM_CLI:-}" ]]; then
		TF_ACC_TERRAFORM_PATH=$IPAM_CLI
	else
		step "locating terraform"
		TF_ACC_TERRAFORM_PATH=$(bash scripts/ensure-terraform.sh)
	fi
	export TF_ACC_TERRAFORM_PATH
	# A TF_CLI_CONFIG_FILE naming a missing file only makes the CLI print
	# warnings (OpenTofu on stdout, before its version line): unset it first.
	if [[ -n "${TF_CLI_CONFIG_FILE:-}" && ! -f "$TF_CLI_CONFIG_FILE" ]]; then
		unset TF_CLI_CONFIG_FILE
	fi
	# OpenTofu resolves a bare provider name under its own registry:
	# terraform-plugin-testing must reattach the provider under that host.
	if [[ "$(cli_version "$TF_ACC_TERRAFORM_PATH")" == OpenTofu* ]]; then
		export TF_ACC_PROVIDER_HOST=registry.opentofu.org
	else
		unset TF_ACC_PROVIDER_HOST
	fi
	export TF_ACC=1
	export CHECKPOINT_DISABLE=1
	step "terraform: $TF_ACC_TERRAFORM_PATH ($(cli_version "$TF_ACC_TERRAFORM_PATH"))"

	local testflags=() pkgs=() more=() t log rc failed
	read -r -a testflags <<<"${TESTFLAGS:-}"
	for t in "$@"; do
		read -r -a more <<<"${tier_packages[$t]}"
		pkgs+=("${more[@]}")
	done
	step "go test -count=1 -timeout 30m ${testflags[*]} (tiers: $*)"
	log=$(mktemp)
	# Tests of a feature the CLI lacks, and tests that only run when asked
	# (IPAM_E2E_TOFU, IPAM_E2E_RELEASE), skip with their reason noted here
	# (internal/tfcli), printed below: a skip is never silent.
	IPAM_SKIP_LOG=$(mktemp)
	export IPAM_SKIP_LOG
	set +e
	bash scripts/with-postgres.sh go test -count=1 -timeout 30m "${testflags[@]}" "${pkgs[@]}" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	set -e
	if [[ -s "$IPAM_SKIP_LOG" ]]; then
		step "skipped, each with why: the CLI's version, or an opt-in variable ($(wc -l <"$IPAM_SKIP_LOG") tests):"
		sort "$IPAM_SKIP_LOG"
	fi
	rm -f "$IPAM_SKIP_LOG"
	if ((rc != 0)); then
		failed=$(grep -E '^FAIL[[:space:]]+github.com/' "$log" | awk '{print $2}' | sort -u |
			while read -r p; do echo "$(tier_of "$p") (${p#github.com/overlayipam/terraform-provider-ipam/})"; done | sort -u | tr '\n' ' ')
		step "FAILED tiers under $(cli_version "$TF_ACC_TERRAFORM_PATH") ($TF_ACC_TERRAFORM_PATH): ${failed:-none named (a build or setup failure: see above)}"
	fi
	rm -f "$log"
	return "$rc"
}

tiers=("$@")
((${#tiers[@]} > 0)) || tiers=(all)
go_tiers=()
for t in "${tiers[@]}"; do
	case "$t" in
	all)
		check
		# The longest package first: go test starts packages in the order
		# given (two at a time on two cores), and the end-to-end package
		# takes about as long as the others together; started last, it ran
		# alone for its last six minutes.
		go_tiers+=(e2e acc unit)
		;;
	check) check ;;
	unit | acc | e2e) go_tiers+=("$t") ;;
	*)
		echo "unknown tier $t (check, unit, acc, e2e, all)" >&2
		exit 2
		;;
	esac
done
if ((${#go_tiers[@]} > 0)); then
	gotest "${go_tiers[@]}"
fi

# The CLI matrix: IPAM_TF_MATRIX="/path/terraform-1.15.9 /path/tofu-1.12.6" runs
# the acceptance and end-to-end tiers again under each CLI listed.
matrix_tiers=()
for t in "${go_tiers[@]}"; do
	[[ "$t" == acc || "$t" == e2e ]] && matrix_tiers+=("$t")
done
if [[ -n "${IPAM_TF_MATRIX:-}" ]] && ((${#matrix_tiers[@]} > 0)); then
	read -r -a matrix <<<"$IPAM_TF_MATRIX"
	failed_clis=()
	for cli in "${matrix[@]}"; do
		if [[ ! -x "$cli" ]]; then
			echo "IPAM_TF_MATRIX: $cli is not an executable" >&2
			exit 2
		fi
		step "CLI matrix: $(cli_version "$cli") ($cli)"
		IPAM_CLI=$cli gotest "${matrix_tiers[@]}" || failed_clis+=("$cli")
	done
	if ((${#failed_clis[@]} > 0)); then
		step "CLI matrix FAILED under: ${failed_clis[*]}"
		exit 1
	fi
	step "CLI matrix: green under ${matrix[*]}"
fi
