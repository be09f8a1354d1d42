package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// TestListByInstanceReadsEveryBranch lists by instance the rows each of
// the listing's three branches reads (sqlListByInstanceSource): the
// instance's own active, held and cooling rows, and rows labelled with it
// that are not its own (a set's member, an instance address whose owner is
// another id), in every state they can be listed in.
func TestListByInstanceReadsEveryBranch(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.alloc("c1/instance", engine.Owner{Kind: engine.OwnerInstance, ID: "i1", InstanceID: "i1"})
	f.alloc("c1/instance", engine.Owner{Kind: engine.OwnerInstance, ID: "x1", InstanceID: "i1"})
	f.alloc("c1/instance", engine.Owner{Kind: engine.OwnerInstance, ID: "i2", InstanceID: "i2"})
	f.release(instance("i2"))
	if _, err := f.st.Reserve(f.ctx, engine.AllocateRequest{Pool: testdb.Pool("c1/instance"),
		Owner: engine.Owner{Kind: engine.OwnerInstance, ID: "i3", InstanceID: "i3"}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"s1", "s2"} {
		if _, err := f.st.ApplySet(f.ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: set, InstanceID: "i2"},
			Add: []engine.SetEntry{{Key: "a", Pools: []string{"c1/instance"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.st.ReleaseSet(f.ctx, "c1", "s2"); err != nil {
		t.Fatal(err)
	}
	f.alloc("c1/instance", engine.Owner{Kind: engine.OwnerInstance, ID: "i9", InstanceID: "i9"})
	for _, tc := range []struct {
		f    engine.ListFilter
		want string
	}{
		{engine.ListFilter{ClusterID: "c1", InstanceID: "i1"}, "instance:i1:active instance:x1:active"},
		{engine.ListFilter{ClusterID: "c1", InstanceID: "i2"}, "instance:i2:cooling set:s1#a:active set:s2#a:cooling"},
		{engine.ListFilter{InstanceID: "i2", State: "cooling"}, "instance:i2:cooling set:s2#a:cooling"},
		{engine.ListFilter{InstanceID: "i2", State: "active"}, "set:s1#a:active"},
		{engine.ListFilter{ClusterID: "c1", InstanceID: "i3"}, "instance:i3:reserved"},
		{engine.ListFilter{InstanceID: "i3", State: "active"}, ""},
		{engine.ListFilter{ClusterID: "c2", InstanceID: "i1"}, ""},
		{engine.ListFilter{ClusterID: "c1", InstanceID: "i4"}, ""},
	} {
		got, err := engine.OperatorOf(f.st).ListAllocations(f.ctx, tc.f)
		if err != nil {
			t.Fatalf("%+v: %v", tc.f, err)
		}
		var out []string
		for _, a := range got {
			out = append(out, a.Owner.Kind+":"+a.Owner.ID+":"+a.State)
		}
		slices.Sort(out)
		if s := strings.Join(out, " "); s != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.f, s, tc.want)
		}
	}
	// Each branch reads its index (a branch whose condition no longer
	// implies its partial index's predicate would read every row), with and
	// without a cluster.
	for _, fl := range []engine.ListFilter{{ClusterID: "c1", InstanceID: "i2"}, {InstanceID: "i2"}} {
		q, args := engine.ListAllocationsQuery(fl)
		tx, err := f.raw.Begin(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(f.ctx, engine.TxSettings, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
		var js string
		if err := tx.QueryRow(f.ctx, "EXPLAIN (FORMAT JSON) "+q, args...).Scan(&js); err != nil {
			t.Fatal(err)
		}
		_ = tx.Rollback(f.ctx)
		for _, ix := range []string{"ipam_allocations_owner_active", "ipam_allocations_owner_cooling", "ipam_allocations_instance_label"} {
			if !slices.ContainsFunc(planNodes(t, js), func(n planNode) bool { return n.Index == ix }) {
				t.Errorf("%+v: the listing does not read %s:\n%s", fl, ix, js)
			}
		}
	}
}

// TestListByKindAndCategoryReadIndexes: on a table where another pool's
// rows are most of it, a listing by owner kind (terraform query's list
// resources, ipamctl list --kind) reads the owner indexes, and a listing by
// category the pools' rows through (pool_id, state), with the planner's own
// settings, as ListAllocations runs: neither reads the table whole.
func TestListByKindAndCategoryReadIndexes(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.alloc("c1/node", node("n1"))
	f.alloc("c1/node", node("n2"))
	f.release(node("n2"))
	fillPool(t, f.st, f.raw, "c1/instance", "2001:db8:0:1::", 20000)
	for _, tc := range []struct {
		f       engine.ListFilter
		indexes []string
		want    string
	}{
		{engine.ListFilter{OwnerKind: "node", State: "active", Limit: 100}, []string{"ipam_allocations_owner_active"}, "n1:active"},
		{engine.ListFilter{ClusterID: "c1", OwnerKind: "node", State: "active", Unmanaged: true, Limit: 100},
			[]string{"ipam_allocations_owner_active"}, "n1:active"},
		{engine.ListFilter{OwnerKind: "node"}, []string{"ipam_allocations_owner_active", "ipam_allocations_owner_cooling"}, "n1:active n2:cooling"},
		{engine.ListFilter{ClusterID: "c1", OwnerKind: "node", Limit: 100},
			[]string{"ipam_allocations_owner_active", "ipam_allocations_owner_cooling"}, "n1:active n2:cooling"},
		{engine.ListFilter{OwnerKind: "node", State: "cooling", Limit: 100},
			[]string{"ipam_allocations_owner_active", "ipam_allocations_owner_cooling"}, "n2:cooling"},
		{engine.ListFilter{Category: "node", Limit: 100}, []string{"ipam_allocations_pool_state"}, "n1:active n2:cooling"},
		// One owner: the owner indexes, for its active and its cooling rows.
		{engine.ListFilter{ClusterID: "c1", OwnerKind: "node", OwnerID: "n2"},
			[]string{"ipam_allocations_owner_active", "ipam_allocations_owner_cooling"}, "n2:cooling"},
		{engine.ListFilter{OwnerKind: "node", OwnerID: "n1"},
			[]string{"ipam_allocations_owner_active", "ipam_allocations_owner_cooling"}, "n1:active"},
	} {
		got, err := engine.OperatorOf(f.st).ListAllocations(f.ctx, tc.f)
		if err != nil {
			t.Fatalf("%+v: %v", tc.f, err)
		}
		var out []string
		for _, a := range got {
			out = append(out, a.Owner.ID+":"+a.State)
		}
		if s := strings.Join(out, " "); s != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.f, s, tc.want)
		}
		var pools []string
		if tc.f.Category != "" {
			pools = []string{"c1/" + tc.f.Category}
		}
		q, args := engine.ListAllocationsQuery(tc.f, pools...)
		var js string
		if err := f.raw.QueryRow(f.ctx, "EXPLAIN (FORMAT JSON) "+q, args...).Scan(&js); err != nil {
			t.Fatal(err)
		}
		nodes := planNodes(t, js)
		if slices.ContainsFunc(nodes, func(n planNode) bool { return n.Type == "Seq Scan" && n.Relation == "ipam_allocations" }) {
			t.Errorf("%+v: the listing reads every row:\n%s", tc.f, js)
		}
		for _, ix := range tc.indexes {
			if !slices.ContainsFunc(nodes, func(n planNode) bool { return n.Index == ix }) {
				t.Errorf("%+v: the listing does not read %s:\n%s", tc.f, ix, js)
			}
		}
	}
}

func TestListAllocations(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.alloc("c1/node", node("n1"))
	f.alloc("c1/instance", engine.Owner{Kind: engine.OwnerInstance, ID: "i1", InstanceID: "i1", OrgID: "acme", EnvID: "prod", NodeID: "n1"})
	f.alloc("c1/instance", engine.Owner{Kind: engine.OwnerInstance, ID: "i2", InstanceID: "i2", OrgID: "acme", EnvID: "dev", NodeID: "n1"})
	f.alloc("c1/instance", engine.Owner{Kind: engine.OwnerInstance, ID: "i3", InstanceID: "i3", OrgID: "umbrella", EnvID: "prod"})
	f.alloc("c1/v4", engine.Owner{Kind: engine.OwnerEnvIPv4, ID: "prod", EnvID: "prod", OrgID: "acme"})
	f.release(engine.Owner{Kind: engine.OwnerInstance, ID: "i2"})
	f.alloc("c1/instance", instance("gone"))
	f.release(instance("gone"))
	age(t, f.raw, "c1/instance", 48*time.Hour) // i2 and gone have cooled down: not listed as cooling
	f.release(engine.Owner{Kind: engine.OwnerInstance, ID: "i3"})

	// The fixture is only read from here on: the cases run in parallel.
	owners := func(t *testing.T, fl engine.ListFilter) string {
		t.Helper()
		got, err := engine.OperatorOf(f.st).ListAllocations(f.ctx, fl)
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
	cases := []struct {
		name string
		f    engine.ListFilter
		want string
	}{
		{"everything", engine.ListFilter{}, "i1:active:instance i3:cooling:instance n1:active:node prod:active:ipv4"},
		{"cluster and org", engine.ListFilter{ClusterID: "c1", OrgID: "acme"}, "i1:active:instance prod:active:ipv4"},
		{"env", engine.ListFilter{EnvID: "prod"}, "i1:active:instance i3:cooling:instance prod:active:ipv4"},
		{"node", engine.ListFilter{NodeID: "n1"}, "i1:active:instance n1:active:node"},
		{"instance", engine.ListFilter{InstanceID: "i3"}, "i3:cooling:instance"},
		{"category", engine.ListFilter{Category: "ipv4"}, "prod:active:ipv4"},
		{"pool and state", engine.ListFilter{PoolID: "c1/instance", State: "active"}, "i1:active:instance"},
		{"cooling", engine.ListFilter{State: "cooling"}, "i3:cooling:instance"},
		{"reserved", engine.ListFilter{State: "reserved"}, ""},
		{"owner kind", engine.ListFilter{OwnerKind: "node"}, "n1:active:node"},
		{"owner kind in a cluster", engine.ListFilter{ClusterID: "c1", OwnerKind: "instance"}, "i1:active:instance i3:cooling:instance"},
		{"owner kind and state", engine.ListFilter{OwnerKind: "instance", State: "cooling"}, "i3:cooling:instance"},
		{"category without a pool", engine.ListFilter{Category: "ipv6"}, ""},
		{"other cluster", engine.ListFilter{ClusterID: "c2"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := owners(t, tc.f); got != tc.want {
				t.Errorf("%+v: got %q, want %q", tc.f, got, tc.want)
			}
		})
	}
	// A limit keeps the first rows of the listing, in its order (cluster,
	// pool, ordinal): the node pool's row was written first, and the
	// instance pool comes first in the order. A limit past the listing's
	// length changes nothing.
	t.Run("limit", func(t *testing.T) {
		t.Parallel()
		list := func(fl engine.ListFilter) []string {
			got, err := engine.OperatorOf(f.st).ListAllocations(f.ctx, fl)
			if err != nil {
				t.Fatalf("%+v: %v", fl, err)
			}
			var out []string
			for _, a := range got {
				out = append(out, a.PoolID+":"+a.Address.String()+":"+a.Owner.ID+":"+a.State+":"+a.Category)
			}
			return out
		}
		filters := []engine.ListFilter{{Unmanaged: true}, {ClusterID: "c1", Category: "instance"}}
		for _, tc := range cases {
			filters = append(filters, tc.f)
		}
		for _, fl := range filters {
			all := list(fl)
			for n := 1; n <= len(all)+1; n++ {
				fl.Limit = n
				if got, want := list(fl), all[:min(n, len(all))]; !slices.Equal(got, want) {
					t.Errorf("%+v: got %q, want %q", fl, got, want)
				}
			}
		}
		if got := list(engine.ListFilter{ClusterID: "c1", Limit: 1}); len(got) != 1 || !strings.HasPrefix(got[0], "c1/instance:") {
			t.Errorf("limit 1: got %q, want the instance pool's first row", got)
		}
	})
	for _, tc := range []struct {
		f     engine.ListFilter
		field string
	}{
		{engine.ListFilter{State: "free"}, "state"},
		{engine.ListFilter{Category: "ipv5"}, "category"},
		{engine.ListFilter{OrgID: "a b"}, "org_id"},
		{engine.ListFilter{PoolID: "nopool"}, "pool_id"},
		{engine.ListFilter{OwnerKind: "vm"}, "owner_kind"},
	} {
		t.Run("invalid/"+tc.field, func(t *testing.T) {
			t.Parallel()
			_, err := engine.OperatorOf(f.st).ListAllocations(f.ctx, tc.f)
			var ie *engine.InvalidError
			if !errors.As(err, &ie) || ie.Field != tc.field {
				t.Errorf("%+v: %v, want invalid %s", tc.f, err, tc.field)
			}
		})
	}
}

func TestLookupAddress(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	a := f.alloc("c1/instance", engine.Owner{Kind: engine.OwnerInstance, ID: "i1", InstanceID: "i1", OrgID: "acme", EnvID: "prod"})
	b := f.alloc("c1/node", node("n1"))
	f.release(node("n1"))
	lookup := func(addr, cluster string) engine.AddressInfo {
		t.Helper()
		infos, err := engine.OperatorOf(f.st).LookupAddress(f.ctx, netip.MustParseAddr(addr), cluster)
		if err != nil || len(infos) != 1 {
			t.Fatalf("lookup %s: %+v %v", addr, infos, err)
		}
		return infos[0]
	}
	got := lookup(a.Address.String(), "")
	if got.Status != "active" || got.Category != "instance" || got.Owner.OrgID != "acme" || got.Owner.EnvID != "prod" ||
		got.Owner.InstanceID != "i1" || got.Actor != "terraform" || got.AllocatedAt.IsZero() || got.PoolID != "c1/instance" || got.Generation != a.Generation {
		t.Errorf("active: %+v", got)
	}
	// A cooling address names its last holder and when it becomes reusable.
	got = lookup(b.Address.String(), "c1")
	if got.Status != "cooling" || got.Owner.NodeID != "n1" || got.ReleasedAt.IsZero() || got.ReusableAt.Sub(got.ReleasedAt) != engine.DefaultNodeCooldown {
		t.Errorf("cooling: %+v", got)
	}
	age(t, f.raw, "c1/node", 31*24*time.Hour)
	if got = lookup(b.Address.String(), ""); got.Status != "free" || got.Owner.NodeID != "n1" {
		t.Errorf("cooled down: %+v (want free, last holder n1)", got)
	}
	if got = lookup("2001:db8::99", ""); got.Status != "free" || got.ID != [16]byte{} || got.PoolID != "c1/node" || got.Ordinal != 0x99 {
		t.Errorf("never used: %+v", got)
	}
	if got = lookup("2001:db8::", ""); got.Status != engine.StatusExcluded {
		t.Errorf("subnet-router anycast: %+v", got)
	}
	if got = lookup("198.51.100.3", ""); got.Status != "free" || got.Category != "ipv4" || got.Block.String() != "198.51.100.0/29" {
		t.Errorf("free IPv4 row: %+v", got)
	}
	if got = lookup("198.51.100.7", ""); got.Status != engine.StatusExcluded {
		t.Errorf("broadcast: %+v", got)
	}
	// Sequential: clusters and pools are added right after these.
	for _, tc := range []struct{ name, addr, want string }{
		{"in the cluster, in no pool", "2001:db8:0:5::1", `inside the prefix of cluster "c1" but in none of its pools`},
		{"in no cluster", "2001:dead::1", "in no pool of any cluster"},
		{"IPv4 in no pool", "203.0.113.1", "in no pool of any cluster"},
	} {
		t.Run("not found/"+tc.name, func(t *testing.T) {
			_, err := engine.OperatorOf(f.st).LookupAddress(f.ctx, netip.MustParseAddr(tc.addr), "")
			if !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want not_found saying %q", tc.addr, err, tc.want)
			}
		})
	}
	// Private IPv4 blocks may repeat across clusters: both are found.
	mkCluster(t, f.st, "c2", "2001:db9::/48", "", "")
	for _, c := range []string{"c1", "c2"} {
		if _, err := f.st.CreatePool(f.ctx, engine.Pool{ClusterID: c, Name: "private", CIDRs: prefixes("10.0.0.0/30")}); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := engine.OperatorOf(f.st).LookupAddress(f.ctx, netip.MustParseAddr("10.0.0.1"), "")
	if err != nil || len(infos) != 2 || engine.ClusterIDs(infos) != "c1, c2" {
		t.Fatalf("private in two clusters: %+v %v", infos, err)
	}
	if infos, err = engine.OperatorOf(f.st).LookupAddress(f.ctx, netip.MustParseAddr("10.0.0.1"), "c2"); err != nil || len(infos) != 1 || infos[0].ClusterID != "c2" {
		t.Fatalf("private in c2: %+v %v", infos, err)
	}
}

func TestListEvents(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	start, err := engine.OperatorOf(f.st).DatabaseNow(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.alloc("c1/node", node("n1"))
	f.alloc("c1/instance", instance("i1"))
	f.release(instance("i1"))
	// The events are only read from here on: the cases run in parallel.
	types := func(t *testing.T, fl engine.EventFilter) string {
		t.Helper()
		evs, err := engine.OperatorOf(f.st).ListEvents(f.ctx, fl)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			out = append(out, e.Type)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name string
		f    engine.EventFilter
		want string
	}{
		{"since start", engine.EventFilter{Since: start}, "node.enrolled,instance.allocated,instance.released"},
		{"all of c1", engine.EventFilter{ClusterID: "c1"}, "cluster.created,pool.created,node.enrolled,instance.allocated,instance.released"},
		{"by type", engine.EventFilter{Types: []string{"instance.*", "cluster.created"}}, "cluster.created,instance.allocated,instance.released"},
		{"newest two", engine.EventFilter{Limit: 2}, "instance.allocated,instance.released"},
		{"no IPv4 events", engine.EventFilter{Types: []string{"env.ipv4_*"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := types(t, tc.f); got != tc.want {
				t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
			}
		})
	}
	t.Run("type *", func(t *testing.T) {
		t.Parallel()
		// A type that matches nothing the IPAM writes is refused, not answered with nothing.
		for _, typ := range []string{"env.ipv4_addon_allocation_failure", "nodes.*"} {
			if _, err := engine.OperatorOf(f.st).ListEvents(f.ctx, engine.EventFilter{Types: []string{typ}}); engine.Code(err) != engine.CodeInvalid || !strings.Contains(err.Error(), "matches no event type") {
				t.Errorf("ListEvents(Types: %s): %v, want invalid_input naming the known types", typ, err)
			}
		}
		if _, err := engine.OperatorOf(f.st).ListEvents(f.ctx, engine.EventFilter{Types: []string{"*"}}); engine.Code(err) != engine.CodeInvalid {
			t.Errorf("type *: %v", err)
		}
	})
}

// Every event type is FAMILY.EVENT, so that FAMILY.* finds all of a family's
// events: env.* finds every event of the environment IPv4 add-on, those
// written now (env.ipv4_addon_enabled, _allocation_failed, _relabeled,
// _disabled) and those older versions wrote under other names
// (env.ipv4_addon.allocation_failed, env_ipv4.relabeled), which filters
// accept as aliases: a filter naming either name finds the events of both.
func TestEnvEventsAreOneFamily(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	for i := range 6 {
		o := env(fmt.Sprintf("e%d", i))
		if i == 0 {
			o.OrgID = "" // relabelled below: an org where there was none names no other tenant
		}
		f.alloc("c1/v4", o)
	}
	if _, err := f.st.Allocate(f.ctx, engine.AllocateRequest{Pool: testdb.Pool("c1/v4"), Owner: env("e6")}); engine.Code(err) != engine.CodeExhausted {
		t.Fatalf("the seventh environment: %v, want ipam_exhausted", err)
	}
	if _, err := f.st.UpdateLabels(f.ctx, "c1", env("e0")); err != nil {
		t.Fatal(err)
	}
	f.release(env("e1"))
	// What an older version wrote: the same events under the old names.
	for _, old := range []string{"env.ipv4_addon.allocation_failed", "env_ipv4.relabeled"} {
		f.exec(`INSERT INTO ipam_events (id, type, cluster_id, owner_kind, owner_id, actor, data)
			VALUES (gen_random_uuid(), $1, 'c1', 'env_ipv4', 'old', 'terraform', '{}')`, old)
	}
	types := func(fl engine.EventFilter) map[string]int {
		t.Helper()
		evs, err := engine.OperatorOf(f.st).ListEvents(f.ctx, fl)
		if err != nil {
			t.Fatalf("%v: %v", fl.Types, err)
		}
		out := map[string]int{}
		for _, e := range evs {
			out[e.Type]++
		}
		return out
	}
	all := map[string]int{"env.ipv4_addon_enabled": 6, "env.ipv4_addon_allocation_failed": 1, "env.ipv4_addon_relabeled": 1,
		"env.ipv4_addon_disabled": 1, "env.ipv4_addon.allocation_failed": 1, "env_ipv4.relabeled": 1}
	for _, glob := range []string{"env.*", "env.ipv4_addon*"} {
		if got := types(engine.EventFilter{Types: []string{glob}}); !maps.Equal(got, all) {
			t.Errorf("%s found %v, want every env event under either name: %v", glob, got, all)
		}
	}
	for typ, want := range map[string]map[string]int{
		"env_ipv4.relabeled":               {"env.ipv4_addon_relabeled": 1, "env_ipv4.relabeled": 1},
		"env.ipv4_addon_relabeled":         {"env.ipv4_addon_relabeled": 1, "env_ipv4.relabeled": 1},
		"env_ipv4.*":                       {"env.ipv4_addon_relabeled": 1, "env_ipv4.relabeled": 1},
		"env.ipv4_addon.allocation_failed": {"env.ipv4_addon_allocation_failed": 1, "env.ipv4_addon.allocation_failed": 1},
		"env.ipv4_addon_allocation_failed": {"env.ipv4_addon_allocation_failed": 1, "env.ipv4_addon.allocation_failed": 1},
	} {
		if got := types(engine.EventFilter{Types: []string{typ}}); !maps.Equal(got, want) {
			t.Errorf("%s found %v, want %v", typ, got, want)
		}
	}
	// One spelling: every type written now is FAMILY.EVENT, and each old
	// name stands for one of them.
	known := engine.EventTypes()
	for _, typ := range known {
		if strings.Count(typ, ".") != 1 {
			t.Errorf("%s is not FAMILY.EVENT", typ)
		}
	}
	for old, now := range engine.EventTypeAliases() {
		if slices.Contains(known, old) || !slices.Contains(known, now) {
			t.Errorf("alias %s -> %s: the old name is still written, or the new one is not", old, now)
		}
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
	if _, err := f.st.ApplySet(f.ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "web", OrgID: "acme", EnvID: "prod"},
		Add: []engine.SetEntry{{Key: "a", Family: 6}, {Key: "b", Family: 4}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.ApplySet(f.ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "gone", OrgID: "acme"},
		Add: []engine.SetEntry{{Key: "a", Family: 6}}}); err != nil {
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

	// The fixture is only read from here on: the cases run in parallel.
	for _, tc := range []struct {
		name string
		list func() (any, error)
		want string
	}{
		{"clusters", func() (any, error) { return engine.OperatorOf(f.st).ListClusterIDs(f.ctx) }, "c0 c1"},
		{"pools of c1", func() (any, error) { return engine.OperatorOf(f.st).ListPools(f.ctx, "c1") }, "c1/instance c1/node c1/v4"},
		{"operator pools", func() (any, error) {
			return engine.OperatorOf(f.st).ListPools(f.ctx, "", engine.CategoryIPv4, engine.CategoryIPv6)
		}, "c1/v4"},
		{"pools of c0", func() (any, error) { return engine.OperatorOf(f.st).ListPools(f.ctx, "c0", engine.CategoryIPv4) }, ""},
		{"sets", func() (any, error) { return engine.OperatorOf(f.st).ListSets(f.ctx, "", "", "") }, "c1 web"},
		{"sets of acme in prod", func() (any, error) { return engine.OperatorOf(f.st).ListSets(f.ctx, "c1", "acme", "prod") }, "c1 web"},
		{"sets of dev", func() (any, error) { return engine.OperatorOf(f.st).ListSets(f.ctx, "", "", "dev") }, ""},
		{"nodes with blocks", func() (any, error) { return f.st.NodesWithBlocks(f.ctx, "c1") }, "c1 n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := tc.list()
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := strings.Trim(strings.ReplaceAll(fmt.Sprint(v), "} {", " "), "[]{}"); got != tc.want {
				t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
			}
		})
	}
	t.Run("invalid/category", func(t *testing.T) {
		t.Parallel()
		if _, err := engine.OperatorOf(f.st).ListPools(f.ctx, "c1", "v6"); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "category") {
			t.Errorf("an unknown category: %v, want an invalid category", err)
		}
	})
	t.Run("invalid/org", func(t *testing.T) {
		t.Parallel()
		if _, err := engine.OperatorOf(f.st).ListSets(f.ctx, "", "bad org", ""); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "org_id") {
			t.Errorf("an invalid org: %v, want org_id named", err)
		}
	})
}

// What a Terraform state holds, which `terraform query` leaves out unless
// asked: a cluster or pool a configuration created (its origin) or a read
// of the provider saw (Confirm*), an allocation a state holds, a set with
// such a member, a node's blocks a read saw. Reads through Peek record
// nothing, so listing the scheduler's allocations never makes them a
// state's.
func TestManagersAndPeek(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	cfg := openOrigin(t, f.st, "terraform", "/work/a")
	peek := f.st.Peek()
	if _, err := cfg.CreatePool(f.ctx, engine.Pool{ClusterID: "c1", Name: "extra", Cooldown: time.Hour,
		CIDRs: prefixes("192.0.2.0/29")}); err != nil {
		t.Fatal(err)
	}
	managers := func(kind string, ids ...string) string {
		t.Helper()
		m, err := engine.OperatorOf(f.st).Managers(f.ctx, kind, ids)
		if err != nil {
			t.Fatalf("Managers(%s): %v", kind, err)
		}
		return fmt.Sprint(m)
	}
	if got := managers(engine.ManagedPool, "c1/v4", "c1/extra"); got != "map[c1/extra:/work/a]" {
		t.Errorf("pools a state holds: %s, want only c1/extra, by /work/a", got)
	}
	for _, c := range []*engine.Client{peek, f.st} {
		if err := engine.OperatorOf(c).ConfirmPool(f.ctx, "c1/v4"); err != nil {
			t.Fatal(err)
		}
		if err := engine.OperatorOf(c).ConfirmCluster(f.ctx, "c1"); err != nil {
			t.Fatal(err)
		}
		want := map[bool][2]string{true: {"map[]", "map[c1/extra:/work/a]"}, false: {"map[c1:]", "map[c1/extra:/work/a c1/v4:]"}}[c == peek]
		if got := [2]string{managers(engine.ManagedCluster, "c1", "c9"), managers(engine.ManagedPool, "c1/v4", "c1/extra")}; got != want {
			t.Errorf("after a read (peek %v): clusters and pools held %v, want %v", c == peek, got, want)
		}
	}

	// Allocations: the scheduler's, read through Peek, stays no state's.
	sched := openOrigin(t, f.st, "scheduler", "")
	if _, err := sched.Allocate(f.ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("s1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Allocate(f.ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("t1")}); err != nil {
		t.Fatal(err)
	}
	unmanaged := func() string {
		t.Helper()
		views, err := engine.OperatorOf(f.st).ListAllocations(f.ctx, engine.ListFilter{ClusterID: "c1", OwnerKind: engine.OwnerNode, Unmanaged: true})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, v := range views {
			ids = append(ids, v.Owner.ID)
		}
		return strings.Join(ids, " ")
	}
	if _, err := peek.GetActive(f.ctx, "c1", engine.OwnerNode, "s1"); err != nil {
		t.Fatal(err)
	}
	if got := unmanaged(); got != "s1" {
		t.Errorf("allocations no state holds after a peek: %q, want s1", got)
	}
	views, err := engine.OperatorOf(f.st).ListAllocations(f.ctx, engine.ListFilter{ClusterID: "c1", OwnerKind: engine.OwnerNode})
	if err != nil || len(views) != 2 || views[0].StateHeld == views[1].StateHeld {
		t.Fatalf("every node allocation: %+v %v, want s1 and t1, one held by a state", views, err)
	}
	for _, v := range views {
		if v.StateHeld != (v.Owner.ID == "t1") || (v.Owner.ID == "t1" && v.Origin != "/work/a") {
			t.Errorf("%s: StateHeld %v, Origin %q", v.Owner.ID, v.StateHeld, v.Origin)
		}
	}
	if _, err := f.st.GetActive(f.ctx, "c1", engine.OwnerNode, "s1"); err != nil { // a refresh
		t.Fatal(err)
	}
	if got := unmanaged(); got != "" {
		t.Errorf("allocations no state holds after a refresh of s1: %q, want none", got)
	}

	// Sets and node blocks.
	if _, err := sched.ApplySet(f.ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "web", OrgID: "acme"},
		Add: []engine.SetEntry{{Key: "a", Family: 6}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sched.ScaleNodeBlocks(f.ctx, "c1", "n1", scaling(10, 16)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*engine.Client{peek, f.st} {
		if _, err := c.GetSet(f.ctx, "c1", "web"); err != nil {
			t.Fatal(err)
		}
		if err := c.ConfirmNodeBlocks(f.ctx, "c1", "n1"); err != nil {
			t.Fatal(err)
		}
		want := map[bool][2]string{true: {"map[]", "map[]"}, false: {"map[c1/web:]", "map[c1/n1:]"}}[c == peek]
		if got := [2]string{managers(engine.ManagedSet, "c1/web"), managers(engine.ManagedNodeBlocks, "c1/n1")}; got != want {
			t.Errorf("after a read (peek %v): sets and blocks held %v, want %v", c == peek, got, want)
		}
	}
	if _, err := engine.OperatorOf(f.st).Managers(f.ctx, "allocation", nil); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "node_blocks") {
		t.Errorf("an unknown kind: %v, want invalid naming the kinds", err)
	}
}

// A listing reads the allocations, then the addresses destroyed pools left
// cooling. Paused at each of its statement boundaries while the pool of a
// cooling address is destroyed (which turns the address into such a
// tombstone), it must list the address once, as the database was at one
// moment: neither twice (an allocation before, a tombstone after) nor not
// at all.
func TestListingReadsOneMoment(t *testing.T) {
	t.Parallel()
	e := newExploreEnv(t)
	cooling := "198.51.100.1" // e0's address in fixtureV4Cooling
	var got []engine.AllocationView
	var gotErr error
	list := exploreStep{name: "ipamctl list --cluster c1", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		got, gotErr = engine.OperatorOf(e.st).ListAllocations(ctx, engine.ListFilter{ClusterID: "c1"})
		return exploreAck{}, gotErr
	}}
	k := countBoundaries(e, fixtureV4Cooling, list)
	for i := 0; i <= k; i++ {
		if msg := exploreRun(e, fixtureV4Cooling, list, poolDestroyStep(false), int32(i)); msg != "" {
			t.Errorf("paused before statement %d of %d:\n%s", i+1, k, msg)
		}
		n := 0
		for _, v := range got {
			if v.Address.String() == cooling {
				n++
			}
		}
		if gotErr != nil || n != 1 {
			t.Errorf("paused before statement %d of %d, the pool destroyed meanwhile: %s listed %d times (%v); want once",
				i+1, k, cooling, n, gotErr)
		}
	}
}

// A lookup finds the pools that hold an address, then reads each pool and
// the address's row in it. Paused at each of its statement boundaries while
// that pool is destroyed, it must answer as the database was at one moment:
// the address cooling in its pool, or in no pool any more (not_found); not
// a bare not_found for the pool it found, nor the address free in it.
func TestLookupReadsOneMoment(t *testing.T) {
	t.Parallel()
	e := newExploreEnv(t)
	cooling := netip.MustParseAddr("198.51.100.1") // e0's address in fixtureV4Cooling
	var got []engine.AddressInfo
	var gotErr error
	lookup := exploreStep{name: "ipamctl lookup " + cooling.String(), run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		got, gotErr = engine.OperatorOf(e.st).LookupAddress(ctx, cooling, "c1")
		return exploreAck{}, gotErr
	}}
	k := countBoundaries(e, fixtureV4Cooling, lookup)
	for i := 0; i <= k; i++ {
		if msg := exploreRun(e, fixtureV4Cooling, lookup, poolDestroyStep(false), int32(i)); msg != "" {
			t.Errorf("paused before statement %d of %d:\n%s", i+1, k, msg)
		}
		before := gotErr == nil && len(got) == 1 && got[0].PoolID == "c1/v4" && got[0].Status == engine.StateCooling
		after := errors.Is(gotErr, engine.ErrNotFound) && strings.Contains(gotErr.Error(), "is in no pool of cluster \"c1\"")
		if !before && !after {
			t.Errorf("paused before statement %d of %d, the pool destroyed meanwhile: %+v, %v; want %s cooling in c1/v4, "+
				"or in no pool of c1", i+1, k, got, gotErr, cooling)
		}
	}
}
