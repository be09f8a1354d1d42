package engine_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// A lock held by another session: every allocation path (the one-statement
// fast path, the full path, a hold, a release) gives up within the lock
// timeout with ipam_busy naming what was locked, writes nothing, and works
// once the lock is gone.
func TestHeldLockIsBusyWithinTheBound(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	// A bound on a hang (a lock wait the lock timeout fails to end), not on
	// speed: ipam_busy, below, is what says the lock timeout ended the wait
	// (a statement timeout or the end of ctx gives another code). The lock
	// timeout is short: every case waits it in full, some more than once.
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: url, Actor: "terraform", LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	seamCluster(t, st, engine.Cluster{ID: "c1", Prefix: pfx("2001:db8::/48")})
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("held")}); err != nil {
		t.Fatal(err)
	}
	op, err := pgx.Connect(ctx, url) // an operator's session

	if err != nil {
		t.Fatal(err)
	}
	defer op.Close(ctx)
	tx, err := op.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE ipam_allocations IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// Sequential: every case runs while the parent holds the lock, which it
	// releases after them.
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"fast path", func() error {
			_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")})
			return err
		}},
		{"full path (exact claim)", func() error {
			_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n2"), Address: netip.MustParseAddr("2001:db8::77")})
			return err
		}},
		{"instance", func() error {
			_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: instance("i1")})
			return err
		}},
		{"release", func() error {
			_, err := st.Release(ctx, "c1", node("held"), 0)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := tc.call()
			took := time.Since(start)
			var busy *engine.BusyError
			if !errors.As(err, &busy) || engine.Code(err) != engine.CodeBusy || !strings.Contains(err.Error(), "ipam_allocations") {
				t.Fatalf("%s under a held lock: %v (after %s), want ipam_busy naming ipam_allocations", tc.name, err, took)
			}
		})
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := seamCount(t, op, `SELECT count(*) FROM ipam_allocations WHERE state <> 'free'`); n != 1 {
		t.Fatalf("%d allocations after the busy calls, want only the one made before", n)
	}
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")}); err != nil {
		t.Fatalf("after the lock is gone: %v", err)
	}
}

// The bounds and the planner settings live in each transaction, never in the
// session (a pooler shares sessions between clients) or in startup
// parameters (PgBouncer refuses unknown ones): a core transaction has them,
// the same connection outside it has the server's defaults.
func TestBoundsArePerTransaction(t *testing.T) {
	url := testdb.New(t)
	ctx := context.Background()
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: url, MaxConnections: 1, LockTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	show := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		var lock, stmt, seq string
		if err := q.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'),
				current_setting('enable_seqscan')`).Scan(&lock, &stmt, &seq); err != nil {
			t.Fatal(err)
		}
		return lock + " " + stmt + " " + seq
	}
	tx, err := st.BeginForTest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := show(tx); got != "3s 2min off" {
		t.Fatalf("inside a core transaction: %q, want \"3s 2min off\"", got)
	}
	// JIT is off by the transaction's own setting (the test databases turn
	// it off for the database too, so the source tells them apart).
	var jit, source string
	if err := tx.QueryRow(ctx, `SELECT setting, source FROM pg_settings WHERE name = 'jit'`).Scan(&jit, &source); err != nil {
		t.Fatal(err)
	}
	if jit != "off" || source != "session" {
		t.Fatalf("inside a core transaction jit is %s (set by %s), want off, set by the transaction", jit, source)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := show(st.RawPool()); got != "0 0 on" {
		t.Fatalf("the same session outside it: %q, want the server's defaults \"0 0 on\"", got)
	}
}
