#!/usr/bin/env bash
# Print the absolute path of a usable promtool (and nothing else on stdout).
#
# Order: $PROMTOOL (if executable), `promtool` on PATH, else install Debian's
# `prometheus` package (which ships promtool) with apt-get. Installing needs
# root; without it this fails with a message saying what to install.
set -euo pipefail

log() { printf 'ensure-promtool: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

if [[ -n "${PROMTOOL:-}" ]]; then
	[[ -f "$PROMTOOL" && -x "$PROMTOOL" ]] || die "PROMTOOL=$PROMTOOL is not an executable file"
	printf '%s\n' "$PROMTOOL"
	exit 0
fi

found() {
	local p
	p=$(command -v promtool 2>/dev/null) || return 1
	[[ -x "$p" ]] || return 1
	printf '%s\n' "$p"
}

if found; then
	exit 0
fi

command -v apt-get >/dev/null 2>&1 ||
	die "promtool not found and apt-get is not available; install Prometheus' promtool and put it on PATH (or set PROMTOOL)"
[[ $(id -u) -eq 0 ]] ||
	die "promtool not found and installing it needs root; run 'sudo apt-get install prometheus' (it ships promtool), or set PROMTOOL"

install() {
	# Another process may have installed it while we waited for the lock.
	if command -v promtool >/dev/null 2>&1; then
		return 0
	fi
	log "promtool not found; installing Debian package prometheus with apt-get (takes a minute)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2 || die "apt-get update failed"
	apt-get install -y --no-install-recommends prometheus >&2 || die "apt-get install prometheus failed"
}

lock=${TMPDIR:-/tmp}/ipam-promtool-install.lock
if command -v flock >/dev/null 2>&1; then
	(
		flock 9
		install
	) 9>>"$lock"
else
	install
fi

found || die "the prometheus package is installed but promtool is still not on PATH"
