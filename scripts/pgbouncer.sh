#!/usr/bin/env bash
# A throwaway PgBouncer in front of a PostgreSQL server, for tests.
#
#   scripts/pgbouncer.sh start DIR --upstream URL [--mode transaction|session]
#                              [--pool-size N]
#       start PgBouncer with its files in DIR, pooling every database of the
#       server behind URL (a postgres:// URL with user and password, as
#       scripts/pg.sh writes it) in the given pool mode (default transaction),
#       with at most N server connections per database and user
#       (default_pool_size; default PgBouncer's, 20)
#   scripts/pgbouncer.sh stop DIR     stop it (fine if it is not running)
#
# After `start`, DIR contains:
#   url    the upstream URL with PgBouncer's host and port instead (mode 0600)
#   port   PgBouncer's TCP port; log its log; pgbouncer.ini its configuration
#
# PgBouncer keeps its defaults but for what a test needs: it listens on a free
# loopback port, with no unix socket, authenticates clients with SCRAM
# against a userlist holding the upstream user, and forwards any database
# name ("*") to the upstream server. ignore_startup_parameters is left at its
# default (none): a client sending a startup parameter PgBouncer does not
# know is refused, as in a real deployment.
#
# The Debian package `pgbouncer` is installed when the binary is missing (as
# root). PgBouncer refuses to run as root, so when run as root it runs as the
# `postgres` system user (or `ipamtest`, created if needed). The password is
# never printed.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)/lib.sh"

usage() {
	cat >&2 <<'EOF'
usage: scripts/pgbouncer.sh start DIR --upstream URL [--mode transaction|session] [--pool-size N]
       scripts/pgbouncer.sh stop DIR
EOF
	exit 2
}

find_pgbouncer() {
	command -v pgbouncer 2>/dev/null && return 0
	[[ -x /usr/sbin/pgbouncer ]] && echo /usr/sbin/pgbouncer
}

install_pgbouncer() {
	find_pgbouncer >/dev/null && return 0
	command -v apt-get >/dev/null 2>&1 || die "pgbouncer not found and apt-get is not available; install PgBouncer"
	log "pgbouncer not found; installing the Debian package"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y --no-install-recommends pgbouncer >&2
}

ensure_pgbouncer() {
	local b
	if b=$(find_pgbouncer); then
		echo "$b"
		return 0
	fi
	[[ $(id -u) -eq 0 ]] || die "pgbouncer not found; install it, e.g. 'sudo apt-get install pgbouncer'"
	with_lock install_pgbouncer
	find_pgbouncer || die "pgbouncer installed but not found on PATH"
}

cmd_start() {
	local dir="" upstream="" mode=transaction poolsize=""
	while (($#)); do
		case $1 in
		--upstream)
			upstream=${2:-}
			shift 2 || usage
			;;
		--mode)
			mode=${2:-}
			shift 2 || usage
			;;
		--pool-size)
			poolsize=${2:-}
			shift 2 || usage
			;;
		-*) usage ;;
		*)
			[[ -z "$dir" ]] || usage
			dir=$1
			shift
			;;
		esac
	done
	[[ -n "$dir" && -n "$upstream" ]] || usage
	[[ $mode == transaction || $mode == session ]] || die "--mode must be transaction or session, not '$mode'"
	[[ -z $poolsize || $poolsize =~ ^[1-9][0-9]*$ ]] || die "--pool-size must be a positive number of server connections, not '$poolsize'"

	# postgres://USER:PASSWORD@HOST:PORT/DB?QUERY
	local re='^postgres(ql)?://([^:@/]+):([^@/]+)@([^:/]+):([0-9]+)/([^?]*)(\?.*)?$'
	[[ $upstream =~ $re ]] || die "--upstream must be postgres://USER:PASSWORD@HOST:PORT/DB (the URL itself is not shown)"
	local user=${BASH_REMATCH[2]} pw=${BASH_REMATCH[3]} host=${BASH_REMATCH[4]} uport=${BASH_REMATCH[5]}
	local db=${BASH_REMATCH[6]} query=${BASH_REMATCH[7]}

	local bin runas
	bin=$(ensure_pgbouncer)
	runas=$(server_user)
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd -P)
	if [[ -f "$dir/pgbouncer.pid" ]] && kill -0 "$(cat "$dir/pgbouncer.pid")" 2>/dev/null; then
		log "pgbouncer already running on 127.0.0.1:$(cat "$dir/port")"
		return 0
	fi

	local port attempt
	for ((attempt = 1; attempt <= 5; attempt++)); do
		port=$(pick_port)
		(
			umask 077
			printf '"%s" "%s"\n' "$user" "$pw" >"$dir/userlist.txt"
			cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=$host port=$uport

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $dir/userlist.txt
pool_mode = $mode
${poolsize:+default_pool_size = $poolsize
}logfile = $dir/log
pidfile = $dir/pgbouncer.pid
EOF
		)
		if [[ $(id -u) -eq 0 && $runas != root ]]; then
			chown -R "$runas:" "$dir"
			chmod 0700 "$dir"
			make_traversable "$runas" "$dir"
		fi
		rm -f "$dir/pgbouncer.pid"
		if ! as_user "$runas" "$bin" -d -q "$dir/pgbouncer.ini" >>"$dir/start.log" 2>&1; then
			tail -n 20 "$dir/log" "$dir/start.log" >&2 2>/dev/null || true
			die "pgbouncer failed to start (log: $dir/log)"
		fi
		# Up to 60 s to listen and write its pid file (a daemon listens first,
		# then writes it): a bound on a hang, generous for a busy machine.
		local i
		for ((i = 0; i < 600; i++)); do
			port_in_use "$port" && [[ -f "$dir/pgbouncer.pid" ]] && break
			grep -qi 'address already in use' "$dir/log" 2>/dev/null && break
			sleep 0.1
		done
		if port_in_use "$port" && [[ -f "$dir/pgbouncer.pid" ]]; then
			break
		fi
		if grep -qi 'address already in use' "$dir/log" 2>/dev/null; then
			log "port $port taken, retrying with another port"
			continue
		fi
		tail -n 20 "$dir/log" >&2 2>/dev/null || true
		# A daemon that started but is judged failed would outlive the run.
		pkill -f -- "$dir/pgbouncer.ini" 2>/dev/null || true
		die "pgbouncer did not start listening on 127.0.0.1:$port (log: $dir/log)"
	done
	(
		umask 077
		printf 'postgres://%s:%s@127.0.0.1:%s/%s%s\n' "$user" "$pw" "$port" "$db" "$query" >"$dir/url.tmp"
		mv -f "$dir/url.tmp" "$dir/url"
	)
	printf '%s\n' "$port" >"$dir/port"
	log "pgbouncer ($mode pooling) started on 127.0.0.1:$port in front of $host:$uport"
}

cmd_stop() {
	[[ $# -eq 1 ]] || usage
	local dir=$1 pid i
	if [[ ! -f "$dir/pgbouncer.pid" ]]; then
		log "pgbouncer in $dir is not running"
		return 0
	fi
	pid=$(cat "$dir/pgbouncer.pid")
	kill -INT "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$dir/pgbouncer.pid"
	log "pgbouncer in $dir stopped"
}

[[ $# -ge 1 ]] || usage
action=$1
shift
case $action in
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
*) usage ;;
esac
