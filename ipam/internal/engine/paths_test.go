package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jackc/pgx/v5"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// The path-conformance harness: every rule about which address may be
// handed out is one scenario, and each scenario runs through every way an
// allocation is made: standalone, shared by concurrent callers, inside the
// caller's transaction, a plan-time hold then its confirm, and the full path
// forced. Each path must give the scenario's answer. Where a scenario says
// the fast statements serve it, the fast paths must do so without handing
// over to the full path: a fast statement that lacks a guard hands over
// (the database refuses what it would have handed out), and would otherwise
// show only as a slowdown. A new rule's test is one more scenario.

// allocPath is one way to allocate: try hands the request's owner an
// address and returns it, or the error.
type allocPath struct {
	name string
	// fast: the path tries the one-statement forms first.
	fast bool
	try  func(t *testing.T, st *engine.Client, req engine.AllocateRequest) (netip.Addr, error)
}

// alloc allocates owner o an address from the pools of cluster c through
// the path, and fails the test on an error.
func (p allocPath) alloc(t *testing.T, st *engine.Client, c string, o engine.Owner) netip.Addr {
	t.Helper()
	return p.allocIn(t, st, engine.ClusterPools(c), o)
}

// allocIn is alloc from the pool named.
func (p allocPath) allocIn(t *testing.T, st *engine.Client, pool engine.PoolRef, o engine.Owner) netip.Addr {
	t.Helper()
	a, err := p.try(t, st, engine.AllocateRequest{Pool: pool, Owner: o})
	if err != nil {
		t.Fatalf("%s allocation of %s: %v", p.name, o.ID, err)
	}
	return a
}

var allocPaths = []allocPath{
	{"standalone", true, func(t *testing.T, st *engine.Client, req engine.AllocateRequest) (netip.Addr, error) {
		r, err := st.Allocate(context.Background(), req)
		return r.Address, err
	}},
	{"shared", true, func(t *testing.T, st *engine.Client, req engine.AllocateRequest) (netip.Addr, error) {
		// The owner and three peers of its kind at once: the gathering may
		// serve them in one statement. A peer may find the pool full; any
		// other failure of a peer fails the test.
		t.Helper()
		reqs := []engine.AllocateRequest{req}
		for k := range 3 {
			p := req
			p.Owner.ID = fmt.Sprintf("%s-peer%d", req.Owner.ID, k)
			p.Owner.NodeID, p.Owner.InstanceID = peerLabel(req.Owner.NodeID, p.Owner.ID), peerLabel(req.Owner.InstanceID, p.Owner.ID)
			p.Owner.EnvID = peerLabel(req.Owner.EnvID, p.Owner.ID)
			reqs = append(reqs, p)
		}
		got := make([]netip.Addr, len(reqs))
		errs := make([]error, len(reqs))
		var wg sync.WaitGroup
		for i, r := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := st.Allocate(context.Background(), r)
				got[i], errs[i] = res.Address, err
			}()
		}
		wg.Wait()
		for i, err := range errs[1:] {
			if err != nil && engine.Code(err) != engine.CodeExhausted {
				t.Fatalf("shared allocation of the peer %s: %v", reqs[i+1].Owner.ID, err)
			}
		}
		return got[0], errs[0]
	}},
	{"caller's transaction", true, func(t *testing.T, st *engine.Client, req engine.AllocateRequest) (netip.Addr, error) {
		t.Helper()
		ctx := context.Background()
		tx, err := st.BeginForTest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		r, err := st.InTx(tx).Allocate(ctx, req)
		if err != nil {
			return netip.Addr{}, err
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return r.Address, nil
	}},
	{"hold then confirm", true, func(t *testing.T, st *engine.Client, req engine.AllocateRequest) (netip.Addr, error) {
		t.Helper()
		ctx := context.Background()
		h, err := st.Reserve(ctx, req, time.Hour)
		if err != nil {
			return netip.Addr{}, err
		}
		req.Address = h.Address
		r, err := st.Allocate(ctx, req)
		if err != nil {
			t.Fatalf("confirm of %s's hold on %s: %v", req.Owner.ID, h.Address, err)
		}
		if r.Address != h.Address {
			t.Fatalf("%s's hold was on %s, the confirm gave %s", req.Owner.ID, h.Address, r.Address)
		}
		return r.Address, nil
	}},
	{"full path", false, func(t *testing.T, st *engine.Client, req engine.AllocateRequest) (netip.Addr, error) {
		st.ForceFullPath(true)
		defer st.ForceFullPath(false)
		r, err := st.Allocate(context.Background(), req)
		return r.Address, err
	}},
}

func peerLabel(label, id string) string {
	if label == "" {
		return ""
	}
	return id
}

// pathScenario is one hand-out rule. setup prepares a fresh database (raw
// is a plain connection to it) and returns the cluster to allocate in; run
// allocates through the path and checks the rule.
type pathScenario struct {
	name string
	// fastServes: the fast statements serve the scenario's allocations
	// themselves (no hand-over to the full path).
	fastServes bool
	setup      func(t *testing.T, st *engine.Client, raw *pgx.Conn) string
	run        func(t *testing.T, st *engine.Client, raw *pgx.Conn, c string, p allocPath)
}

var pathScenarios = []pathScenario{
	{
		// A plan-time hold lost to another owner is told to the owner's next
		// plan, which takes no hold (no_lost_hold keeps Reserve's take, sent
		// with its look for a hold, from running ahead of the loss); an
		// allocation is not judged by it.
		name: "a lost hold is told before another is taken", fastServes: true,
		setup: func(t *testing.T, st *engine.Client, raw *pgx.Conn) string {
			mkCluster(t, st, "c1", "2001:db8::/48", "", "")
			loseHold(t, st, st, raw, "c1")
			return "c1"
		},
		run: func(t *testing.T, st *engine.Client, raw *pgx.Conn, c string, p allocPath) {
			a, err := p.try(t, st, engine.AllocateRequest{Pool: engine.NodePool(c), Owner: node("planned")})
			if p.name != "hold then confirm" {
				if err != nil || !a.IsValid() {
					t.Fatalf("allocation of the owner that lost its hold: %v %v", a, err)
				}
				return
			}
			var rows int
			if qerr := raw.QueryRow(context.Background(), `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'planned'`).Scan(&rows); qerr != nil {
				t.Fatal(qerr)
			}
			if engine.Code(err) != engine.CodeHoldLost || rows != 0 {
				t.Fatalf("the plan after the loss: %v, %d rows of the owner; want hold_lost and none", err, rows)
			}
		},
	},
	{
		// Fresh addresses start at the prefix's first and follow each other;
		// in a caller's transaction an owner starts at its own stripe (a hash
		// of its id), at that stripe's next ordinal.
		name: "fresh addresses are sequential", fastServes: true,
		setup: func(t *testing.T, st *engine.Client, _ *pgx.Conn) string {
			mkCluster(t, st, "c1", "2001:db8::/48", "", "")
			return "c1"
		},
		run: func(t *testing.T, st *engine.Client, raw *pgx.Conn, c string, p allocPath) {
			want := netip.MustParseAddr("2001:db8::1")
			if p.name == "caller's transaction" {
				var ord int
				if err := raw.QueryRow(context.Background(), `SELECT next_ordinal FROM ipam_pool_stripes s JOIN ipam_pools p ON p.id = s.pool_id
					WHERE p.id = $1 AND s.stripe = (hashtext('n1') & 2147483647) % p.stripes`, engine.NodePool(c).ID()).Scan(&ord); err != nil {
					t.Fatal(err)
				}
				want = netip.MustParseAddr("2001:db8::")
				for range ord {
					want = want.Next()
				}
			}
			a := p.alloc(t, st, c, node("n1"))
			if p.name != "shared" && a != want {
				t.Errorf("the first node address is %s, want %s", a, want)
			}
			if !netip.MustParsePrefix("2001:db8::/64").Contains(a) {
				t.Errorf("%s lies outside the node prefix", a)
			}
		},
	},
	{
		// The owner's own cooling address comes back to it before any other.
		name: "the owner's own cooling address first", fastServes: false,
		setup: func(t *testing.T, st *engine.Client, _ *pgx.Conn) string {
			mkCluster(t, st, "c1", "2001:db8::/48", "", "")
			return "c1"
		},
		run: func(t *testing.T, st *engine.Client, _ *pgx.Conn, c string, p allocPath) {
			ctx := context.Background()
			first, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools(c), Owner: node("n1")})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"n2", "n3"} {
				if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools(c), Owner: node(id)}); err != nil {
					t.Fatal(err)
				}
			}
			if ok, err := st.Release(ctx, c, node("n1"), 0); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if a := p.alloc(t, st, c, node("n1")); a != first.Address {
				t.Errorf("n1 got %s back, want its own cooling address %s", a, first.Address)
			}
		},
	},
	{
		// An address that a destroyed cluster left cooling (a tombstone that
		// the new cluster inherited) goes to none of the new cluster's
		// owners, its former owner's namesake included.
		// The fresh statements hand over when the next fresh ordinal holds
		// an inherited row (their insert meets it); the full path steps
		// over it.
		name: "never an address under another cluster's cooldown", fastServes: false,
		setup: func(t *testing.T, st *engine.Client, _ *pgx.Conn) string {
			ctx := context.Background()
			mkCluster(t, st, "old", "2001:db8::/48", "", "")
			for _, id := range []string{"n1", "n2", "n3"} {
				if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("old"), Owner: node(id)}); err != nil {
					t.Fatal(err)
				}
				if ok, err := st.Release(ctx, "old", node(id), 0); err != nil || !ok {
					t.Fatal(ok, err)
				}
			}
			if err := st.DeleteCluster(ctx, "old", false); err != nil {
				t.Fatal(err)
			}
			mkCluster(t, st, "new", "2001:db8::/48", "", "")
			return "new"
		},
		run: func(t *testing.T, st *engine.Client, _ *pgx.Conn, c string, p allocPath) {
			buried := map[netip.Addr]bool{}
			for i := 1; i <= 3; i++ {
				buried[netip.MustParseAddr(fmt.Sprintf("2001:db8::%d", i))] = true
			}
			for _, id := range []string{"n1", "x1"} {
				if a := p.alloc(t, st, c, node(id)); buried[a] {
					t.Errorf("%s got %s, which the destroyed cluster left cooling", id, a)
				}
			}
		},
	},
	{
		// An instance whose node has instance blocks draws from them, never
		// from the cluster's instance pool (guard node_blocks_first). The
		// fast statements hand over when the blocks exist.
		name: "an instance on a node with blocks draws from them", fastServes: false,
		setup: func(t *testing.T, st *engine.Client, _ *pgx.Conn) string {
			mkCluster(t, st, "c1", "2001:db8::/48", "", "")
			if _, err := st.CreateNodeBlocks(context.Background(), "c1", "n1", scaling(-1, 4)); err != nil {
				t.Fatal(err)
			}
			return "c1"
		},
		run: func(t *testing.T, st *engine.Client, _ *pgx.Conn, c string, p allocPath) {
			o := engine.Owner{Kind: engine.OwnerInstance, ID: "i1", InstanceID: "i1", NodeID: "n1", OrgID: "org", EnvID: "env"}
			a := p.alloc(t, st, c, o)
			nb, err := st.GetNodeBlocks(context.Background(), c, "n1")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(nb.Blocks, func(b netip.Prefix) bool { return b.Contains(a) }) {
				t.Errorf("i1 on node n1 got %s, outside the node's blocks %v", a, nb.Blocks)
			}
		},
	},
	{
		// The cluster's gateway lies in the node pool's block: no owner gets
		// it (guard counter_shape: a fresh ordinal is its address only in a
		// block without the gateway, without exclusions). The fast
		// statements hand over for such a pool.
		name: "never the gateway", fastServes: false,
		setup: func(t *testing.T, st *engine.Client, _ *pgx.Conn) string {
			// Set by an update: a new cluster's stripes start past its
			// gateway, a gateway set later lies ahead of them.
			c := mkCluster(t, st, "c1", "2001:db8::/48", "", "")
			c.GatewayIPv6 = netip.MustParseAddr("2001:db8::3")
			if _, err := st.UpdateCluster(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			return "c1"
		},
		run: func(t *testing.T, st *engine.Client, raw *pgx.Conn, c string, p allocPath) {
			for _, id := range []string{"n1", "n2", "n3", "n4"} {
				p.alloc(t, st, c, node(id))
			}
			var n int
			if err := raw.QueryRow(context.Background(), `SELECT count(*) FROM ipam_allocations
				WHERE address = '2001:db8::3' AND state IN ('active', 'reserved')`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("the cluster's gateway 2001:db8::3 was handed out")
			}
		},
	},
	{
		// A pool hands out no more addresses than it has (guard
		// stripe_room): once every stripe is at its last ordinal, every path
		// says the pool is exhausted.
		name: "a full pool hands out nothing", fastServes: false,
		setup: func(t *testing.T, st *engine.Client, _ *pgx.Conn) string {
			ctx := context.Background()
			mkCluster(t, st, "c1", "2001:db8::/48", "", "")
			if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v6", CIDRs: []netip.Prefix{netip.MustParsePrefix("2001:db8:0:9::/126")}}); err != nil {
				t.Fatal(err)
			}
			allocateUntilFull(t, st, engine.OperatorPool("c1", "v6"), func(i int) engine.Owner { return node(fmt.Sprintf("f%d", i)) })
			return "c1"
		},
		run: func(t *testing.T, st *engine.Client, _ *pgx.Conn, c string, p allocPath) {
			a, err := p.try(t, st, engine.AllocateRequest{Pool: engine.OperatorPool(c, "v6"), Owner: node("late")})
			if engine.Code(err) != engine.CodeExhausted {
				t.Errorf("an allocation from the full pool got %s, %v; want %s", a, err, engine.CodeExhausted)
			}
		},
	},
	{
		// An IPv4 address inside its cooldown goes to no other owner (guard
		// cooled): with every other address taken, the pool is exhausted.
		name: "never another owner's cooling address", fastServes: false,
		setup: e0Cooling,
		run: func(t *testing.T, st *engine.Client, _ *pgx.Conn, c string, p allocPath) {
			a, err := p.try(t, st, engine.AllocateRequest{Pool: engine.OperatorPool(c, "v4"), Owner: env("x")})
			if engine.Code(err) != engine.CodeExhausted {
				t.Errorf("x got %s, %v; want %s (the only address left is cooling for e0)", a, err, engine.CodeExhausted)
			}
		},
	},
	{
		// Its own cooling address goes back to an owner for its own tenant
		// only (guard reusable_or_own): under another org the same owner
		// finds the pool exhausted, under its own it gets the address back.
		name: "the owner's cooling address only for its tenant", fastServes: false,
		setup: e0Cooling,
		run: func(t *testing.T, st *engine.Client, _ *pgx.Conn, c string, p allocPath) {
			moved := env("e0")
			moved.OrgID = "org-other"
			a, err := p.try(t, st, engine.AllocateRequest{Pool: engine.OperatorPool(c, "v4"), Owner: moved})
			if engine.Code(err) != engine.CodeExhausted {
				t.Errorf("e0 under another org got %s, %v; want %s (its address cools for its own org)", a, err, engine.CodeExhausted)
			}
			if a, err := p.try(t, st, engine.AllocateRequest{Pool: engine.OperatorPool(c, "v4"), Owner: env("e0")}); err != nil || !a.IsValid() {
				t.Errorf("e0 under its own org: %s, %v; want its cooling address back", a, err)
			}
		},
	},
	{
		// An owner's own cooling address for its tenant comes back to it
		// though it has a later one of another tenant (re-created for
		// another org, and released again), which it may not take back: the
		// owner's probe reads the latest of its own tenant (sameTenantSQL),
		// and the pool, full but for those two, is not exhausted for it.
		name: "the owner's cooling address of its tenant, not a later one of another", fastServes: false,
		setup: func(t *testing.T, st *engine.Client, _ *pgx.Conn) string {
			ctx := context.Background()
			mkCluster(t, st, "c1", "2001:db8::/48", "", "")
			if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
				CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/29")}}); err != nil {
				t.Fatal(err)
			}
			moved := env("e0")
			moved.OrgID = "org-other"
			for _, o := range []engine.Owner{env("e0"), moved} {
				if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: o}); err != nil {
					t.Fatal(err)
				}
				if ok, err := st.Release(ctx, "c1", o, 0); err != nil || !ok {
					t.Fatal(ok, err)
				}
			}
			allocateUntilFull(t, st, engine.OperatorPool("c1", "v4"), func(i int) engine.Owner { return env(fmt.Sprintf("f%d", i)) })
			return "c1"
		},
		run: func(t *testing.T, st *engine.Client, raw *pgx.Conn, c string, p allocPath) {
			var own netip.Prefix
			if err := raw.QueryRow(context.Background(), `SELECT address FROM ipam_allocations
				WHERE cluster_id = $1 AND owner_id = 'e0' AND org_id = 'org-e0' AND state = 'cooling'`, c).Scan(&own); err != nil {
				t.Fatal(err)
			}
			want := own.Addr()
			if a, err := p.try(t, st, engine.AllocateRequest{Pool: engine.OperatorPool(c, "v4"), Owner: env("e0")}); err != nil || a != want {
				t.Errorf("e0 under its own org: %s, %v; want its own org's cooling address %s back", a, err, want)
			}
		},
	},
	{
		// An expired plan-time hold may go to another owner, and its planner
		// is told at its next plan (guard no_expired_hold: a one-statement
		// take hands over, the full path records the loss).
		name: "an expired hold taken by another is told to its planner", fastServes: false,
		setup: func(t *testing.T, st *engine.Client, raw *pgx.Conn) string {
			ctx := context.Background()
			fullIPv4Pool(t, st, engine.NoCooldown)
			if ok, err := st.Release(ctx, "c1", env("e0"), 0); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if _, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: env("planned")}, time.Hour); err != nil {
				t.Fatal(err)
			}
			// Expired now: past the reuse mark that the hold's own take
			// left, where a one-statement pick looks.
			if _, err := raw.Exec(ctx, `UPDATE ipam_allocations SET reusable_at = now(), reserved_until = now(),
				cooling_until = least(cooling_until, now()) WHERE state = 'reserved'`); err != nil {
				t.Fatal(err)
			}
			return "c1"
		},
		run: func(t *testing.T, st *engine.Client, raw *pgx.Conn, c string, p allocPath) {
			ctx := context.Background()
			req := engine.AllocateRequest{Pool: engine.OperatorPool(c, "v4"), Owner: env("planned")}
			var held netip.Prefix
			if err := raw.QueryRow(ctx, `SELECT address FROM ipam_allocations WHERE owner_id = 'planned'`).Scan(&held); err != nil {
				t.Fatal(err)
			}
			// The address left is the expired hold's: x takes it (or, on the
			// shared path, maybe one of its peers).
			a, err := p.try(t, st, engine.AllocateRequest{Pool: req.Pool, Owner: env("x")})
			if err == nil && a != held.Addr() {
				t.Fatalf("x got %s; the only address left is the expired hold's %s", a, held.Addr())
			}
			if err != nil && (p.name != "shared" || engine.Code(err) != engine.CodeExhausted) {
				t.Fatal(err)
			}
			_, err = st.Reserve(ctx, req, time.Hour)
			var lost *engine.HoldLostError
			if !errors.As(err, &lost) || lost.Lost.Address != held.Addr() {
				t.Errorf("after its expired hold on %s was taken, the planner's next plan got %v; want %s", held.Addr(), err, engine.CodeHoldLost)
			}
		},
	},
	{
		// An owner whose plan-time hold, on its own cooling address, is
		// another manager's and expired (an abandoned plan, or an
		// operator's expire-hold) is taken over, and gets that cooling
		// address back, as its own cooling address comes first everywhere
		// (afterDrop: the take reads the owner's cooling row again after
		// the drop).
		name: "an owner taken over from an expired hold gets its own cooling address", fastServes: false,
		setup: func(t *testing.T, st *engine.Client, raw *pgx.Conn) string {
			ctx := context.Background()
			mkCluster(t, st, "c1", "2001:db8::/48", "", "")
			if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
				CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/29")}}); err != nil {
				t.Fatal(err)
			}
			other, err := engine.Open(ctx, engine.Config{DatabaseURL: raw.Config().ConnString(), Actor: "other"})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			pool := engine.OperatorPool("c1", "v4")
			if _, err := other.Allocate(ctx, engine.AllocateRequest{Pool: pool, Owner: env("e1")}); err != nil {
				t.Fatal(err)
			}
			if ok, err := other.Release(ctx, "c1", env("e1"), 0); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if _, err := other.Reserve(ctx, engine.AllocateRequest{Pool: pool, Owner: env("e1")}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if _, err := engine.OperatorOf(other).ExpireHold(ctx, engine.HoldRequest{ClusterID: "c1", OwnerKind: engine.OwnerEnvIPv4,
				OwnerID: "e1", Reason: "abandoned"}); err != nil {
				t.Fatal(err)
			}
			return "c1"
		},
		run: func(t *testing.T, st *engine.Client, raw *pgx.Conn, c string, p allocPath) {
			var own netip.Prefix
			if err := raw.QueryRow(context.Background(), `SELECT address FROM ipam_allocations WHERE owner_id = 'e1'`).Scan(&own); err != nil {
				t.Fatal(err)
			}
			if a := p.allocIn(t, st, engine.OperatorPool(c, "v4"), env("e1")); a != own.Addr() {
				t.Errorf("e1, taken over from the other actor's expired hold, got %s, want its own cooling address %s", a, own.Addr())
			}
		},
	},
}

func TestHandOutRulesOnEveryPath(t *testing.T) {
	t.Parallel()
	for _, sc := range pathScenarios {
		for _, p := range allocPaths {
			t.Run(sc.name+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				st, raw := newStore(t, "")
				c := sc.setup(t, st, raw)
				before := st.FullPathRuns()
				sc.run(t, st, raw, c, p)
				full := st.FullPathRuns() - before
				switch {
				case p.fast && sc.fastServes && full > 0:
					t.Errorf("%d calls handed over to the full path: a fast statement of this path misses a guard, or stopped serving this case", full)
				case !p.fast && full == 0:
					t.Errorf("the full path was forced, but no call ran it")
				}
			})
		}
	}
}

// e0Cooling is a full IPv4 pool (fullIPv4Pool, an hour's cooldown) whose
// e0 has released its address: the one address left, cooling for e0.
func e0Cooling(t *testing.T, st *engine.Client, _ *pgx.Conn) string {
	t.Helper()
	fullIPv4Pool(t, st, time.Hour)
	if ok, err := st.Release(context.Background(), "c1", env("e0"), 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	return "c1"
}

// fullIPv4Pool makes cluster c1 with an IPv4 pool v4 (a /30, the cooldown
// given) whose every address is allocated, to environments e0, e1, ...
func fullIPv4Pool(t *testing.T, st *engine.Client, cooldown time.Duration) {
	t.Helper()
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: cooldown,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/30")}}); err != nil {
		t.Fatal(err)
	}
	allocateUntilFull(t, st, engine.OperatorPool("c1", "v4"), func(i int) engine.Owner { return env(fmt.Sprintf("e%d", i)) })
}

// allocateUntilFull allocates from a small pool, to owner(0), owner(1), ..., until it
// is exhausted.
func allocateUntilFull(t *testing.T, st *engine.Client, pool engine.PoolRef, owner func(int) engine.Owner) {
	t.Helper()
	for i := 0; ; i++ {
		_, err := st.Allocate(context.Background(), engine.AllocateRequest{Pool: pool, Owner: owner(i)})
		if engine.Code(err) == engine.CodeExhausted {
			return
		}
		if err != nil || i > 8 {
			t.Fatalf("filling %s: allocation %d: %v", pool.ID(), i, err)
		}
	}
}

// The hand-out's write judges the row again, whatever picked it (guard
// reusable_or_own): another owner's cooling row is refused, and so is its
// own owner's under another tenant; its own owner takes it back.
func TestHandOutWriteRejudgesTheRow(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "test")
	fullIPv4Pool(t, st, time.Hour)
	ctx := context.Background()
	if ok, err := st.Release(ctx, "c1", env("e0"), 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	var id, gen any
	if err := raw.QueryRow(ctx, `SELECT id, generation FROM ipam_allocations WHERE owner_id = 'e0'`).Scan(&id, &gen); err != nil {
		t.Fatal(err)
	}
	var org any
	if err := raw.QueryRow(ctx, `SELECT org_id FROM ipam_allocations WHERE owner_id = 'e0'`).Scan(&org); err != nil {
		t.Fatal(err)
	}
	write := func(owner string, orgs ...any) (int, error) {
		o := org
		if len(orgs) > 0 {
			o = orgs[0]
		}
		rows, err := raw.Query(ctx, engine.SQLActivateRow.SQL, engine.StatementArgs(engine.SQLActivateRow, map[string]any{
			"id": id, "generation": gen, "kind": engine.OwnerEnvIPv4, "owner": owner, "org": o, "env": owner, "node": nil,
			"instance": nil, "actor": "test", "hold": "0", "set_owner": nil, "lost_event": uuid.New(), "event": uuid.New(),
			"event_type": "env.ipv4_addon_enabled", "data": map[string]any{},
		})...)
		if err != nil {
			return 0, err
		}
		n := 0
		for rows.Next() {
			n++
		}
		return n, rows.Err()
	}
	if n, err := write("x"); n != 0 || err != nil {
		t.Fatalf("the write handed e0's cooling row to x: %d rows, %v", n, err)
	}
	if n, err := write("e0", "another-org"); n != 0 || err != nil {
		t.Fatalf("the write handed e0's cooling row to e0 under another org: %d rows, %v", n, err)
	}
	if n, err := write("e0"); n != 1 || err != nil {
		t.Fatalf("the write refused e0 its own cooling row: %d rows, %v", n, err)
	}
}
