#!/usr/bin/env bash
# A throwaway PostgreSQL primary with a synchronous streaming standby on
# loopback, for failover tests.
#
#   scripts/pg-replica.sh start PRIMARY_DIR STANDBY_DIR
#       start the primary (scripts/pg.sh start PRIMARY_DIR), clone it with
#       pg_basebackup -R into STANDBY_DIR, start the standby and make it the
#       synchronous standby; waits until pg_stat_replication says 'sync'
#   scripts/pg-replica.sh crash DIR       stop a server at once (pg_ctl stop -m immediate), as a crash would
#   scripts/pg-replica.sh promote DIR     promote the standby in DIR (pg_ctl promote -w)
#   scripts/pg-replica.sh stop DIR...     stop servers (scripts/pg.sh stop)
#
# Durability: scripts/pg.sh starts test servers with fsync, synchronous_commit
# and full_page_writes off. Here the primary gets them back on, and
# synchronous_standby_names = '*' with synchronous_commit = on: a commit is
# acknowledged to the client only once the standby has flushed its WAL, so
# every acknowledged commit survives the loss of the primary. The standby does
# not inherit synchronous_standby_names (it is set after the base backup), so
# once promoted it does not wait for a standby of its own.
#
# After `start`, each DIR looks like a scripts/pg.sh directory (url, port,
# pwfile, data/, log), and PRIMARY_DIR/url-ha holds
#   postgres://ipam:PASSWORD@127.0.0.1:P1,127.0.0.1:P2/postgres?sslmode=disable&target_session_attrs=read-write
# The password is never printed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

log() { printf 'pg-replica.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

usage() {
	cat >&2 <<'EOF'
usage: scripts/pg-replica.sh start PRIMARY_DIR STANDBY_DIR
       scripts/pg-replica.sh crash DIR
       scripts/pg-replica.sh promote DIR
       scripts/pg-replica.sh stop DIR...
EOF
	exit 2
}

# psql_on DIR SQL: run SQL as the superuser on the server of DIR (password from DIR/pwfile, via the environment).
psql_on() {
	local dir=$1 sql=$2
	PGPASSWORD=$(cat "$dir/pwfile") "$(cat "$dir/bindir")/psql" -X -q -A -t -v ON_ERROR_STOP=1 \
		"postgres://ipam@127.0.0.1:$(cat "$dir/port")/postgres?sslmode=disable&connect_timeout=10" -c "$sql"
}

cmd_start() {
	[[ $# -eq 2 ]] || usage
	bash "$here/pg.sh" start "$1"
	local p s
	p=$(cd "$1" && pwd -P)
	mkdir -p "$2"
	s=$(cd "$2" && pwd -P)
	local user bindir pport pw
	user=$(stat -c %U "$p/data")
	bindir=$(cat "$p/bindir")
	pport=$(cat "$p/port")
	pw=$(cat "$p/pwfile")

	# Durable primary (see the header).
	psql_on "$p" "ALTER SYSTEM SET fsync = on" >/dev/null
	psql_on "$p" "ALTER SYSTEM SET full_page_writes = on" >/dev/null
	psql_on "$p" "ALTER SYSTEM SET synchronous_commit = on" >/dev/null
	psql_on "$p" "ALTER SYSTEM SET wal_keep_size = '256MB'" >/dev/null
	psql_on "$p" "SELECT pg_reload_conf()" >/dev/null

	if [[ $(id -un) != "$user" ]]; then
		chown "$user:" "$s"
	fi
	chmod 0700 "$s"
	cp "$p/bindir" "$s/bindir"
	(
		umask 077
		cp "$p/pwfile" "$s/pwfile"
		# pg_basebackup -R writes passfile= into primary_conninfo: the password stays out of argv and logs.
		printf '127.0.0.1:%s:*:ipam:%s\n' "$pport" "$pw" >"$s/pgpass"
	)
	if [[ $(id -un) != "$user" ]]; then
		chown "$user:" "$s/pwfile" "$s/pgpass"
	fi
	if [[ ! -f "$s/data/PG_VERSION" ]]; then
		rm -rf "$s/data"
		as_user "$user" env PGPASSFILE="$s/pgpass" "$bindir/pg_basebackup" -h 127.0.0.1 -p "$pport" -U ipam \
			-D "$s/data" -R -X stream -c fast >"$s/basebackup.log" 2>&1 ||
			{
				cat "$s/basebackup.log" >&2
				die "pg_basebackup failed"
			}
	fi
	as_user "$user" mkdir -p "$s/sock"
	local sport sockdirs="$s/sock"
	if ((${#sockdirs} + 20 > 100)); then
		sockdirs=""
	fi
	# A port free when picked may be taken before the standby binds it (other
	# servers start in parallel tests): then try another port.
	local attempt started=0
	for attempt in 1 2 3 4 5; do
		sport=$(pick_port)
		printf "port = %s\nunix_socket_directories = '%s'\n" "$sport" "$sockdirs" |
			as_user "$user" tee "$s/data/pgsh_port.conf" >/dev/null
		if as_user "$user" "$bindir/pg_ctl" -D "$s/data" -l "$s/log" -w -t 60 start >/dev/null 2>&1; then
			started=1
			break
		fi
		grep -q "could not create any TCP/IP sockets\|Address already in use" "$s/log" 2>/dev/null || break
		log "port $sport was taken before the standby could bind it (attempt $attempt); trying another"
	done
	if ((!started)); then
		tail -n 30 "$s/log" >&2 || true
		die "the standby failed to start (log: $s/log)"
	fi
	printf '%s\n' "$sport" >"$s/port"
	(
		umask 077
		printf 'postgres://ipam:%s@127.0.0.1:%s/postgres?sslmode=disable\n' "$pw" "$sport" >"$s/url"
		printf 'postgres://ipam:%s@127.0.0.1:%s,127.0.0.1:%s/postgres?sslmode=disable&target_session_attrs=read-write\n' \
			"$pw" "$pport" "$sport" >"$p/url-ha"
	)

	# Only now make the standby synchronous: set before the base backup, the
	# standby would inherit it and wait for a standby of its own once promoted.
	psql_on "$p" "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null
	psql_on "$p" "SELECT pg_reload_conf()" >/dev/null
	local i state=""
	for ((i = 0; i < 300; i++)); do
		state=$(psql_on "$p" "SELECT sync_state FROM pg_stat_replication LIMIT 1" 2>/dev/null || true)
		if [[ "$state" == sync ]]; then
			log "primary 127.0.0.1:$pport, synchronous standby 127.0.0.1:$sport"
			return 0
		fi
		sleep 0.1
	done
	die "the standby did not become synchronous (state '${state}'; logs: $p/log, $s/log)"
}

pg_ctl_in() {
	local dir=$1
	shift
	as_user "$(stat -c %U "$dir/data")" "$(cat "$dir/bindir")/pg_ctl" -D "$dir/data" "$@"
}

[[ $# -ge 1 ]] || usage
action=$1
shift
case $action in
start) cmd_start "$@" ;;
crash)
	[[ $# -eq 1 ]] || usage
	pg_ctl_in "$(cd "$1" && pwd -P)" -m immediate -w stop >/dev/null
	log "crashed the server in $1 (immediate stop)"
	;;
promote)
	[[ $# -eq 1 ]] || usage
	pg_ctl_in "$(cd "$1" && pwd -P)" -w -t 60 promote >/dev/null
	log "promoted the standby in $1"
	;;
stop)
	[[ $# -ge 1 ]] || usage
	for d in "$@"; do
		bash "$here/pg.sh" stop "$d" || true
	done
	;;
*) usage ;;
esac
