package ipam_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// The fast path serves the common allocation and hands everything else to
// the full path; both give the same answer.
func TestFastPathServesOnlyTheCommonCase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: testdb.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateCluster(ctx, ipam.Cluster{ID: "c1", Prefix: netip.MustParsePrefix("2001:db8::/48"),
		NodeCooldown: ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown}); err != nil {
		t.Fatal(err)
	}
	n := func(id string) ipam.Owner { return ipam.Owner{Kind: ipam.OwnerNode, ID: id, NodeID: id} }
	a, ok := st.FastAllocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: n("a")})
	if !ok || a.Address != netip.MustParseAddr("2001:db8::1") || a.Block.String() != "2001:db8::/64" || a.Generation != 1 {
		t.Fatalf("fresh owner: %+v %v", a, ok)
	}
	// The owner already holds an address: the full path adopts it.
	if _, ok := st.FastAllocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: n("a")}); ok {
		t.Fatal("the fast path allocated a second address for an owner")
	}
	// A cooling address of the owner comes back through the full path.
	if _, err := st.Release(ctx, "c1", n("a"), 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.FastAllocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: n("a")}); ok {
		t.Fatal("the fast path ignored the owner's cooling address")
	}
	if r, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: n("a")}); err != nil || r.Address != a.Address {
		t.Fatalf("full path: %v %v", r.Address, err)
	}
	// An exact claim ahead of the counter: the fast path steps aside, the full path steps over it.
	if _, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: n("x"), Address: netip.MustParseAddr("2001:db8::2")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.FastAllocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: n("b")}); ok {
		t.Fatal("the fast path handed out a claimed address")
	}
	if r, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: n("b")}); err != nil || r.Address != netip.MustParseAddr("2001:db8::3") {
		t.Fatalf("after the claim: %v %v", r.Address, err)
	}
	// A pool with exclusions never takes the fast path.
	if _, err := st.CreatePool(ctx, ipam.Pool{ClusterID: "c1", Name: "v6", CIDRs: []netip.Prefix{netip.MustParsePrefix("2001:db8:0:9::/64")},
		Exclude: []netip.Prefix{netip.MustParsePrefix("2001:db8:0:9::1/128")}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.FastAllocate(ctx, ipam.AllocateRequest{Pool: ipam.OperatorPool("c1", "v6"), Owner: n("c")}); ok {
		t.Fatal("the fast path served a pool with exclusions")
	}
	if r, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.OperatorPool("c1", "v6"), Owner: n("c")}); err != nil || r.Address != netip.MustParseAddr("2001:db8:0:9::2") {
		t.Fatalf("pool with exclusions: %v %v", r.Address, err)
	}

	// An IPv4 table pool: the fast path takes the oldest free row, never the
	// owner's second one, never a row inside its cooldown.
	if _, err := st.CreatePool(ctx, ipam.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/30")}}); err != nil {
		t.Fatal(err)
	}
	v4 := ipam.OperatorPool("c1", "v4")
	env := func(id string) ipam.Owner { return ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: id, EnvID: id} }
	first, ok := st.FastAllocate(ctx, ipam.AllocateRequest{Pool: v4, Owner: env("e1")})
	if !ok || first.Block.String() != "10.0.0.0/30" || first.State != ipam.StateActive {
		t.Fatalf("IPv4 fast path: %+v %v", first, ok)
	}
	if _, ok := st.FastAllocate(ctx, ipam.AllocateRequest{Pool: v4, Owner: env("e1")}); ok {
		t.Fatal("the fast path gave an environment a second IPv4 address")
	}
	if _, err := st.Release(ctx, "c1", env("e1"), 0); err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Addr]bool{}
	for i := 2; ; i++ {
		a, ok := st.FastAllocate(ctx, ipam.AllocateRequest{Pool: v4, Owner: env(fmt.Sprintf("e%d", i))})
		if !ok {
			break
		}
		if a.Address == first.Address || seen[a.Address] {
			t.Fatalf("the fast path handed out %s again (cooling or active)", a.Address)
		}
		seen[a.Address] = true
	}
	if _, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: v4, Owner: env("last")}); !errors.Is(err, ipam.ErrExhausted) {
		t.Fatalf("with every other row active and one cooling, the full path says %v, want exhausted", err)
	}
	if u, err := st.PoolUsage(ctx, "c1"); err != nil {
		t.Fatal(err)
	} else {
		for _, p := range u.Pools {
			if p.PoolID == v4.ID() && (p.Active != int64(len(seen)) || p.Cooling != 1) {
				t.Fatalf("usage of the IPv4 pool after the fast path: %+v (want %d active, 1 cooling)", p.UsageCounts, len(seen))
			}
		}
	}
}
