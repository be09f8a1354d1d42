package ipam_test

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

func TestListAllocations(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.alloc("c1/node", node("n1"))
	f.alloc("c1/instance", ipam.Owner{Kind: ipam.OwnerInstance, ID: "i1", InstanceID: "i1", OrgID: "acme", EnvID: "prod", NodeID: "n1"})
	f.alloc("c1/instance", ipam.Owner{Kind: ipam.OwnerInstance, ID: "i2", InstanceID: "i2", OrgID: "acme", EnvID: "dev", NodeID: "n1"})
	f.alloc("c1/instance", ipam.Owner{Kind: ipam.OwnerInstance, ID: "i3", InstanceID: "i3", OrgID: "umbrella", EnvID: "prod"})
	f.alloc("c1/v4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: "prod", EnvID: "prod", OrgID: "acme"})
	f.release(ipam.Owner{Kind: ipam.OwnerInstance, ID: "i2"})
	f.alloc("c1/instance", instance("gone"))
	f.release(instance("gone"))
	age(t, f.raw, "c1/instance", 48*time.Hour) // i2 and gone have cooled down: not listed as cooling
	f.release(ipam.Owner{Kind: ipam.OwnerInstance, ID: "i3"})

	owners := func(fl ipam.ListFilter) string {
		t.Helper()
		got, err := f.st.ListAllocations(f.ctx, fl)
		if err != nil {
			t.Fatalf("%+v: %v", fl, err)
		}
		var out []string
		for _, a := range got {
			out = append(out, a.Owner.ID+":"+a.State+":"+a.Category)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		f    ipam.ListFilter
		want string
	}{
		{ipam.ListFilter{}, "i1:active:instance i3:cooling:instance n1:active:node prod:active:ipv4"},
		{ipam.ListFilter{ClusterID: "c1", OrgID: "acme"}, "i1:active:instance prod:active:ipv4"},
		{ipam.ListFilter{EnvID: "prod"}, "i1:active:instance i3:cooling:instance prod:active:ipv4"},
		{ipam.ListFilter{NodeID: "n1"}, "i1:active:instance n1:active:node"},
		{ipam.ListFilter{InstanceID: "i3"}, "i3:cooling:instance"},
		{ipam.ListFilter{Category: "ipv4"}, "prod:active:ipv4"},
		{ipam.ListFilter{PoolID: "c1/instance", State: "active"}, "i1:active:instance"},
		{ipam.ListFilter{State: "cooling"}, "i3:cooling:instance"},
		{ipam.ListFilter{State: "reserved"}, ""},
		{ipam.ListFilter{OwnerKind: "node"}, "n1:active:node"},
		{ipam.ListFilter{ClusterID: "c2"}, ""},
	} {
		if got := owners(c.f); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.f, got, c.want)
		}
	}
	got, err := f.st.ListAllocations(f.ctx, ipam.ListFilter{Limit: 2})
	if err != nil || len(got) != 2 {
		t.Fatalf("limit: %d %v", len(got), err)
	}
	for _, bad := range []struct {
		f     ipam.ListFilter
		field string
	}{
		{ipam.ListFilter{State: "free"}, "state"},
		{ipam.ListFilter{Category: "ipv5"}, "category"},
		{ipam.ListFilter{OrgID: "a b"}, "org_id"},
		{ipam.ListFilter{PoolID: "nopool"}, "pool_id"},
		{ipam.ListFilter{OwnerKind: "vm"}, "owner_kind"},
	} {
		_, err := f.st.ListAllocations(f.ctx, bad.f)
		var ie *ipam.InvalidError
		if !errors.As(err, &ie) || ie.Field != bad.field {
			t.Errorf("%+v: %v, want invalid %s", bad.f, err, bad.field)
		}
	}
}

func TestLookupAddress(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	a := f.alloc("c1/instance", ipam.Owner{Kind: ipam.OwnerInstance, ID: "i1", InstanceID: "i1", OrgID: "acme", EnvID: "prod"})
	b := f.alloc("c1/node", node("n1"))
	f.release(node("n1"))
	lookup := func(addr, cluster string) ipam.AddressInfo {
		t.Helper()
		infos, err := f.st.LookupAddress(f.ctx, netip.MustParseAddr(addr), cluster)
		if err != nil || len(infos) != 1 {
			t.Fatalf("lookup %s: %+v %v", addr, infos, err)
		}
		return infos[0]
	}
	got := lookup(a.Address.String(), "")
	if got.Status != "active" || got.Category != "instance" || got.Owner.OrgID != "acme" || got.Owner.EnvID != "prod" ||
		got.Owner.InstanceID != "i1" || got.Actor != "terraform" || got.AllocatedAt.IsZero() || got.PoolID != "c1/instance" || got.Generation != 1 {
		t.Errorf("active: %+v", got)
	}
	// A cooling address names its last holder and when it becomes reusable.
	got = lookup(b.Address.String(), "c1")
	if got.Status != "cooling" || got.Owner.NodeID != "n1" || got.ReleasedAt.IsZero() || got.ReusableAt.Sub(got.ReleasedAt) != ipam.DefaultNodeCooldown {
		t.Errorf("cooling: %+v", got)
	}
	age(t, f.raw, "c1/node", 31*24*time.Hour)
	if got = lookup(b.Address.String(), ""); got.Status != "free" || got.Owner.NodeID != "n1" {
		t.Errorf("cooled down: %+v (want free, last holder n1)", got)
	}
	if got = lookup("2001:db8::99", ""); got.Status != "free" || got.ID != [16]byte{} || got.PoolID != "c1/node" || got.Ordinal != 0x99 {
		t.Errorf("never used: %+v", got)
	}
	if got = lookup("2001:db8::", ""); got.Status != ipam.StatusExcluded {
		t.Errorf("subnet-router anycast: %+v", got)
	}
	if got = lookup("198.51.100.3", ""); got.Status != "free" || got.Category != "ipv4" || got.Block.String() != "198.51.100.0/29" {
		t.Errorf("free IPv4 row: %+v", got)
	}
	if got = lookup("198.51.100.7", ""); got.Status != ipam.StatusExcluded {
		t.Errorf("broadcast: %+v", got)
	}
	for addr, want := range map[string]string{
		"2001:db8:0:5::1": `inside the prefix of cluster "c1" but in none of its pools`,
		"2001:dead::1":    "in no pool of any cluster",
		"203.0.113.1":     "in no pool of any cluster",
	} {
		_, err := f.st.LookupAddress(f.ctx, netip.MustParseAddr(addr), "")
		if !errors.Is(err, ipam.ErrNotFound) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want not_found saying %q", addr, err, want)
		}
	}
	// Private IPv4 blocks may repeat across clusters: both are found.
	mkCluster(t, f.st, "c2", "2001:db9::/48", "", "")
	for _, c := range []string{"c1", "c2"} {
		if _, err := f.st.CreatePool(f.ctx, ipam.Pool{ClusterID: c, Name: "private", CIDRs: prefixes("10.0.0.0/30")}); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := f.st.LookupAddress(f.ctx, netip.MustParseAddr("10.0.0.1"), "")
	if err != nil || len(infos) != 2 || ipam.ClusterIDs(infos) != "c1, c2" {
		t.Fatalf("private in two clusters: %+v %v", infos, err)
	}
	if infos, err = f.st.LookupAddress(f.ctx, netip.MustParseAddr("10.0.0.1"), "c2"); err != nil || len(infos) != 1 || infos[0].ClusterID != "c2" {
		t.Fatalf("private in c2: %+v %v", infos, err)
	}
}

func TestListEvents(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	start, err := f.st.DatabaseNow(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.alloc("c1/node", node("n1"))
	f.alloc("c1/instance", instance("i1"))
	f.release(instance("i1"))
	types := func(fl ipam.EventFilter) string {
		t.Helper()
		evs, err := f.st.ListEvents(f.ctx, fl)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			out = append(out, e.Type)
		}
		return strings.Join(out, ",")
	}
	if got := types(ipam.EventFilter{Since: start}); got != "node.enrolled,instance.allocated,instance.released" {
		t.Errorf("since start: %s", got)
	}
	if got := types(ipam.EventFilter{ClusterID: "c1"}); got != "cluster.created,pool.created,node.enrolled,instance.allocated,instance.released" {
		t.Errorf("all of c1: %s", got)
	}
	if got := types(ipam.EventFilter{Types: []string{"instance.*", "cluster.created"}}); got != "cluster.created,instance.allocated,instance.released" {
		t.Errorf("by type: %s", got)
	}
	if got := types(ipam.EventFilter{Limit: 2}); got != "instance.allocated,instance.released" {
		t.Errorf("newest two: %s", got)
	}
	if got := types(ipam.EventFilter{Types: []string{"env.ipv4_*"}}); got != "" {
		t.Errorf("no IPv4 events: %s", got)
	}
	if _, err := f.st.ListEvents(f.ctx, ipam.EventFilter{Types: []string{"*"}}); ipam.Code(err) != ipam.CodeInvalid {
		t.Errorf("type *: %v", err)
	}
}

// The inventory calls list keys for `terraform query`: every cluster, the
// pools of a cluster (operator pools by category, never a node's blocks or a
// released block's parked rows), the sets with an active member, the nodes
// with blocks.
func TestInventory(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	mkCluster(t, f.st, "c0", "2001:db8:1::/48", "", "")
	if _, err := f.st.ApplySet(f.ctx, ipam.SetChange{ClusterID: "c1", Owner: ipam.Owner{ID: "web", OrgID: "acme", EnvID: "prod"},
		Add: []ipam.SetEntry{{Key: "a", Family: 6}, {Key: "b", Family: 4}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.ApplySet(f.ctx, ipam.SetChange{ClusterID: "c1", Owner: ipam.Owner{ID: "gone", OrgID: "acme"},
		Add: []ipam.SetEntry{{Key: "a", Family: 6}}}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.ReleaseSet(f.ctx, "c1", "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.ScaleNodeBlocks(f.ctx, "c1", "n1", scaling(40, 16)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.ScaleNodeBlocks(f.ctx, "c1", "n1", scaling(0, 16)); err != nil { // parks released blocks
		t.Fatal(err)
	}

	join := func(v any, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Trim(strings.ReplaceAll(fmt.Sprint(v), "} {", " "), "[]{}")
	}
	for _, c := range []struct{ name, got, want string }{
		{"clusters", join(f.st.ListClusterIDs(f.ctx)), "c0 c1"},
		{"pools of c1", join(f.st.ListPools(f.ctx, "c1")), "c1/instance c1/node c1/v4"},
		{"operator pools", join(f.st.ListPools(f.ctx, "", ipam.CategoryIPv4, ipam.CategoryIPv6)), "c1/v4"},
		{"pools of c0", join(f.st.ListPools(f.ctx, "c0", ipam.CategoryIPv4)), ""},
		{"sets", join(f.st.ListSets(f.ctx, "", "", "")), "c1 web"},
		{"sets of acme/prod", join(f.st.ListSets(f.ctx, "c1", "acme", "prod")), "c1 web"},
		{"sets of dev", join(f.st.ListSets(f.ctx, "", "", "dev")), ""},
		{"nodes with blocks", join(f.st.NodesWithBlocks(f.ctx, "c1")), "c1 n1"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	if _, err := f.st.ListPools(f.ctx, "c1", "v6"); !errors.Is(err, ipam.ErrInvalid) || !strings.Contains(err.Error(), "category") {
		t.Errorf("an unknown category: %v, want an invalid category", err)
	}
	if _, err := f.st.ListSets(f.ctx, "", "bad org", ""); !errors.Is(err, ipam.ErrInvalid) || !strings.Contains(err.Error(), "org_id") {
		t.Errorf("an invalid org: %v, want org_id named", err)
	}
}
