#!/usr/bin/env bash
# Run golangci-lint with .golangci.yml (`make lint`).
#
#   scripts/lint.sh [golangci-lint run flags...]
#
# Uses <repo>/.tools/bin/golangci-lint when it is the pinned version
# (GOLANGCI_LINT_VERSION, set by the Makefile), and otherwise installs that
# version there from the Go module proxy (GOTOOLCHAIN=auto, ~2 minutes). A
# golangci-lint on PATH is not used: it may be v1, or another v2 with other
# findings.
set -euo pipefail

GOLANGCI_LINT_VERSION=${GOLANGCI_LINT_VERSION:-v2.15.0}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
tools_bin=$root/.tools/bin
lint=$tools_bin/golangci-lint

say() { printf 'lint: %s\n' "$*" >&2; }

is_pinned() {
	[[ -x "$lint" ]] && "$lint" version 2>/dev/null | grep -q "version ${GOLANGCI_LINT_VERSION#v} "
}

install() {
	is_pinned && return 0 # a parallel caller may have installed it meanwhile
	say "installing golangci-lint $GOLANGCI_LINT_VERSION into .tools/bin (from the Go module proxy)"
	# Outside the repo, so the project's go.mod plays no part.
	if ! (cd / && GOBIN=$tools_bin GOTOOLCHAIN=auto GOFLAGS='' GOWORK=off \
		go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION") >&2; then
		say "error: go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION failed (see above)"
		exit 1
	fi
}

[[ -f "$root/.golangci.yml" ]] || {
	say "error: $root/.golangci.yml is missing"
	exit 1
}

if ! is_pinned; then
	command -v go >/dev/null 2>&1 || {
		say "error: go is needed to install golangci-lint"
		exit 1
	}
	mkdir -p "$tools_bin"
	if command -v flock >/dev/null 2>&1; then
		(
			flock 9
			install
		) 9>"$tools_bin/.golangci-lint.lock"
	else
		install
	fi
fi

cd "$root"
say "$("$lint" version 2>/dev/null | head -n 1)"
"$lint" config verify
say "golangci-lint run ./... $*"
exec "$lint" run "$@" ./...
