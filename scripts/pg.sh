#!/usr/bin/env bash
# Throwaway PostgreSQL server for tests, benchmarks and the demo.
#
#   scripts/pg.sh start DIR [--bench]   start a server with its files in DIR
#   scripts/pg.sh stop DIR              stop it (fine if it is not running)
#   scripts/pg.sh status DIR            exit 0 if it is running, 1 if not
#
# After `start`, DIR contains:
#   url    postgres://ipam:PASSWORD@127.0.0.1:PORT/postgres?sslmode=disable (mode 0600)
#   port   the TCP port
#   data/  the cluster, sock/ the unix socket directory, log the server log
#
# The server listens on 127.0.0.1 only, superuser `ipam`, scram-sha-256 auth.
# Without --bench it trades durability for speed (fsync=off, ...); with --bench
# it keeps durability defaults and sets shared_buffers=512MB.
#
# PostgreSQL refuses to run as root, so when run as root the server runs as
# the `postgres` system user (or `ipamtest`, created if needed).
# Several servers in different DIRs can be started in parallel.
# The password is never printed.
set -euo pipefail

PG_SUPERUSER=ipam

# shellcheck source=scripts/lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)/lib.sh"

usage() {
	cat >&2 <<'EOF'
usage: scripts/pg.sh start DIR [--bench]
       scripts/pg.sh stop DIR
       scripts/pg.sh status DIR
EOF
	exit 2
}

install_postgres() {
	# Another process may have installed it while we waited for the lock.
	if find_bindir >/dev/null; then
		return 0
	fi
	command -v apt-get >/dev/null 2>&1 ||
		die "PostgreSQL server binaries not found and apt-get is not available; install PostgreSQL (initdb, pg_ctl)"
	log "PostgreSQL server binaries not found; installing with apt-get (this takes a minute)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y --no-install-recommends postgresql >&2
}

ensure_bindir() {
	local d
	if d=$(find_bindir); then
		printf '%s\n' "$d"
		return 0
	fi
	[[ $(id -u) -eq 0 ]] ||
		die "PostgreSQL server binaries (initdb, pg_ctl) not found; install PostgreSQL, e.g. 'sudo apt-get install postgresql'"
	with_lock install_postgres
	find_bindir || die "PostgreSQL installed but initdb/pg_ctl still not found"
}

random_password() {
	local pw=""
	while ((${#pw} < 24)); do
		pw+=$(head -c 256 /dev/urandom | LC_ALL=C tr -dc 'A-Za-z0-9')
	done
	printf '%s' "${pw:0:24}"
}

abs_dir() {
	(cd "$1" && pwd -P)
}

is_running() {
	local dir=$1 bindir user
	[[ -f "$dir/data/postmaster.pid" ]] || return 1
	bindir=$(cat "$dir/bindir" 2>/dev/null || find_bindir) || return 1
	user=$(stat -c %U "$dir/data")
	as_user "$user" "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1
}

cmd_start() {
	local dir="" bench=0 arg
	for arg in "$@"; do
		case $arg in
		--bench) bench=1 ;;
		-*) usage ;;
		*)
			[[ -z "$dir" ]] || usage
			dir=$arg
			;;
		esac
	done
	[[ -n "$dir" ]] || usage

	mkdir -p "$dir"
	dir=$(abs_dir "$dir")

	if is_running "$dir"; then
		[[ -s "$dir/url" ]] || die "a server is running in $dir but $dir/url is missing"
		log "postgres already running on 127.0.0.1:$(cat "$dir/port") (data in $dir)"
		return 0
	fi

	local bindir user
	bindir=$(ensure_bindir)
	user=$(server_user)
	printf '%s\n' "$bindir" >"$dir/bindir"

	if [[ $(id -u) -eq 0 && "$user" != root ]]; then
		chown "$user:" "$dir"
		chmod 0700 "$dir"
		make_traversable "$user" "$dir"
	fi

	local data=$dir/data sock=$dir/sock pwfile=$dir/pwfile
	if [[ ! -f "$data/PG_VERSION" ]]; then
		rm -rf "$data"
		(
			umask 077
			random_password >"$pwfile"
		)
		if [[ $(id -u) -eq 0 ]]; then
			chown "$user:" "$pwfile"
		fi
		local initdb_args=(-D "$data" -U "$PG_SUPERUSER" --pwfile="$pwfile"
			--auth=scram-sha-256 -E UTF8 --locale=C)
		((bench)) || initdb_args+=(--no-sync)
		if ! as_user "$user" "$bindir/initdb" "${initdb_args[@]}" >"$dir/initdb.log" 2>&1; then
			cat "$dir/initdb.log" >&2
			die "initdb failed"
		fi
		as_user "$user" mkdir -p "$sock"

		# Unix socket paths are limited to ~107 bytes; fall back to TCP only.
		local sockdirs="$sock"
		if ((${#sock} + 20 > 100)); then
			log "note: $sock is too long for a unix socket; using TCP only"
			sockdirs=""
		fi
		{
			echo ""
			echo "# --- added by scripts/pg.sh ---"
			echo "listen_addresses = '127.0.0.1'"
			echo "unix_socket_directories = '${sockdirs//\'/\'\'}'"
			echo "max_connections = 300"
			if ((bench)); then
				echo "shared_buffers = 512MB"
			else
				echo "fsync = off"
				echo "synchronous_commit = off"
				echo "full_page_writes = off"
			fi
			echo "include_if_exists = 'pgsh_port.conf'"
		} | as_user "$user" tee -a "$data/postgresql.conf" >/dev/null
	fi
	[[ -s "$pwfile" ]] || die "$pwfile missing; remove $dir and start again"

	local port attempt started=0
	for ((attempt = 1; attempt <= 5; attempt++)); do
		port=$(pick_port)
		echo "port = $port" | as_user "$user" tee "$data/pgsh_port.conf" >/dev/null
		if as_user "$user" "$bindir/pg_ctl" -D "$data" -l "$dir/log" -w -t 300 start >/dev/null 2>&1; then
			started=1
			break
		fi
		# Lost a race for the port? Try another one.
		if [[ -f "$dir/log" ]] && tail -n 20 "$dir/log" | grep -qiE 'could not (bind|create listen)|address already in use'; then
			log "port $port taken, retrying with another port"
			continue
		fi
		break
	done
	if ((!started)); then
		[[ -f "$dir/log" ]] && tail -n 30 "$dir/log" >&2
		die "PostgreSQL failed to start (log: $dir/log)"
	fi

	local pw
	pw=$(cat "$pwfile")
	(
		umask 077
		printf 'postgres://%s:%s@127.0.0.1:%s/postgres?sslmode=disable\n' \
			"$PG_SUPERUSER" "$pw" "$port" >"$dir/url.tmp"
		mv -f "$dir/url.tmp" "$dir/url"
		chmod 0600 "$dir/url"
	)
	printf '%s\n' "$port" >"$dir/port"
	log "postgres started on 127.0.0.1:$port (data in $dir)"
}

cmd_stop() {
	[[ $# -eq 1 ]] || usage
	local dir=$1
	if [[ ! -d "$dir/data" ]]; then
		log "nothing to stop in $1"
		return 0
	fi
	dir=$(abs_dir "$dir")
	if [[ ! -f "$dir/data/postmaster.pid" ]]; then
		log "postgres in $dir is not running"
		return 0
	fi
	local bindir user
	bindir=$(cat "$dir/bindir" 2>/dev/null || find_bindir) ||
		die "cannot find pg_ctl to stop the server in $dir"
	user=$(stat -c %U "$dir/data")
	if as_user "$user" "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 300 stop >/dev/null 2>&1; then
		log "postgres in $dir stopped"
	else
		log "postgres in $dir was not running"
	fi
}

cmd_status() {
	[[ $# -eq 1 ]] || usage
	[[ -d "$1" ]] || return 1
	is_running "$(abs_dir "$1")"
}

[[ $# -ge 1 ]] || usage
action=$1
shift
case $action in
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
status) cmd_status "$@" ;;
*) usage ;;
esac
