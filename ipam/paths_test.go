package ipam_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
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

// allocPath is one way to allocate: it hands owner o an address in cluster
// c and returns it.
type allocPath struct {
	name string
	// fast: the path tries the one-statement forms first.
	fast  bool
	alloc func(t *testing.T, st *ipam.Client, c string, o ipam.Owner) netip.Addr
}

var allocPaths = []allocPath{
	{"standalone", true, func(t *testing.T, st *ipam.Client, c string, o ipam.Owner) netip.Addr {
		t.Helper()
		r, err := st.Allocate(context.Background(), ipam.AllocateRequest{Pool: ipam.ClusterPools(c), Owner: o})
		if err != nil {
			t.Fatalf("standalone allocation of %s: %v", o.ID, err)
		}
		return r.Address
	}},
	{"shared", true, func(t *testing.T, st *ipam.Client, c string, o ipam.Owner) netip.Addr {
		// o and three peers of its kind at once: the gathering may serve
		// them in one statement.
		t.Helper()
		owners := []ipam.Owner{o}
		for k := range 3 {
			p := o
			p.ID = fmt.Sprintf("%s-peer%d", o.ID, k)
			p.NodeID, p.InstanceID = peerLabel(o.NodeID, p.ID), peerLabel(o.InstanceID, p.ID)
			owners = append(owners, p)
		}
		got := make([]netip.Addr, len(owners))
		errs := make([]error, len(owners))
		var wg sync.WaitGroup
		for i, ow := range owners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := st.Allocate(context.Background(), ipam.AllocateRequest{Pool: ipam.ClusterPools(c), Owner: ow})
				got[i], errs[i] = r.Address, err
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("shared allocation of %s: %v", owners[i].ID, err)
			}
		}
		return got[0]
	}},
	{"caller's transaction", true, func(t *testing.T, st *ipam.Client, c string, o ipam.Owner) netip.Addr {
		t.Helper()
		ctx := context.Background()
		tx, err := st.BeginForTest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		r, err := st.InTx(tx).Allocate(ctx, ipam.AllocateRequest{Pool: ipam.ClusterPools(c), Owner: o})
		if err != nil {
			t.Fatalf("allocation of %s in the caller's transaction: %v", o.ID, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return r.Address
	}},
	{"hold then confirm", true, func(t *testing.T, st *ipam.Client, c string, o ipam.Owner) netip.Addr {
		t.Helper()
		ctx := context.Background()
		req := ipam.AllocateRequest{Pool: ipam.ClusterPools(c), Owner: o}
		h, err := st.Reserve(ctx, req, time.Hour)
		if err != nil {
			t.Fatalf("hold for %s: %v", o.ID, err)
		}
		req.Address = h.Address
		r, err := st.Allocate(ctx, req)
		if err != nil {
			t.Fatalf("confirm of %s's hold on %s: %v", o.ID, h.Address, err)
		}
		if r.Address != h.Address {
			t.Fatalf("%s's hold was on %s, the confirm gave %s", o.ID, h.Address, r.Address)
		}
		return r.Address
	}},
	{"full path", false, func(t *testing.T, st *ipam.Client, c string, o ipam.Owner) netip.Addr {
		t.Helper()
		st.ForceFullPath(true)
		defer st.ForceFullPath(false)
		r, err := st.Allocate(context.Background(), ipam.AllocateRequest{Pool: ipam.ClusterPools(c), Owner: o})
		if err != nil {
			t.Fatalf("full-path allocation of %s: %v", o.ID, err)
		}
		return r.Address
	}},
}

func peerLabel(label, id string) string {
	if label == "" {
		return ""
	}
	return id
}

// pathScenario is one hand-out rule. setup prepares a fresh database and
// returns the cluster to allocate in; run allocates through the path and
// checks the rule.
type pathScenario struct {
	name string
	// fastServes: the fast statements serve the scenario's allocations
	// themselves (no hand-over to the full path).
	fastServes bool
	setup      func(t *testing.T, st *ipam.Client) string
	run        func(t *testing.T, st *ipam.Client, c string, p allocPath)
}

var pathScenarios = []pathScenario{
	{
		// Fresh addresses start at the prefix's first and follow each other.
		name: "fresh addresses are sequential", fastServes: true,
		setup: func(t *testing.T, st *ipam.Client) string {
			mkCluster(t, st, "c1", "2001:db8::/48", "", "")
			return "c1"
		},
		run: func(t *testing.T, st *ipam.Client, c string, p allocPath) {
			a := p.alloc(t, st, c, node("n1"))
			if p.name != "shared" && a != netip.MustParseAddr("2001:db8::1") {
				t.Errorf("the first node address is %s, want 2001:db8::1", a)
			}
			if !netip.MustParsePrefix("2001:db8::/64").Contains(a) {
				t.Errorf("%s lies outside the node prefix", a)
			}
		},
	},
	{
		// The owner's own cooling address comes back to it before any other.
		name: "the owner's own cooling address first", fastServes: false,
		setup: func(t *testing.T, st *ipam.Client) string {
			mkCluster(t, st, "c1", "2001:db8::/48", "", "")
			return "c1"
		},
		run: func(t *testing.T, st *ipam.Client, c string, p allocPath) {
			ctx := context.Background()
			first, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.ClusterPools(c), Owner: node("n1")})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"n2", "n3"} {
				if _, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.ClusterPools(c), Owner: node(id)}); err != nil {
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
		setup: func(t *testing.T, st *ipam.Client) string {
			ctx := context.Background()
			mkCluster(t, st, "old", "2001:db8::/48", "", "")
			for _, id := range []string{"n1", "n2", "n3"} {
				if _, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.ClusterPools("old"), Owner: node(id)}); err != nil {
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
		run: func(t *testing.T, st *ipam.Client, c string, p allocPath) {
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
}

func TestHandOutRulesOnEveryPath(t *testing.T) {
	t.Parallel()
	for _, sc := range pathScenarios {
		for _, p := range allocPaths {
			t.Run(sc.name+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				st, _ := newStore(t, "")
				c := sc.setup(t, st)
				before := st.FullPathRuns()
				sc.run(t, st, c, p)
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
