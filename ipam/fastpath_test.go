package ipam_test

import (
	"context"
	"net/netip"
	"testing"

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
}
