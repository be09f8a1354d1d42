package provider

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/overlayipam/terraform-provider-ipam/internal/advice"
	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// Each class of failure gets its own title: one that never reached the
// database is named for that, not for the operation that never ran.
func TestCoreErrorTitles(t *testing.T) {
	const op = "Unable to Allocate Node Address"
	for _, c := range []struct {
		err   error
		title string
	}{
		{&ipam.RefusedError{Addr: "db:5432"}, "IPAM Database Refused the Connection"},
		{&ipam.UnavailableError{Addr: "db:5432", Err: errors.New("x")}, "IPAM Database Unreachable"},
		{&ipam.BusyError{What: "x"}, "IPAM Database Busy"},
		{&ipam.TimeoutError{What: "x"}, "IPAM Statement Timed Out"},
		{&ipam.ReadOnlyError{Msg: "x"}, "IPAM Database Is Read-Only"},
		{&ipam.DeniedError{Msg: "x"}, "IPAM Database Role Lacks a Grant"},
		{&ipam.SchemaError{Msg: "x"}, "IPAM Database Schema Mismatch"},
		{&ipam.ExhaustedError{PoolID: "p"}, op + ": Pool Exhausted"},
		{&ipam.OwnerConflictError{}, op + ": Owner Managed Elsewhere"},
		{&ipam.AddressInUseError{}, op + ": Address In Use"},
		{&ipam.AddressCoolingError{}, op + ": Address Cooling Down"},
		{ipam.ErrNotFound, op + ": Not Found"},
		{&ipam.ConflictError{Msg: "x"}, op + ": Conflicting Change"},
		{errors.New("boom"), op},
	} {
		title, detail := coreErrorText(op, c.err)
		if title != c.title {
			t.Errorf("%T: title %q, want %q", c.err, title, c.title)
		}
		if ex := advice.For(c.err); !strings.Contains(detail, ex.Advice) || !strings.HasSuffix(detail, c.err.Error()) {
			t.Errorf("%T: the detail lacks the advice, or does not end with the error:\n%s", c.err, detail)
		}
	}
}

// Configure against a database that is not there, or that refuses us: the
// title names that, and the advice fits it.
func TestConfigureErrorsAdvise(t *testing.T) {
	ctx := context.Background()
	diags := configureWith(ctx, t, "postgres://ipam:Sup3rSecretPw@127.0.0.1:1/ipam?sslmode=disable")
	if len(diags) != 1 || diags[0].Summary() != "IPAM Database Unreachable" ||
		!strings.Contains(diags[0].Detail(), "Check that host and port") || strings.Contains(diags[0].Summary(), "Migrate") {
		t.Fatalf("unreachable: %v", diags)
	}
	u, err := url.Parse(testdb.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("no_such_role_provider", "Sup3rSecretPw")
	diags = configureWith(ctx, t, u.String())
	if len(diags) != 1 || diags[0].Summary() != "IPAM Database Refused the Connection" {
		t.Fatalf("refused: %v", diags)
	}
	d := diags[0].Detail()
	for _, want := range []string{"ipam_refused", "credentials", "database name", "TLS"} {
		if !strings.Contains(d, want) {
			t.Errorf("refused: the detail lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "running and reachable") || strings.Contains(d, "Sup3rSecretPw") {
		t.Errorf("refused: wrong advice, or the password shown:\n%s", d)
	}
}

// A configure that waited for the database before it answered says so.
func TestConfigureWaitIsWarned(t *testing.T) {
	ctx := context.Background()
	target, err := url.Parse(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	// Up after 9 s: the wait is reported every 5 s (ipam.WaitReportInterval),
	// and under make test's load a report can come seconds late; at 6 s a
	// late report found the database already up and said nothing.
	addr := lateForwarder(t, target.Host, 9*time.Second)
	u := *target
	u.Host = addr
	diags := configureWithFailover(ctx, t, u.String(), "30s")
	if diags.HasError() {
		t.Fatalf("configure failed: %v", diags)
	}
	var warned bool
	for _, d := range diags {
		if d.Summary() == "Waited for the IPAM Database" && strings.Contains(d.Detail(), addr) &&
			strings.Contains(d.Detail(), "waiting for the database at "+addr) {
			warned = true
		}
	}
	if !warned {
		t.Fatalf("configure waited for the database and said nothing: %v", diags)
	}
}

// lateForwarder reserves a local port where nothing listens (connections are
// refused) until after, then forwards it to target: a database that comes
// up late.
func lateForwarder(t *testing.T, target string, after time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var mu sync.Mutex
	done := false
	var ln net.Listener
	timer := time.AfterFunc(after, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			t.Errorf("listen again on %s: %v", addr, err)
			return
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					s, err := net.Dial("tcp", target)
					if err != nil {
						return
					}
					defer s.Close()
					go func() { _, _ = io.Copy(s, c) }()
					_, _ = io.Copy(c, s)
				}()
			}
		}()
	})
	t.Cleanup(func() {
		timer.Stop()
		mu.Lock()
		defer mu.Unlock()
		done = true
		if ln != nil {
			ln.Close()
		}
	})
	return addr
}

// A wait reported during a plan, apply or read is warned of once, on the
// next answer that did not fail: not silently, and not again and again.
func TestGuardWarnsOfAWaitOnce(t *testing.T) {
	g := &contextGuard{waits: &waits{}}
	if d := g.warnWaited(nil); len(d) != 0 {
		t.Fatalf("a warning without a wait: %v", d)
	}
	g.waits.report(context.Background(), ipam.Wait{Addr: "db:5432", Waited: 7 * time.Second, Bound: 30 * time.Second})
	g.waits.report(context.Background(), ipam.Wait{Addr: "db:5432", Waited: 5 * time.Second, Bound: 30 * time.Second})
	// An answer that failed names its failure: the wait waits for one that
	// did not.
	failed := []*tfprotov6.Diagnostic{{Severity: tfprotov6.DiagnosticSeverityError, Summary: "IPAM Database Unreachable"}}
	if d := g.warnWaited(failed); len(d) != 1 {
		t.Fatalf("a failed answer carries the wait's warning: %+v", d)
	}
	d := g.warnWaited(nil)
	if len(d) != 1 || d[0].Summary != "Waited for the IPAM Database" ||
		!strings.Contains(d[0].Detail, "waited at least 7s") || !strings.Contains(d[0].Detail, "waiting for the database at db:5432, 7 s of 30 s") {
		t.Fatalf("the warning of a 7 s wait: %+v", d)
	}
	if d := g.warnWaited(nil); len(d) != 0 {
		t.Fatalf("the same wait warned of twice: %v", d)
	}
	// A lock wait is told as one, naming who held the lock.
	g.waits.report(context.Background(), ipam.Wait{Addr: "db:5432", Waited: 6 * time.Second, Bound: 30 * time.Second, Lock: true,
		Holders: "pid 42 (ipamctl, idle in transaction, in a transaction for 9 s)"})
	d = g.warnWaited(nil)
	if len(d) != 1 || d[0].Summary != "Waited for a Lock in the IPAM Database" || !strings.Contains(d[0].Detail, "waited at least 6s") ||
		!strings.Contains(d[0].Detail, "waiting for a lock in the database at db:5432, 6 s of 30 s (lock_timeout): held by pid 42 (ipamctl, idle in transaction") {
		t.Fatalf("the warning of a 6 s lock wait: %+v", d)
	}
	// A server that answers neither the call nor a look aside.
	g.waits.report(context.Background(), ipam.Wait{Addr: "db:5432", Waited: 12 * time.Second, Bound: 120 * time.Second, Stalled: true})
	d = g.warnWaited(nil)
	if len(d) != 1 || d[0].Summary != "Waited for the IPAM Database" || !strings.Contains(d[0].Detail, "waited at least 12s for an answer") ||
		!strings.Contains(d[0].Detail, "12 s of 120 s (statement_timeout): a look aside from the call had no answer either") {
		t.Fatalf("the warning of a 12 s wait for an answer: %+v", d)
	}
}
