package ipam_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
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

// Neither one-statement allocation walks a whole index of the allocations,
// whatever the planner believes about the table: here its statistics say no
// row is cooling (analyzed while every row was active, as after an apply,
// before a destroy), the plans are the generic ones, and the owners asking
// have a cooling row each. A join that such estimates turn around walked the
// whole reuse queue, cooling rows of every pool included, for every
// allocation.
func TestFastStatementsReadNoIndexWhole(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.CreatePool(ctx, ipam.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}); err != nil {
		t.Fatal(err)
	}
	env := func(id string) ipam.Owner { return ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: id, EnvID: id} }
	type owned struct {
		pool  ipam.PoolRef
		owner ipam.Owner
	}
	var all []owned
	for i := range 200 {
		all = append(all, owned{ipam.InstancePool("c1"), instance(fmt.Sprintf("i-%d", i))})
		if i < 100 {
			all = append(all, owned{ipam.OperatorPool("c1", "v4"), env(fmt.Sprintf("e-%d", i))})
		}
	}
	for _, o := range all {
		if _, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: o.pool, Owner: o.owner}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.Exec(ctx, `ANALYZE ipam_allocations`); err != nil {
		t.Fatal(err)
	}
	for _, o := range all {
		if ok, err := st.Release(ctx, "c1", o.owner, 0); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	for _, q := range []string{`SET plan_cache_mode = force_generic_plan`, strings.Replace(ipam.TxSettings, "SET LOCAL", "SET", 1)} {
		if _, err := raw.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	args := map[string]string{
		"fresh":  `'c1', 'c1/instance', 'instance', 'i-7', 'acme', 'prod', NULL, 'i-7', 'test', '1 hour', NULL, gen_random_uuid(), 'allocation.reserved', NULL, gen_random_uuid()`,
		"reused": `'c1', 'c1/v4', 'env_ipv4', 'e-7', NULL, 'e-7', NULL, NULL, 'test', '1 hour', NULL, gen_random_uuid(), 'allocation.reserved'`,
	}
	checked := 0
	for _, hs := range ipam.HotStatements() {
		kind, _, ok := strings.Cut(strings.TrimPrefix(hs.Name, "fast path: a "), " allocation in one statement")
		if !ok || args[kind] == "" {
			continue
		}
		checked++
		name := "fast_" + kind
		if _, err := raw.Exec(ctx, `PREPARE `+name+` AS `+hs.SQL); err != nil {
			t.Fatal(err)
		}
		var js string
		if err := raw.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE `+name+`(`+args[kind]+`)`).Scan(&js); err != nil {
			t.Fatal(err)
		}
		type node struct {
			Type      string `json:"Node Type"`
			Relation  string `json:"Relation Name"`
			Index     string `json:"Index Name"`
			IndexCond string `json:"Index Cond"`
			Plans     []node `json:"Plans"`
		}
		var doc []struct{ Plan node }
		if err := json.Unmarshal([]byte(js), &doc); err != nil {
			t.Fatal(err)
		}
		var walk func(n node)
		walk = func(n node) {
			if n.Relation == "ipam_allocations" && (n.Type == "Seq Scan" || (strings.HasPrefix(n.Type, "Index") && n.IndexCond == "")) {
				t.Errorf("%s: %s on ipam_allocations %s with no index condition:\n%s", hs.Name, n.Type, n.Index, js)
			}
			for _, c := range n.Plans {
				walk(c)
			}
		}
		for _, d := range doc {
			walk(d.Plan)
		}
	}
	if checked != len(args) {
		t.Fatalf("checked %d fast statements of ipam.HotStatements, want %d (renamed?)", checked, len(args))
	}
}
