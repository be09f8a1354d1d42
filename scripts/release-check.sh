#!/usr/bin/env bash
# Validate the release configuration (`make release-check`).
#
#   scripts/release-check.sh           goreleaser check on .goreleaser.yml, and
#                                      that terraform-registry-manifest.json
#                                      declares protocol 6.0
#   RELEASE_CHECK_BUILD=1 scripts/release-check.sh
#                                      also `goreleaser build --snapshot
#                                      --single-target` (provider and ipamctl
#                                      for this machine, into dist/)
#
# goreleaser is a `tool` of the tools/ module (tools/go.mod pins v2.16.0):
# `go tool -n` builds it on first use, from the Go module proxy into the build
# cache (~6 minutes on 2 cores), and prints where it is. Why the pin is not
# the newest release: goreleaser v2.17.0 and later depend on
# go.digitalxero.dev/go-msix (through nfpm), which the Go module proxy used
# here refuses (403), and v2.18.x also needs Go >= 1.27.1.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

say() { printf 'release-check: %s\n' "$*" >&2; }

command -v go >/dev/null 2>&1 || {
	say "error: go is needed to build goreleaser"
	exit 1
}
say "building goreleaser (tools/go.mod) unless cached"
gr=$(go -C "$root/tools" tool -n goreleaser) || {
	say "error: go tool goreleaser failed to build (see above)"
	exit 1
}

cd "$root"

manifest=terraform-registry-manifest.json
[[ -f $manifest ]] || {
	say "error: $manifest is missing"
	exit 1
}
if ! tr -d ' \t\n' <"$manifest" | grep -q '"protocol_versions":\["6.0"\]'; then
	say "error: $manifest must declare \"protocol_versions\": [\"6.0\"] (the provider serves protocol 6)"
	exit 1
fi

say "$("$gr" --version 2>/dev/null | grep -m1 GitVersion) check"
"$gr" check

if [[ "${RELEASE_CHECK_BUILD:-}" == 1 ]]; then
	# --skip=before: the release hook `go mod tidy -diff` needs a tidy tree,
	# which a work in progress may not be; a release runs it.
	say "goreleaser build --snapshot --clean --single-target --skip=before"
	"$gr" build --snapshot --clean --single-target --skip=before
	say "built: $(find dist -mindepth 2 -maxdepth 2 -type f -perm -u+x | sort | tr '\n' ' ')"
fi
