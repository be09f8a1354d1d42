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
# Uses <repo>/.tools/bin/goreleaser when it is the pinned version
# (GORELEASER_VERSION, set by the Makefile), and otherwise installs that
# version there from the Go module proxy (GOTOOLCHAIN=auto; ~6 minutes on 2
# cores). Why the pin is not the newest release: goreleaser v2.17.0 and later
# depend on go.digitalxero.dev/go-msix (through nfpm), which the Go module
# proxy used here refuses (403), and v2.18.x also needs Go >= 1.27.1.
set -euo pipefail

GORELEASER_VERSION=${GORELEASER_VERSION:-v2.16.0}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
tools_bin=$root/.tools/bin
gr=$tools_bin/goreleaser

say() { printf 'release-check: %s\n' "$*" >&2; }

is_pinned() {
	[[ -x "$gr" ]] && "$gr" --version 2>/dev/null | grep -qE "^GitVersion:[[:space:]]+${GORELEASER_VERSION}\$"
}

install() {
	is_pinned && return 0 # a parallel caller may have installed it meanwhile
	say "installing goreleaser $GORELEASER_VERSION into .tools/bin from the Go module proxy (takes several minutes)"
	local tmp
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/goreleaser-install.XXXXXX")
	# Outside the repo, so the project's go.mod plays no part; into a temporary
	# GOBIN first, so a failed build leaves no half-installed tool behind.
	if ! (cd / && GOBIN=$tmp GOTOOLCHAIN=auto GOFLAGS='' GOWORK=off \
		go install "github.com/goreleaser/goreleaser/v2@$GORELEASER_VERSION") >&2; then
		rm -rf "$tmp"
		say "error: go install github.com/goreleaser/goreleaser/v2@$GORELEASER_VERSION failed (see above)."
		say "A '403 Forbidden' for a module means the Go module proxy refuses that dependency on this machine;"
		say "v2.16.0 is the newest release whose dependencies it serves."
		exit 1
	fi
	mv -f "$tmp/goreleaser" "$gr"
	rm -rf "$tmp"
}

if ! is_pinned; then
	command -v go >/dev/null 2>&1 || {
		say "error: go is needed to install goreleaser"
		exit 1
	}
	mkdir -p "$tools_bin"
	if command -v flock >/dev/null 2>&1; then
		(
			flock 9
			install
		) 9>"$tools_bin/.goreleaser.lock"
	else
		install
	fi
fi

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

say "goreleaser $GORELEASER_VERSION check"
"$gr" check

if [[ "${RELEASE_CHECK_BUILD:-}" == 1 ]]; then
	# --skip=before: the release hook `go mod tidy -diff` needs a tidy tree,
	# which a work in progress may not be; a release runs it.
	say "goreleaser build --snapshot --clean --single-target --skip=before"
	"$gr" build --snapshot --clean --single-target --skip=before
	say "built: $(find dist -mindepth 2 -maxdepth 2 -type f -perm -u+x | sort | tr '\n' ' ')"
fi
