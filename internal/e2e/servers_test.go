package e2e

// The servers the reliability tests set up beyond a plain throwaway one
// (scripts/pg.sh): a server that only speaks TLS, with certificates this file
// makes, and a primary with a synchronous streaming standby. The harness
// owns them in Go; scripts/pg.sh still makes each server, as it does for
// every test.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// owner is the uid and gid that own the server's data directory (the user
// the server runs as), so that the files given to the server are its own.
func (s *server) owner() (uid, gid int) {
	s.t.Helper()
	fi, err := os.Stat(filepath.Join(s.dir, "data"))
	if err != nil {
		s.t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// writeOwned writes a file of the server's user (an existing file keeps its
// owner and mode).
func (s *server) writeOwned(path string, data []byte, mode os.FileMode) {
	s.t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		s.t.Fatal(err)
	}
	uid, gid := s.owner()
	if err := os.Lchown(path, uid, gid); err != nil {
		s.t.Fatal(err)
	}
}

// command runs a PostgreSQL program of the server's installation as the
// user owning its data directory, from / (runuser when that is not us).
func (s *server) command(prog string, args ...string) *exec.Cmd {
	s.t.Helper()
	fi, err := os.Stat(filepath.Join(s.dir, "data"))
	if err != nil {
		s.t.Fatal(err)
	}
	argv := append([]string{filepath.Join(s.read("bindir"), prog)}, args...)
	var cmd *exec.Cmd
	if owner := fileOwner(fi); owner != "" && owner != currentUser() {
		cmd = exec.Command("runuser", append([]string{"-u", owner, "--"}, argv...)...)
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	cmd.Dir = "/"
	return cmd
}

// exec runs statements as the superuser on the server's postgres database.
func (s *server) exec(sqls ...string) {
	s.t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range sqls {
		if _, err := c.Exec(ctx, q); err != nil {
			s.t.Fatalf("%s: %v", q, err)
		}
	}
}

// testCA is a certificate authority of the test's own.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// newCertificate makes an EC P-256 key and a certificate valid for two days,
// signed by ca (self-signed when ca is nil), and writes NAME.crt (and
// NAME.key when keep) into dir.
func newCertificate(t *testing.T, dir, name string, ca *testCA, tmpl *x509.Certificate, keep bool) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)); err != nil {
		t.Fatal(err)
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(48*time.Hour)
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if keep {
		b, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &testCA{cert: cert, key: key}
}

// startTLSServer starts a throwaway server that accepts only TLS on TCP
// (pg_hba: hostnossl ... reject), with a certificate from a CA made here.
// DIR/tls holds:
//
//	ca.crt                 the CA that signed the server certificate
//	server.crt/.key        the server's: subjectAltName IP:127.0.0.1, DNS:localhost
//	wrong-ca.crt           another CA, which signed nothing the server uses
//	wrongname.crt/.key     from the right CA, for db.example.net only
//
// It returns the superuser URL with sslmode=verify-full. The server reads its
// certificate from data/pgsh_tls.conf: point it at tls/wrongname.* and
// reload to test host name checks.
func startTLSServer(t *testing.T) (*server, string) {
	t.Helper()
	s := startServer(t)
	dir := filepath.Join(s.dir, "tls")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	caTmpl := func(cn string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	}
	serverTmpl := func(ips []net.IP, dns ...string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: "ipam test server"}, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses: ips, DNSNames: dns}
	}
	ca := newCertificate(t, dir, "ca", nil, caTmpl("ipam test ca"), false)
	newCertificate(t, dir, "wrong-ca", nil, caTmpl("ipam test wrong-ca"), false)
	newCertificate(t, dir, "server", ca, serverTmpl([]net.IP{net.IPv4(127, 0, 0, 1)}, "localhost"), true)
	newCertificate(t, dir, "wrongname", ca, serverTmpl(nil, "db.example.net"), true)
	uid, gid := s.owner()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Lchown(filepath.Join(dir, e.Name()), uid, gid); err != nil {
			t.Fatal(err)
		}
	}

	data := filepath.Join(s.dir, "data")
	s.writeOwned(filepath.Join(data, "pgsh_tls.conf"), []byte(fmt.Sprintf("ssl = on\nssl_cert_file = '%s'\nssl_key_file = '%s'\nssl_ca_file = ''\n",
		filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"))), 0o644)
	s.appendConf("postgresql.conf", "include_if_exists = 'pgsh_tls.conf'\n", false)
	// Reject TCP without TLS before any other rule matches.
	s.appendConf("pg_hba.conf", "hostnossl all all all reject\n", true)
	s.pgCtl("reload")

	u := fmt.Sprintf("postgres://ipam:%s@127.0.0.1:%s/postgres?sslmode=verify-full&sslrootcert=%s", s.password(), s.port(), filepath.Join(dir, "ca.crt"))
	// The reload is asynchronous: wait until a verified TLS session works.
	var lastErr error
	for deadline := time.Now().Add(waitBound); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		c, err := pgx.Connect(ctx, u)
		if err == nil {
			c.Close(ctx)
			cancel()
			return s, u
		}
		cancel()
		lastErr = err
	}
	t.Fatalf("the server does not accept verified TLS connections on 127.0.0.1:%s: %v", s.port(), lastErr)
	return nil, ""
}

// appendConf adds a line to one of the server's configuration files, at its
// end or (first) at its start.
func (s *server) appendConf(name, line string, first bool) {
	s.t.Helper()
	path := filepath.Join(s.dir, "data", name)
	old, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatal(err)
	}
	conf := string(old) + line
	if first {
		conf = line + string(old)
	}
	s.writeOwned(path, []byte(conf), 0o600)
}

// startReplica starts a primary (scripts/pg.sh) and a synchronous streaming
// standby cloned from it with pg_basebackup -R, and returns both and the URL
// that names both hosts with target_session_attrs=read-write.
//
// Durability: scripts/pg.sh starts test servers with fsync,
// synchronous_commit and full_page_writes off. The primary gets them back
// on, and synchronous_standby_names = '*' with synchronous_commit = on: a
// commit is acknowledged only once the standby has flushed its WAL, so every
// acknowledged commit survives the loss of the primary. The standby does not
// inherit synchronous_standby_names (it is set after the base backup), so once
// promoted it does not wait for a standby of its own.
func startReplica(t *testing.T) (primary, standby *server, ha string) {
	t.Helper()
	primary = startServer(t)
	primary.exec(`ALTER SYSTEM SET fsync = on`, `ALTER SYSTEM SET full_page_writes = on`,
		`ALTER SYSTEM SET synchronous_commit = on`, `ALTER SYSTEM SET wal_keep_size = '256MB'`, `SELECT pg_reload_conf()`)

	standby = &server{t: t, dir: serverDir(t, "standby")}
	t.Cleanup(func() { scriptQuiet(t, "pg.sh", "stop", standby.dir) })
	uid, gid := primary.owner()
	for _, f := range []struct {
		name string
		data string
	}{
		{"bindir", primary.read("bindir") + "\n"},
		{"pwfile", primary.password() + "\n"},
		// pg_basebackup -R writes passfile= into primary_conninfo: the password stays out of argv and logs.
		{"pgpass", fmt.Sprintf("127.0.0.1:%s:*:ipam:%s\n", primary.port(), primary.password())},
	} {
		path := filepath.Join(standby.dir, f.name)
		if err := os.WriteFile(path, []byte(f.data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(path, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(standby.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(standby.dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	backup := primary.command("pg_basebackup", "-h", "127.0.0.1", "-p", primary.port(), "-U", "ipam",
		"-D", filepath.Join(standby.dir, "data"), "-R", "-X", "stream", "-c", "fast")
	backup.Env = append(os.Environ(), "PGPASSFILE="+filepath.Join(standby.dir, "pgpass"))
	if out, err := backup.CombinedOutput(); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, out)
	}

	// A port free when picked may be taken before the standby binds it
	// (other servers start in parallel tests): then try another.
	data, logFile := filepath.Join(standby.dir, "data"), filepath.Join(standby.dir, "log")
	var port string
	for attempt := 1; ; attempt++ {
		port = freePort(t)
		standby.writeOwned(filepath.Join(data, "pgsh_port.conf"), []byte("port = "+port+"\nunix_socket_directories = ''\n"), 0o600)
		out, err := standby.command("pg_ctl", "-D", data, "-l", logFile, "-w", "-t", "300", "start").CombinedOutput()
		if err == nil {
			break
		}
		log, _ := os.ReadFile(logFile)
		if attempt == 5 || !strings.Contains(string(log), "could not create any TCP/IP sockets") {
			t.Fatalf("the standby failed to start: %v\n%s\n%s", err, out, log)
		}
	}
	pw := primary.password()
	if err := os.WriteFile(filepath.Join(standby.dir, "port"), []byte(port+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(standby.dir, "url"), []byte(fmt.Sprintf("postgres://ipam:%s@127.0.0.1:%s/postgres?sslmode=disable\n", pw, port)), 0o600); err != nil {
		t.Fatal(err)
	}
	ha = fmt.Sprintf("postgres://ipam:%s@127.0.0.1:%s,127.0.0.1:%s/postgres?sslmode=disable&target_session_attrs=read-write", pw, primary.port(), port)

	// Only now make the standby synchronous: set before the base backup, the
	// standby would inherit it and wait for a standby of its own once promoted.
	primary.exec(`ALTER SYSTEM SET synchronous_standby_names = '*'`, `SELECT pg_reload_conf()`)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, primary.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var state string
	for deadline := time.Now().Add(waitBound); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := c.QueryRow(ctx, `SELECT coalesce((SELECT sync_state FROM pg_stat_replication LIMIT 1), '')`).Scan(&state); err != nil {
			t.Fatal(err)
		}
		if state == "sync" {
			return primary, standby, ha
		}
	}
	t.Fatalf("the standby did not become synchronous (state %q; logs: %s/log, %s)", state, primary.dir, logFile)
	return nil, nil, ""
}

// crash stops the server at once, as a crash would (immediate mode).
func (s *server) crash() { s.pgCtl("-m", "immediate", "-w", "-t", "300", "stop") }

// promote promotes a standby.
func (s *server) promote() { s.pgCtl("-w", "-t", "300", "promote") }

// freePort is a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
