package ipamcore_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/internal/ipamcore"
	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
)

// The fast path serves the common allocation and hands everything else to
// the full path; both give the same answer.
func TestFastPathServesOnlyTheCommonCase(t *testing.T) {
	ctx := context.Background()
	st, err := ipamcore.Open(ctx, ipamcore.Config{DatabaseURL: testdb.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateCluster(ctx, ipamcore.Cluster{ID: "c1", Prefix: netip.MustParsePrefix("2001:db8::/48"),
		NodeCooldown: ipamcore.DefaultNodeCooldown, InstanceCooldown: ipamcore.DefaultInstanceCooldown}); err != nil {
		t.Fatal(err)
	}
	n := func(id string) ipamcore.Owner { return ipamcore.Owner{Kind: ipamcore.OwnerNode, ID: id, NodeID: id} }
	a, ok := st.FastAllocate(ctx, ipamcore.AllocateRequest{Pool: ipamcore.NodePool("c1"), Owner: n("a")})
	if !ok || a.Address != netip.MustParseAddr("2001:db8::1") || a.Block.String() != "2001:db8::/64" || a.Generation != 1 {
		t.Fatalf("fresh owner: %+v %v", a, ok)
	}
	// The owner already holds an address: the full path adopts it.
	if _, ok := st.FastAllocate(ctx, ipamcore.AllocateRequest{Pool: ipamcore.NodePool("c1"), Owner: n("a")}); ok {
		t.Fatal("the fast path allocated a second address for an owner")
	}
	// A cooling address of the owner comes back through the full path.
	if _, err := st.Release(ctx, "c1", n("a"), 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.FastAllocate(ctx, ipamcore.AllocateRequest{Pool: ipamcore.NodePool("c1"), Owner: n("a")}); ok {
		t.Fatal("the fast path ignored the owner's cooling address")
	}
	if r, err := st.Allocate(ctx, ipamcore.AllocateRequest{Pool: ipamcore.NodePool("c1"), Owner: n("a")}); err != nil || r.Address != a.Address {
		t.Fatalf("full path: %v %v", r.Address, err)
	}
	// An exact claim ahead of the counter: the fast path steps aside, the full path steps over it.
	if _, err := st.Allocate(ctx, ipamcore.AllocateRequest{Pool: ipamcore.NodePool("c1"), Owner: n("x"), Address: netip.MustParseAddr("2001:db8::2")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.FastAllocate(ctx, ipamcore.AllocateRequest{Pool: ipamcore.NodePool("c1"), Owner: n("b")}); ok {
		t.Fatal("the fast path handed out a claimed address")
	}
	if r, err := st.Allocate(ctx, ipamcore.AllocateRequest{Pool: ipamcore.NodePool("c1"), Owner: n("b")}); err != nil || r.Address != netip.MustParseAddr("2001:db8::3") {
		t.Fatalf("after the claim: %v %v", r.Address, err)
	}
	// A pool with exclusions never takes the fast path.
	if _, err := st.CreatePool(ctx, ipamcore.Pool{ClusterID: "c1", Name: "v6", CIDRs: []netip.Prefix{netip.MustParsePrefix("2001:db8:0:9::/64")},
		Exclude: []netip.Prefix{netip.MustParsePrefix("2001:db8:0:9::1/128")}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.FastAllocate(ctx, ipamcore.AllocateRequest{Pool: ipamcore.OperatorPool("c1", "v6"), Owner: n("c")}); ok {
		t.Fatal("the fast path served a pool with exclusions")
	}
	if r, err := st.Allocate(ctx, ipamcore.AllocateRequest{Pool: ipamcore.OperatorPool("c1", "v6"), Owner: n("c")}); err != nil || r.Address != netip.MustParseAddr("2001:db8:0:9::2") {
		t.Fatalf("pool with exclusions: %v %v", r.Address, err)
	}
}
