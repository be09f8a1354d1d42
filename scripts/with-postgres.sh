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
set -euo pipefail

if [[ $# -eq 0 ]]; then
	echo "usage: scripts/with-postgres.sh CMD [ARGS...]" >&2
	exit 2
fi

if [[ -n "${IPAM_TEST_DATABASE_URL:-}" ]]; then
	exec "$@"
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
pgdir=$(mktemp -d "${TMPDIR:-/tmp}/ipam-pg.XXXXXX")

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
