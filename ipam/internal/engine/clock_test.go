package engine_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// A transaction judges a row by its statement's time, not by its own start:
// the caller's transaction that began before a release into a pool without
// a cooldown is given the released address, and may claim it. By the
// transaction's start the release came "after" it, so the address was still
// cooling to it: the pool was ipam_exhausted, and a claim address_cooling,
// though the address was free.
func TestATransactionBegunBeforeAReleaseSeesItsAddressFree(t *testing.T) {
	t.Parallel()
	eachRequestOfOneAddress(t, func(t *testing.T, s *scheduler, addr netip.Addr, req func(env string) engine.EnvIPv4Request) {
		ctx := context.Background()
		if _, err := s.client.AllocateEnvIPv4(ctx, nil, req("e1")); err != nil {
			t.Fatal(err)
		}
		tx := s.begin()
		if _, err := tx.Exec(ctx, `INSERT INTO placements VALUES ('e2', NULL)`); err != nil {
			t.Fatal(err)
		}
		// Database time moves on past the transaction's start before
		// the release commits.
		if _, err := s.db.Exec(ctx, `SELECT pg_sleep(0.02)`); err != nil {
			t.Fatal(err)
		}
		if err := s.client.ReleaseEnvIPv4(ctx, nil, "c1", "e1"); err != nil {
			t.Fatal(err)
		}
		got, err := s.client.AllocateEnvIPv4(ctx, tx, req("e2"))
		if err != nil {
			t.Fatalf("the address released (no cooldown) before the allocation's statement: %v (%s), want it", err, engine.Code(err))
		}
		if got.Address != addr {
			t.Fatalf("got %s, want %s", got.Address, addr)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if n := s.count(`SELECT count(*) FROM ipam_allocations WHERE owner_id = 'e2' AND state = 'active'`); n != 1 {
			t.Fatalf("%d active allocations of e2 after commit, want 1", n)
		}
	})
}

// ipam_now() is the statement's time in a READ COMMITTED transaction, and
// one time for the whole of a transaction of one snapshot (REPEATABLE READ,
// SERIALIZABLE), whose statements must judge every row alike: a check or a
// usage that spans statements would otherwise count a row cooling in one and
// reusable in the next.
func TestTheClockIsTheStatementsUnlessOneSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newScheduler(t, "")
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		tx, err := s.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
		if err != nil {
			t.Fatal(err)
		}
		var first, second, start time.Time
		if err := tx.QueryRow(ctx, `SELECT ipam_now(), now()`).Scan(&first, &start); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.01)`); err != nil {
			t.Fatal(err)
		}
		if err := tx.QueryRow(ctx, `SELECT ipam_now()`).Scan(&second); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if iso == pgx.ReadCommitted {
			if !second.After(first.Add(10*time.Millisecond - time.Microsecond)) {
				t.Errorf("%s: ipam_now() %s, then %s after 10 ms: want the second statement's time", iso, first, second)
			}
			continue
		}
		if !first.Equal(start) || !second.Equal(start) {
			t.Errorf("%s: ipam_now() %s, then %s, transaction start %s: want the start in every statement", iso, first, second, start)
		}
	}
}

// A request that waited for the row of a release judges it after that
// release: the pick (or the claim's probe) that waited reads the row as the
// release left it, released after the waiting statement's own time, and
// made again it takes the address. Judged by the waiting statement's time
// the row was still cooling: ipam_exhausted, or address_cooling for a
// claim, though the address was free once the wait ended.
func TestARequestThatWaitedForAReleaseTakesItsAddress(t *testing.T) {
	t.Parallel()
	eachRequestOfOneAddress(t, func(t *testing.T, s *scheduler, addr netip.Addr, req func(env string) engine.EnvIPv4Request) {
		ctx := context.Background()
		if _, err := s.client.AllocateEnvIPv4(ctx, nil, req("e1")); err != nil {
			t.Fatal(err)
		}
		if err := s.client.ReleaseEnvIPv4(ctx, nil, "c1", "e1"); err != nil {
			t.Fatal(err)
		}
		// A transaction takes the free address before the request
		// comes, and releases it after the request began to wait for
		// it.
		rtx := s.begin()
		if _, err := s.client.AllocateEnvIPv4(ctx, rtx, req("e1")); err != nil {
			t.Fatal(err)
		}
		got, err := allocateAcrossARelease(t, s, rtx, req("e2"))
		if err != nil {
			t.Fatalf("the address released while the request waited for it: %v (%s), want it", err, engine.Code(err))
		}
		if got.Address != addr {
			t.Fatalf("got %s, want %s", got.Address, addr)
		}
	})
}

// allocateAcrossARelease allocates req while rtx, a transaction that holds
// what the allocation needs (env e1's row or address in cluster c1), is
// open: once the allocation waits for a lock, rtx releases e1 and commits.
// It returns the allocation's answer.
func allocateAcrossARelease(t *testing.T, s *scheduler, rtx pgx.Tx, req engine.EnvIPv4Request) (engine.Address, error) {
	t.Helper()
	ctx := context.Background()
	type result struct {
		a   engine.Address
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := s.client.AllocateEnvIPv4(ctx, nil, req)
		done <- result{a, err}
	}()
	if !waitForALockWait(t, s.db) {
		got := <-done
		t.Fatalf("the request waited for nothing: it answered %v %v", got.a.Address, got.err)
	}
	if err := s.client.ReleaseEnvIPv4(ctx, rtx, "c1", "e1"); err != nil {
		t.Fatal(err)
	}
	if err := rtx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	return got.a, got.err
}

// waitForALockWait reports whether a backend of the test's database (db's)
// came to wait for a lock (a row's or a table's: the request in flight)
// within 10 s.
func waitForALockWait(t *testing.T, db *pgxpool.Pool) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// eachRequestOfOneAddress runs test, in parallel, for a request of any
// address and for a claim of the address (req gives environment env's
// request), each with a cluster of its own whose IPv4 pool v4 holds one
// address, addr, and no cooldown.
func eachRequestOfOneAddress(t *testing.T, test func(t *testing.T, s *scheduler, addr netip.Addr, req func(env string) engine.EnvIPv4Request)) {
	for _, claim := range []bool{false, true} {
		name := "any address"
		if claim {
			name = "a claim of the address"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newScheduler(t, "")
			addr := netip.MustParseAddr("10.9.0.1")
			if _, err := s.client.CreatePool(context.Background(), engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: engine.NoCooldown,
				CIDRs: []netip.Prefix{netip.PrefixFrom(addr, 32)}}); err != nil {
				t.Fatal(err)
			}
			test(t, s, addr, func(env string) engine.EnvIPv4Request {
				r := engine.EnvIPv4Request{ClusterID: "c1", Pool: "v4", OrgID: "acme", EnvID: env}
				if claim {
					r.Address = addr
				}
				return r
			})
		})
	}
}
