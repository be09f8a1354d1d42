#!/usr/bin/env bash
# Throwaway PostgreSQL server that only accepts TLS on TCP, with a certificate
# from a test CA made here with openssl (for the reliability and security tests).
#
#   scripts/pg-tls.sh start DIR   start the server (scripts/pg.sh start DIR) and turn TLS on
#   scripts/pg-tls.sh stop DIR    stop it (scripts/pg.sh stop DIR)
#
# After `start`, DIR contains what scripts/pg.sh leaves there, plus:
#   tls/ca.crt              the test CA that signed the server certificate
#   tls/server.crt/.key     the server certificate: subjectAltName IP:127.0.0.1, DNS:localhost
#   tls/wrong-ca.crt        another CA, which signed nothing the server uses
#   tls/wrongname.crt/.key  a certificate from the right CA, for db.example.net only
#   url-tls                 postgres://ipam:PASSWORD@127.0.0.1:PORT/postgres?sslmode=verify-full&sslrootcert=DIR/tls/ca.crt
#
# TCP connections without TLS are rejected (pg_hba: hostnossl ... reject), so
# DIR/url (sslmode=disable) no longer works; use url-tls. The server reads its
# certificate from data/pgsh_tls.conf: point ssl_cert_file/ssl_key_file at
# tls/wrongname.* and `pg_ctl reload` to test host name checks.
# Keys are EC P-256; certificates are valid for two days. The password is never printed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

log() { printf 'pg-tls.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

usage() {
	echo "usage: scripts/pg-tls.sh start|stop DIR" >&2
	exit 2
}

# newkey FILE: an EC P-256 private key.
newkey() {
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
}

# mkca NAME: a self-signed CA certificate and key in tls/NAME.{crt,key}.
mkca() {
	local name=$1
	newkey "$tls/$name.key"
	openssl req -x509 -new -key "$tls/$name.key" -out "$tls/$name.crt" -days 2 -subj "/CN=ipam test $name" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}

# mkcert NAME SAN: a server certificate signed by tls/ca, in tls/NAME.{crt,key}.
mkcert() {
	local name=$1 san=$2 ext
	newkey "$tls/$name.key"
	openssl req -new -key "$tls/$name.key" -out "$tls/$name.csr" -subj "/CN=ipam test server"
	ext=$tls/$name.ext
	printf '%s\n' "subjectAltName=$san" "basicConstraints=critical,CA:FALSE" \
		"keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >"$ext"
	openssl x509 -req -in "$tls/$name.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
		-out "$tls/$name.crt" -days 2 -extfile "$ext" 2>&1 | grep -v '^Certificate request self-signature ok$' | grep -v '^subject=' >&2 || true
	[[ -s "$tls/$name.crt" ]] || die "openssl could not sign $name.crt"
	rm -f "$tls/$name.csr" "$ext"
}

cmd_start() {
	[[ $# -eq 1 ]] || usage
	command -v openssl >/dev/null 2>&1 || die "openssl is needed to make the test CA"
	bash "$here/pg.sh" start "$1"
	local dir
	dir=$(cd "$1" && pwd -P)
	local data=$dir/data user bindir port pw
	user=$(stat -c %U "$data")
	bindir=$(cat "$dir/bindir")
	port=$(cat "$dir/port")
	tls=$dir/tls
	if [[ ! -s "$tls/server.crt" ]]; then
		rm -rf "$tls"
		mkdir -p "$tls"
		mkca ca
		mkca wrong-ca
		mkcert server "IP:127.0.0.1,DNS:localhost"
		mkcert wrongname "DNS:db.example.net"
		rm -f "$tls"/*.srl "$tls/wrong-ca.key"
		chmod 0600 "$tls"/*.key
		chmod 0644 "$tls"/*.crt
		chmod 0755 "$tls"
		if [[ $(id -un) != "$user" ]]; then
			chown -R "$user:" "$tls"
		fi
	fi
	{
		echo "ssl = on"
		echo "ssl_cert_file = '$tls/server.crt'"
		echo "ssl_key_file = '$tls/server.key'"
		echo "ssl_ca_file = ''"
	} | as_user "$user" tee "$data/pgsh_tls.conf" >/dev/null
	if ! grep -q "pgsh_tls.conf" "$data/postgresql.conf"; then
		echo "include_if_exists = 'pgsh_tls.conf'" | as_user "$user" tee -a "$data/postgresql.conf" >/dev/null
	fi
	if ! grep -q "^hostnossl" "$data/pg_hba.conf"; then
		# Reject TCP without TLS before any other rule matches.
		as_user "$user" sh -c "{ echo 'hostnossl all all all reject'; cat '$data/pg_hba.conf'; } > '$data/pg_hba.conf.new' && mv '$data/pg_hba.conf.new' '$data/pg_hba.conf'"
	fi
	as_user "$user" "$bindir/pg_ctl" -D "$data" reload >/dev/null

	pw=$(cat "$dir/pwfile")
	(
		umask 077
		printf 'postgres://ipam:%s@127.0.0.1:%s/postgres?sslmode=verify-full&sslrootcert=%s\n' "$pw" "$port" "$tls/ca.crt" >"$dir/url-tls.tmp"
		mv -f "$dir/url-tls.tmp" "$dir/url-tls"
	)
	# The reload is asynchronous: wait until a verified TLS session works.
	local i
	for ((i = 0; i < 100; i++)); do
		if PGPASSWORD=$pw "$bindir/psql" -X -q -A -t \
			"postgres://ipam@127.0.0.1:$port/postgres?sslmode=verify-full&sslrootcert=$tls/ca.crt&connect_timeout=5" \
			-c 'SELECT 1' >/dev/null 2>&1; then
			log "TLS on 127.0.0.1:$port (CA $tls/ca.crt)"
			return 0
		fi
		sleep 0.1
	done
	tail -n 20 "$dir/log" >&2 || true
	die "the server does not accept verified TLS connections on 127.0.0.1:$port"
}

[[ $# -ge 1 ]] || usage
action=$1
shift
case $action in
start) cmd_start "$@" ;;
stop)
	[[ $# -eq 1 ]] || usage
	bash "$here/pg.sh" stop "$1"
	;;
*) usage ;;
esac
