#!/usr/bin/env bash
# Run a command with IPAM_TEST_DATABASE_URL pointing at a PostgreSQL server.
#
#   scripts/with-postgres.sh CMD [ARGS...]
#
# If IPAM_TEST_DATABASE_URL is already set (non-empty), CMD is run as is.
# Otherwise a throwaway server is started in a fresh temporary directory with
# scripts/pg.sh, IPAM_TEST_DATABASE_URL is exported (a superuser URL for the
# `postgres` database on 127.0.0.1), CMD runs, and the server and directory
# are removed when CMD ends (also on Ctrl-C). CMD's exit status is returned.
#
# IPAM_PG_BENCH=1 starts the server with durable benchmark settings
# (scripts/pg.sh start --bench) instead of the fast test settings.
#
# The test server's files go to memory (/dev/shm) when it is a tmpfs with
# room (4 GiB free there and in RAM), else under TMPDIR (default /tmp); the
# benchmark server's always go under TMPDIR. IPAM_PG_TMPDIR names the
# folder instead. Each test creates and drops a database of its own, and on
# a disk that other work keeps busy a CREATE DATABASE took 0.2 to 0.6 s
# where it takes 10 to 20 ms in memory.
set -euo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: scripts/with-postgres.sh CMD [ARGS...]" >&2
	exit 2
fi

if [[ -n "${IPAM_TEST_DATABASE_URL:-}" ]]; then
	exec "$@"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

# in_memory_room DIR: true if DIR is a writable tmpfs with 4 GiB free, and
# the machine 4 GiB of available memory.
in_memory_room() {
	local dir=$1 need=$((4 * 1024 * 1024)) free avail
	[[ -d "$dir" && -w "$dir" ]] || return 1
	[[ "$(stat -f -c %T "$dir" 2>/dev/null)" == tmpfs ]] || return 1
	free=$(df -Pk "$dir" 2>/dev/null | awk 'NR == 2 { print $4 }')
	avail=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo 2>/dev/null)
	((${free:-0} >= need && ${avail:-0} >= need))
}

parent=${TMPDIR:-/tmp}
if [[ -n "${IPAM_PG_TMPDIR:-}" ]]; then
	parent=$IPAM_PG_TMPDIR
elif [[ "${IPAM_PG_BENCH:-}" != 1 ]] && in_memory_room /dev/shm; then
	parent=/dev/shm
fi
pgdir=$(mktemp -d "$parent/ipam-pg.XXXXXX")

# shellcheck disable=SC2317 # invoked by trap
cleanup() {
	# Keep quiet: the command's own closing output (e.g. go test's) stays last.
	bash "$here/pg.sh" stop "$pgdir" >/dev/null 2>&1 || true
	rm -rf "$pgdir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_args=()
if [[ "${IPAM_PG_BENCH:-}" == 1 ]]; then
	start_args+=(--bench)
fi
bash "$here/pg.sh" start "$pgdir" "${start_args[@]}"

IPAM_TEST_DATABASE_URL=$(cat "$pgdir/url")
export IPAM_TEST_DATABASE_URL

rc=0
"$@" || rc=$?
exit "$rc"
