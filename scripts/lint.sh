#!/usr/bin/env bash
# Run golangci-lint with .golangci.yml (`make lint`).
#
#   scripts/lint.sh [golangci-lint run flags...]
#
# golangci-lint is a `tool` of the tools/ module (tools/go.mod pins its
# version): `go tool -n` builds it on first use, from the Go module proxy into
# the build cache (a few minutes), and prints where it is. A golangci-lint on
# PATH is not used: it may be v1, or another v2 with other findings.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

say() { printf 'lint: %s\n' "$*" >&2; }

[[ -f "$root/.golangci.yml" ]] || {
	say "error: $root/.golangci.yml is missing"
	exit 1
}
command -v go >/dev/null 2>&1 || {
	say "error: go is needed to build golangci-lint"
	exit 1
}
say "building golangci-lint (tools/go.mod) unless cached"
lint=$(go -C "$root/tools" tool -n golangci-lint) || {
	say "error: go tool golangci-lint failed to build (see above)"
	exit 1
}

cd "$root"
say "$("$lint" version 2>/dev/null | head -n 1)"
"$lint" config verify
say "golangci-lint run ./... $*"
exec "$lint" run "$@" ./...
