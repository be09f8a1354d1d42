package engine_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// A request whose owner released an address while the request ran is given
// that address, its latest cooling one, as if it came after the release.
// The request read the owner before the release's transaction committed
// (ownerRows) and waited for that transaction; judged on that read it gave
// the owner an older cooling address of its own, or, having seen none in
// the pool, answered ipam_exhausted while the address cooled for it (the
// linearizability test's owner race). Each case runs in an IPv4 pool v4 of
// addresses from 10.9.0.1 on with an hour's cooldown, for environment e1,
// which has a cooling address in another pool of the cluster, so that the
// request takes the full path.
func TestARequestOfAnOwnerReleasedMeanwhileGetsItsLatestAddress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		addrs int
		// older: e1 had a cooling address in v4 before (10.9.0.1); the
		// transaction then claims 10.9.0.2 for it and releases it.
		older bool
	}{
		{"an older address of its own cooling", 3, true},
		{"none of its own, and no room", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newScheduler(t, "")
			var v4 []netip.Prefix
			for a := range tc.addrs {
				v4 = append(v4, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 9, 0, byte(1 + a)}), 32))
			}
			for _, p := range []engine.Pool{
				{ClusterID: "c1", Name: "v4", Cooldown: time.Hour, CIDRs: v4},
				{ClusterID: "c1", Name: "other", Cooldown: time.Hour, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.8.0.1/32")}},
			} {
				if _, err := s.client.CreatePool(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			req := func(pool string, addr string) engine.EnvIPv4Request {
				r := engine.EnvIPv4Request{ClusterID: "c1", Pool: pool, OrgID: "acme", EnvID: "e1"}
				if addr != "" {
					r.Address = netip.MustParseAddr(addr)
				}
				return r
			}
			for _, r := range []engine.EnvIPv4Request{req("other", ""), req("v4", "10.9.0.1")} {
				if r.Pool == "v4" && !tc.older {
					continue
				}
				if _, err := s.client.AllocateEnvIPv4(ctx, nil, r); err != nil {
					t.Fatal(err)
				}
				if err := s.client.ReleaseEnvIPv4(ctx, nil, "c1", "e1"); err != nil {
					t.Fatal(err)
				}
			}
			want := "10.9.0.2"
			if !tc.older {
				want = "10.9.0.1"
			}
			rtx := s.begin()
			if _, err := s.client.AllocateEnvIPv4(ctx, rtx, req("v4", want)); err != nil {
				t.Fatal(err)
			}
			got, err := allocateAcrossARelease(t, s, rtx, req("v4", ""))
			if err != nil {
				t.Fatalf("e1 released %s while the request ran: %v (%s), want it back", want, err, engine.Code(err))
			}
			if got.Address.String() != want {
				t.Fatalf("e1 got %s, want %s, its latest cooling address", got.Address, want)
			}
		})
	}
}

// A plan's hold taken with its first look answers the plan, whatever the
// look found. The look and the take are two statements of one round trip
// (findHold), each reading what has committed when it starts: when the
// owner's allocation was released and its address taken by another owner
// between them, the look found that allocation and the take held a new
// address for the owner. Reserve answered with the allocation the look
// found, gone by then, and the hold it had taken stayed unseen until a
// create confirmed it (found by the linearizability test). Here the take
// waits for a lock on the stripes (which neither the look, the release nor
// the other owner's claim takes) while the owner changes.
func TestAHoldTakenWithItsLookAnswersThePlan(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	st := openClient(t, engine.Config{DatabaseURL: url, Actor: "terraform", Origin: "/cfg/a", LockTimeout: 20 * time.Second})
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	n1 := node("n1")
	first, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: n1})
	if err != nil {
		t.Fatal(err)
	}
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `LOCK TABLE ipam_pool_stripes IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		h   engine.Hold
		err error
	}
	done := make(chan result, 1)
	go func() {
		h, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: n1}, time.Hour)
		done <- result{h, err}
	}()
	if !waitForALockWait(t, db) {
		got := <-done
		t.Fatalf("the plan's take waited for nothing: it answered %v %v", got.h.Address, got.err)
	}
	// Meanwhile n1 is released, and its address, past its cooldown, is
	// claimed by n2: n1 holds nothing, not even a cooling address.
	if ok, err := st.Release(ctx, "c1", n1, first.Generation); err != nil || !ok {
		t.Fatalf("release of n1: %v %v", ok, err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO ipam_clock (skew) VALUES ($1::interval)
		ON CONFLICT (singleton) DO UPDATE SET skew = EXCLUDED.skew`, fmt.Sprintf("%d seconds", int64(engine.DefaultNodeCooldown.Seconds())+60)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: node("n2"), Address: first.Address}); err != nil {
		t.Fatalf("n2's claim of %s: %v", first.Address, err)
	}
	if err := lock.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	var addr netip.Prefix
	var state string
	if err := db.QueryRow(ctx, `SELECT address, state FROM ipam_allocations
		WHERE cluster_id = 'c1' AND owner_kind = $1 AND owner_id = 'n1' AND state IN ('active', 'reserved')`, n1.Kind).Scan(&addr, &state); err != nil {
		t.Fatalf("n1's live row: %v (the plan was answered %s, %s)", err, got.h.Address, got.h.State)
	}
	if got.h.Address != addr.Addr() || got.h.State != state {
		t.Fatalf("the plan was answered %s (%s); n1 holds %s (%s)", got.h.Address, got.h.State, addr.Addr(), state)
	}
}
