# shellcheck shell=bash
# Helpers shared by the scripts that start throwaway servers (pg.sh,
# pgbouncer.sh, patroni.sh). It defines their log and die, which name the
# script that sources it.

# log MSG...: a line on stderr, prefixed with the script's name.
log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }

# die MSG...: log an error and exit 1.
die() {
	log "error: $*"
	exit 1
}

# The unprivileged user servers run as when we are root and there is no
# `postgres` user (PostgreSQL and PgBouncer refuse to run as root).
FALLBACK_USER=ipamtest
LOCK_FILE=${TMPDIR:-/tmp}/ipam-pg-setup.lock

# as_user USER CMD...: run CMD as USER (directly when that is us), from /.
as_user() {
	local user=$1
	shift
	if [[ $(id -un) == "$user" ]]; then
		(cd / && "$@")
	elif command -v runuser >/dev/null 2>&1; then
		(cd / && runuser -u "$user" -- "$@")
	else
		local cmd
		cmd=$(printf '%q ' "$@")
		(cd / && su -s /bin/sh "$user" -c "$cmd")
	fi
}

# port_in_use PORT: true if something accepts connections on 127.0.0.1:PORT.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# pick_port: print a free TCP port on 127.0.0.1.
pick_port() {
	local port i lo=10000 hi=32767 eph
	# Stay below the kernel's ephemeral range: a port used as the local end of
	# a client connection (tests open many) cannot be bound by a server.
	if read -r eph _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && ((eph > lo + 1000)); then
		hi=$((eph - 1))
	fi
	for ((i = 0; i < 200; i++)); do
		port=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
		if ! port_in_use "$port"; then
			echo "$port"
			return 0
		fi
	done
	die "could not find a free TCP port"
}

# with_lock CMD...: run CMD while holding a machine-wide lock (parallel starts).
with_lock() {
	if command -v flock >/dev/null 2>&1; then
		(
			flock 9
			"$@"
		) 9>>"$LOCK_FILE"
	else
		"$@"
	fi
}

create_fallback_user() {
	id -u "$FALLBACK_USER" >/dev/null 2>&1 && return 0
	local nologin=/usr/sbin/nologin
	[[ -x $nologin ]] || nologin=/bin/false
	useradd --system --no-create-home --home-dir /nonexistent \
		--shell "$nologin" "$FALLBACK_USER" >&2 ||
		id -u "$FALLBACK_USER" >/dev/null 2>&1 ||
		die "could not create system user $FALLBACK_USER"
}

# server_user: the user that runs the server.
server_user() {
	if [[ $(id -u) -ne 0 ]]; then
		id -un
		return 0
	fi
	if id -u postgres >/dev/null 2>&1; then
		echo postgres
		return 0
	fi
	with_lock create_fallback_user
	echo "$FALLBACK_USER"
}

# make_traversable USER DIR: make sure USER can reach DIR (adds o+x to ancestors if needed).
make_traversable() {
	local user=$1 dir=$2 p
	as_user "$user" test -x "$dir" 2>/dev/null && return 0
	# Walk from / down to DIR's parent; fix the first blocking directories.
	local ancestors=() i
	p=$(dirname "$dir")
	while [[ "$p" != / ]]; do
		ancestors+=("$p")
		p=$(dirname "$p")
	done
	for ((i = ${#ancestors[@]} - 1; i >= 0; i--)); do
		p=${ancestors[i]}
		if ! as_user "$user" test -x "$p" 2>/dev/null; then
			log "note: adding search permission (o+x) to $p so that user $user can reach $dir"
			chmod o+x "$p"
		fi
	done
	as_user "$user" test -x "$dir" || die "user $user cannot access $dir"
}

# find_bindir: print the directory holding initdb/pg_ctl (highest version), or fail.
find_bindir() {
	local d best=""
	while IFS= read -r d; do
		if [[ -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
			best=$d
		fi
	done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V)
	if [[ -n "$best" ]]; then
		printf '%s\n' "$best"
		return 0
	fi
	if command -v pg_config >/dev/null 2>&1; then
		d=$(pg_config --bindir 2>/dev/null || true)
		if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
			printf '%s\n' "$d"
			return 0
		fi
	fi
	for d in initdb pg_ctl; do
		command -v "$d" >/dev/null 2>&1 || return 1
	done
	dirname "$(command -v initdb)"
}
