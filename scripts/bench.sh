#!/usr/bin/env bash
# The performance suite: `make bench`, `make bench-smoke`.
#
#   scripts/bench.sh [--smoke] [IPAMBENCH FLAGS...]
#
# Builds cmd/ipambench into bin/ and runs it against a PostgreSQL server:
#
#  - full mode (default): always on a fresh throwaway server with durable
#    settings (IPAM_PG_BENCH=1 scripts/with-postgres.sh, i.e. scripts/pg.sh
#    start DIR --bench: fsync on, synchronous_commit on, shared_buffers=512MB),
#    never on a test server that may run with fsync off; writes BENCHMARKS.md.
#    IPAM_BENCH_DATABASE_URL=URL runs on that server instead (a superuser URL).
#  - --smoke: small sizes, every code path in about a minute; on
#    IPAM_TEST_DATABASE_URL when set, else on a throwaway server. Prints the
#    table only (pass -out FILE to write one).
#
# Exits non-zero when a check fails (a hot statement's plan with a sequential
# scan or a sort in full mode, a broken measurement). Extra flags go to
# ipambench (see `bin/ipambench -h`), e.g. -sections throughput,growth.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

smoke=0
args=()
for a in "$@"; do
	case $a in
	--smoke) smoke=1 ;;
	*) args+=("$a") ;;
	esac
done

step() { printf '==> %s\n' "$*" >&2; }

step "go build -o bin/ipambench ./cmd/ipambench"
go build -o bin/ipambench ./cmd/ipambench

# terraform for section 4 (built from the module proxy if missing).
if [[ -z "${TF_ACC_TERRAFORM_PATH:-}" ]]; then
	if tf=$(bash scripts/ensure-terraform.sh 2>/dev/null); then
		export TF_ACC_TERRAFORM_PATH=$tf
	fi
fi
export CHECKPOINT_DISABLE=1

if ((smoke)); then
	step "bin/ipambench -smoke ${args[*]}"
	exec bash scripts/with-postgres.sh bin/ipambench -smoke "${args[@]}"
fi

has_out=0
for a in "${args[@]}"; do
	[[ $a == -out || $a == -out=* || $a == --out || $a == --out=* ]] && has_out=1
done
((has_out)) || args+=(-out BENCHMARKS.md)

if [[ -n "${IPAM_BENCH_DATABASE_URL:-}" ]]; then
	step "bin/ipambench ${args[*]} (on IPAM_BENCH_DATABASE_URL)"
	exec bin/ipambench "${args[@]}"
fi
# A throwaway durable server, whatever IPAM_TEST_DATABASE_URL says.
unset IPAM_TEST_DATABASE_URL
export IPAM_PG_BENCH=1
step "IPAM_PG_BENCH=1 scripts/with-postgres.sh bin/ipambench ${args[*]}"
exec bash scripts/with-postgres.sh bin/ipambench "${args[@]}"
