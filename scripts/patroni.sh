#!/usr/bin/env bash
# A throwaway Patroni cluster on loopback, for failover tests: one etcd and
# three PostgreSQL members managed by Patroni, with synchronous replication.
#
#   scripts/patroni.sh start DIR        start it; waits for a leader and a
#                                       synchronous standby
#   scripts/patroni.sh leader DIR       print the leader's member name (m0..m2)
#   scripts/patroni.sh wait-sync DIR    wait until a synchronous standby streams
#   scripts/patroni.sh switchover DIR   planned switchover to a synchronous standby
#   scripts/patroni.sh kill-leader DIR  SIGKILL the leader's postmaster (Patroni
#                                       fails over: primary_start_timeout is 0)
#   scripts/patroni.sh list DIR         patronictl list
#   scripts/patroni.sh stop DIR         stop everything (fine if not running)
#
# After `start`, DIR contains
#   url    postgres://ipam:PASSWORD@127.0.0.1:P0,127.0.0.1:P1,127.0.0.1:P2/postgres?sslmode=disable&target_session_attrs=read-write
#   mN/    each member's patroni.yml, data/ and log; etcd/ and etcd.log
#
# Settings that matter for the tests: synchronous_mode (a commit is
# acknowledged only once a synchronous standby has it, and Patroni fails over
# only to a synchronous standby), primary_start_timeout 0 (a killed primary is
# failed over at once instead of restarted in place), ttl 10 s and loop_wait
# 1 s (a failover within seconds). fsync is off: the tests kill processes, not
# machines, so the page cache survives.
#
# The Debian packages patroni and etcd-server (and postgresql) are installed
# when missing (as root); everything runs as the `postgres` system user (or
# `ipamtest`) when run as root. The password is never printed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

MEMBERS=3
SCOPE=ipamtest

usage() {
	sed -n '5,12p' "${BASH_SOURCE[0]}" | sed 's/^# //' >&2
	exit 2
}

install_packages() {
	command -v patroni >/dev/null 2>&1 && command -v etcd >/dev/null 2>&1 && return 0
	command -v apt-get >/dev/null 2>&1 || die "patroni/etcd not found and apt-get is not available"
	log "installing the Debian packages patroni and etcd-server"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y --no-install-recommends patroni etcd-server >&2
}

ensure_packages() {
	if ! command -v patroni >/dev/null 2>&1 || ! command -v etcd >/dev/null 2>&1; then
		[[ $(id -u) -eq 0 ]] || die "patroni and etcd not found; install them, e.g. 'sudo apt-get install patroni etcd-server'"
		with_lock install_packages
	fi
	command -v patroni >/dev/null 2>&1 || die "patroni installed but not on PATH"
}

ctl() { # DIR ARGS...
	local dir=$1
	shift
	patronictl -c "$dir/m0/patroni.yml" "$@"
}

# members_json DIR: patronictl list as JSON.
members_json() {
	ctl "$1" list -f json 2>/dev/null
}

cmd_leader() {
	members_json "$1" | /usr/bin/python3 -c '
import json, sys
for m in json.load(sys.stdin):
    if m.get("Role") == "Leader" and m.get("State") == "running":
        print(m["Member"]); break
else:
    sys.exit(1)'
}

# sync_member DIR: print a synchronous standby that streams, or fail.
sync_member() {
	members_json "$1" | /usr/bin/python3 -c '
import json, sys
for m in json.load(sys.stdin):
    if m.get("Role") == "Sync Standby" and m.get("State") in ("streaming", "running"):
        print(m["Member"]); break
else:
    sys.exit(1)'
}

cmd_wait_sync() {
	local dir=$1 i
	for ((i = 0; i < 600; i++)); do
		if cmd_leader "$dir" >/dev/null && sync_member "$dir" >/dev/null; then
			return 0
		fi
		sleep 0.2
	done
	ctl "$dir" list >&2 || true
	die "no leader with a synchronous standby after 120s"
}

cmd_start() {
	local dir=$1
	ensure_packages
	local bin runas pw reppw
	bin=$(find_bindir) || die "PostgreSQL server binaries not found (run scripts/pg.sh once, or install postgresql)"
	runas=$(server_user)
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd -P)
	if [[ -f "$dir/url" ]] && cmd_leader "$dir" >/dev/null 2>&1; then
		log "already running"
		return 0
	fi
	pw=$(head -c 64 /dev/urandom | LC_ALL=C tr -dc 'A-Za-z0-9' | head -c 24)
	reppw=$(head -c 64 /dev/urandom | LC_ALL=C tr -dc 'A-Za-z0-9' | head -c 24)
	local eport pport
	eport=$(pick_port)
	pport=$(pick_port)
	local ports=() rports=() i
	for ((i = 0; i < MEMBERS; i++)); do
		ports+=("$(pick_port)")
		rports+=("$(pick_port)")
	done
	mkdir -p "$dir/etcd"
	for ((i = 0; i < MEMBERS; i++)); do
		mkdir -p "$dir/m$i"
		(
			umask 077
			cat >"$dir/m$i/patroni.yml" <<EOF
scope: $SCOPE
name: m$i
restapi:
  listen: 127.0.0.1:${rports[i]}
  connect_address: 127.0.0.1:${rports[i]}
etcd3:
  host: 127.0.0.1:$eport
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    primary_start_timeout: 0
    postgresql:
      use_pg_rewind: false
      parameters:
        max_connections: 200
        fsync: "off"
        full_page_writes: "off"
        synchronous_commit: "on"
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
  initdb:
    - encoding: UTF8
    - locale: C
    - auth: scram-sha-256
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
postgresql:
  listen: 127.0.0.1:${ports[i]}
  connect_address: 127.0.0.1:${ports[i]}
  data_dir: $dir/m$i/data
  bin_dir: $bin
  pgpass: $dir/m$i/pgpass
  authentication:
    superuser:
      username: ipam
      password: $pw
    replication:
      username: replicator
      password: $reppw
  parameters:
    unix_socket_directories: '$dir/m$i'
log:
  dir: $dir/m$i
  level: WARNING
EOF
		)
	done
	if [[ $(id -u) -eq 0 && $runas != root ]]; then
		chown -R "$runas:" "$dir"
		chmod 0700 "$dir"
		make_traversable "$runas" "$dir"
	fi
	as_user "$runas" bash -c "nohup etcd --name e0 --data-dir '$dir/etcd' \
		--listen-client-urls http://127.0.0.1:$eport --advertise-client-urls http://127.0.0.1:$eport \
		--listen-peer-urls http://127.0.0.1:$pport --initial-advertise-peer-urls http://127.0.0.1:$pport \
		--initial-cluster e0=http://127.0.0.1:$pport --log-level warn >'$dir/etcd.log' 2>&1 & echo \$! >'$dir/etcd.pid'"
	for ((i = 0; i < 100; i++)); do
		port_in_use "$eport" && break
		sleep 0.1
	done
	port_in_use "$eport" || die "etcd did not start (log: $dir/etcd.log)"
	for ((i = 0; i < MEMBERS; i++)); do
		as_user "$runas" bash -c "nohup patroni '$dir/m$i/patroni.yml' >'$dir/m$i/patroni.out' 2>&1 & echo \$! >'$dir/m$i/patroni.pid'"
		# The first member bootstraps the cluster; the others clone it.
		((i > 0)) || cmd_wait_leader "$dir"
	done
	(
		umask 077
		local hosts=""
		for ((i = 0; i < MEMBERS; i++)); do
			hosts+="${hosts:+,}127.0.0.1:${ports[i]}"
		done
		printf 'postgres://ipam:%s@%s/postgres?sslmode=disable&target_session_attrs=read-write\n' "$pw" "$hosts" >"$dir/url"
	)
	cmd_wait_sync "$dir"
	log "patroni cluster $SCOPE up: leader $(cmd_leader "$dir"), synchronous standby $(sync_member "$dir")"
}

cmd_wait_leader() {
	local dir=$1 i
	for ((i = 0; i < 600; i++)); do
		cmd_leader "$dir" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	tail -n 30 "$dir"/m*/patroni.out >&2 2>/dev/null || true
	die "no leader after 120s"
}

cmd_switchover() {
	local dir=$1 leader cand
	cmd_wait_sync "$dir"
	leader=$(cmd_leader "$dir")
	cand=$(sync_member "$dir")
	ctl "$dir" switchover "$SCOPE" --leader "$leader" --candidate "$cand" --force >&2
	log "switchover from $leader to $cand"
}

cmd_kill_leader() {
	local dir=$1 leader pid
	cmd_wait_sync "$dir"
	leader=$(cmd_leader "$dir")
	pid=$(head -n 1 "$dir/$leader/data/postmaster.pid")
	kill -KILL "$pid"
	log "killed the postmaster of leader $leader (pid $pid)"
}

cmd_stop() {
	local dir=$1 f pid i
	for f in "$dir"/m*/patroni.pid "$dir/etcd.pid"; do
		[[ -f "$f" ]] || continue
		pid=$(cat "$f")
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 300; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$f"
	done
	# A postmaster left behind by a killed Patroni.
	for f in "$dir"/m*/data/postmaster.pid; do
		[[ -f "$f" ]] || continue
		kill -QUIT "$(head -n 1 "$f")" 2>/dev/null || true
	done
	log "stopped"
}

[[ $# -eq 2 ]] || usage
case $1 in
start) cmd_start "$2" ;;
stop) cmd_stop "$2" ;;
leader) cmd_leader "$2" ;;
wait-sync) cmd_wait_sync "$2" ;;
switchover) cmd_switchover "$2" ;;
kill-leader) cmd_kill_leader "$2" ;;
list) ctl "$2" list ;;
*) usage ;;
esac
