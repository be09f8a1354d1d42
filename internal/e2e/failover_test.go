package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// A call rides out a database with no usable server up to the failover
// bound, and past it names each host and what it answered: a restart (the
// server refuses connections, then answers again; also behind PgBouncer), a server that turned
// read-only under open connections (a demoted primary: 25006 on the pool's
// sessions), and target_session_attrs=read-write finding only a read-only
// server. Nothing is allocated twice, and the calls that fail say what each
// host answered, never "cannot be reached" for a server that answered.
func TestFailoverBound(t *testing.T) {
	srv := startServer(t)
	url := createDatabase(t, srv.url("postgres"), "ipam")
	seed(t, url)
	ctx := context.Background()
	// The bounds of the calls that must ride an outage out are waitBound,
	// generous for a busy machine; the connect timeout too (a connection
	// attempt timing out would hide what the server answered).
	open := func(u string, bound time.Duration) *ipam.Client {
		st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: u, FailoverTimeout: bound, ConnectTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	alloc := func(st *ipam.Client, id string) (ipam.AllocateResult, error) {
		return st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: ipam.Owner{Kind: ipam.OwnerNode, ID: id, NodeID: id}})
	}
	// outage runs alloc while the database is out for about d, ended by end.
	outage := func(st *ipam.Client, id string, d time.Duration, end func()) (time.Duration, error) {
		done := make(chan error, 1)
		start := time.Now()
		go func() { _, err := alloc(st, id); done <- err }()
		time.Sleep(d)
		end()
		err := <-done
		return time.Since(start), err
	}
	st := open(url, waitBound)
	if _, err := alloc(st, "warm"); err != nil {
		t.Fatal(err)
	}

	// A restart shorter than the bound: the call in flight succeeds.
	srv.stop()
	took, err := outage(st, "restart", 2*time.Second, srv.restart)
	if err != nil {
		t.Fatalf("an allocation across a 2s restart failed: %v", err)
	}
	if took < 2*time.Second {
		t.Errorf("the allocation answered after %s, before the server was back", took)
	}

	// The default bound: a client that has reached the server rides a
	// restart out too (the first contact's cut is for a client no server
	// has answered yet).
	byDefault := open(url, 0)
	if _, err := alloc(byDefault, "default-warm"); err != nil {
		t.Fatal(err)
	}
	srv.stop()
	if _, err := outage(byDefault, "default-restart", 2*time.Second, srv.restart); err != nil {
		t.Fatalf("an allocation of a client with the default bound across a 2s restart failed: %v", err)
	}

	// The same restart behind a transaction-pooling PgBouncer: PgBouncer
	// answers for the server ("server login has been failing" for its
	// server_login_retry), and the call rides that out too.
	pooled := open(startPgBouncer(t, srv.url("postgres"), "transaction", "ipam"), waitBound)
	if _, err := alloc(pooled, "pooled-warm"); err != nil {
		t.Fatal(err)
	}
	srv.stop()
	if _, err := outage(pooled, "pooled-restart", 2*time.Second, srv.restart); err != nil {
		t.Fatalf("an allocation through PgBouncer across a 2s restart failed: %v", err)
	}

	// The server turns read-only under the pool's open sessions, then
	// writable again: the call in flight succeeds.
	readOnly := func(on bool) {
		v := "off"
		if on {
			v = "on"
		}
		sqlExec(t, srv.url("postgres"), "ALTER SYSTEM SET default_transaction_read_only = "+v)
		sqlExec(t, srv.url("postgres"), "SELECT pg_reload_conf()")
	}
	readOnly(true)
	if _, err := outage(st, "readonly", 2*time.Second, func() { readOnly(false) }); err != nil {
		t.Fatalf("an allocation across 2s of a read-only server failed: %v", err)
	}

	// Past the bound: ipam_unavailable, saying what the server answered.
	readOnly(true)
	_, err = alloc(open(url, time.Second), "past-bound")
	if ipam.Code(err) != ipam.CodeUnavailable || !strings.Contains(err.Error(), "is read-only") ||
		strings.Contains(err.Error(), "cannot be reached") || !strings.Contains(err.Error(), "failover_timeout is 1s") {
		t.Errorf("a read-only server past the bound: got %v, want ipam_unavailable saying it is read-only", err)
	}
	_, err = alloc(open(url+"&target_session_attrs=read-write", time.Second), "past-bound-tsa")
	if ipam.Code(err) != ipam.CodeUnavailable || !strings.Contains(err.Error(), "127.0.0.1:"+srv.port()+" is read-only") ||
		strings.Contains(err.Error(), "cannot be reached") {
		t.Errorf("target_session_attrs=read-write finding only a read-only server: got %v", err)
	}
	readOnly(false)

	// Refused for good: no waiting, the server's words. A call that waited
	// would take the whole bound (waitBound); one that did not ends before
	// it however busy the machine.
	start := time.Now()
	_, err = alloc(open(strings.Replace(url, "/ipam?", "/no_such_db?", 1), waitBound), "refused")
	if ipam.Code(err) != ipam.CodeRefused || !strings.Contains(err.Error(), "no_such_db") || time.Since(start) >= waitBound {
		t.Errorf("a database that does not exist: got %v after %s, want ipam_refused at once", err, time.Since(start))
	}
	if n := checkInvariants(t, url); n == 0 {
		t.Error("no allocations checked")
	}
	got := activeByOwner(t, url)
	for _, id := range []string{"warm", "restart", "default-restart", "pooled-restart", "readonly"} {
		if got[ipam.OwnerNode+"/"+id] == "" {
			t.Errorf("node %s holds no address", id)
		}
	}
	if got[ipam.OwnerNode+"/past-bound"] != "" {
		t.Errorf("the allocation that failed past the bound holds %s", got[ipam.OwnerNode+"/past-bound"])
	}
}

// A connection string with the wrong port (nothing listens there), as a
// Terraform user sees it: Terraform shows nothing from a provider while it
// waits, so the plan fails after the first contact's short wait, and its
// error names the host and port, says that nothing listens there and no
// server has answered yet, that this first contact waited 5s rather than
// failover_timeout's 30s, and what to check. With failover_timeout set, the
// whole bound is waited and named. The words say what happened; no time is
// measured.
func TestWrongPortSaysWhatHappened(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	url := fmt.Sprintf("postgres://ipam:Sup3rSecretPw@127.0.0.1:%d/ipam?sslmode=disable", port)
	where := fmt.Sprintf("127.0.0.1:%d", port)
	plan := func(w *workdir) string {
		t.Helper()
		out, err := w.try("plan", "-input=false")
		if err == nil {
			t.Fatalf("the plan succeeded against a port where nothing listens:\n%s", out)
		}
		if strings.Contains(string(out), "Sup3rSecretPw") {
			t.Errorf("the output shows the password:\n%s", out)
		}
		// Terraform may wrap the diagnostic's lines.
		return strings.Join(strings.Fields(string(out)), " ")
	}

	text := plan(newWorkdir(t, url, mixed("wp", 3)))
	for _, want := range []string{
		"IPAM Database Unreachable",
		"ipam_unavailable: the IPAM database at " + where + " cannot be reached",
		where + " refused the connection (nothing listens there)",
		"no server has answered yet: a first contact waits 5s, not failover_timeout's 30s",
		"a wrong host or port, or PostgreSQL not running",
		"Check that host and port",
		"set failover_timeout (provider) / --failover-timeout (ipamctl) explicitly",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the error lacks %q:\n%s", want, text)
		}
	}

	text = plan(newWorkdirWith(t, url, `  failover_timeout = "2s"`, mixed("wp", 3)))
	for _, want := range []string{"IPAM Database Unreachable", where + " refused the connection (nothing listens there)",
		"failover_timeout is 2s", "The call waited"} {
		if !strings.Contains(text, want) {
			t.Errorf("with failover_timeout set, the error lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "first contact") {
		t.Errorf("with failover_timeout set, the first contact was cut short:\n%s", text)
	}
}
