package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// instanceHCL is one ipam_instance_address per id, in cluster c1.
func instanceHCL(ids ...string) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "resource \"ipam_instance_address\" %q {\n  cluster_id = \"c1\"\n  instance_id = %q\n  org_id = \"acme\"\n  env_id = \"prod\"\n}\n", id, id)
	}
	return b.String()
}

// A released address stays out of other owners' hands for its whole
// cooldown, even when its last owner planned to take it back and never
// applied that plan: the abandoned plan-time hold expires, but the cooldown of
// the release must still hold.
//
// The instance pool here has three addresses. Instance "a" holds ::1 and is
// destroyed (::1 cools down for 24h). "c" and "d" take ::2 and ::3. A plan
// that adds "a" back holds ::1 for "a" (its own cooling address) for
// reservation_ttl = 1s, and is never applied. Two seconds later a new instance
// "b" must get ipam_exhausted; it must not get ::1 23h59m early.
func TestCooldownSurvivesAbandonedPlanHold(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, Actor: "terraform"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.CreateCluster(ctx, ipam.Cluster{ID: "c1", Prefix: netip.MustParsePrefix("2001:db8::/48"),
		NodePrefix: netip.MustParsePrefix("2001:db8::/64"), InstancePrefix: netip.MustParsePrefix("2001:db8:0:1::/126"),
		NodeCooldown: ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	const opts = `reservation_ttl = "1s"`
	a := newWorkdirWith(t, url, opts, instanceHCL("a"))
	a.run("apply", "-input=false", "-auto-approve")
	first := a.addresses("")["ipam_instance_address.a"]
	a.setHCL(opts, "")
	a.run("apply", "-input=false", "-auto-approve")
	cd := newWorkdirWith(t, url, opts, instanceHCL("c", "d"))
	cd.run("apply", "-input=false", "-auto-approve")

	// The plan that is never applied: "a" comes back and holds its own cooling address.
	a.setHCL(opts, instanceHCL("a"))
	a.run("plan", "-input=false", "-out=abandoned")
	if got := a.addresses("abandoned")["ipam_instance_address.a"]; got != first {
		t.Fatalf("the plan shows %q for a, want its own cooling address %s", got, first)
	}
	time.Sleep(2 * time.Second) // the hold (reservation_ttl = 1s) expires

	b := newWorkdirWith(t, url, opts, instanceHCL("b"))
	out, err := b.try("apply", "-input=false", "-auto-approve")
	if err == nil {
		t.Errorf("BUG: instance b got %s, which instance a released less than a minute ago with a 24h cooldown: "+
			"an expired plan-time hold of the releasing owner put it back in the reuse queue with no cooldown left",
			b.addresses("")["ipam_instance_address.b"])
		// The audit must see it too: `ipamctl check` runs ipam.Check.
		st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if rep, err := operator.New(st).Check(ctx, "c1"); err != nil {
			t.Fatal(err)
		} else if rep.OK() {
			t.Errorf("BUG: ipam.Check (ipamctl check) finds no %s violation: it judges a hand-out only against the "+
				"event just before it (here a's plan-time hold), not against the address's latest release", operator.InvariantCooldown)
		}
	} else if !strings.Contains(string(out), "ipam_exhausted") {
		t.Fatalf("apply of b failed, but not with ipam_exhausted:\n%s", out)
	}
	checkInvariants(t, url)
}

// The checks that every reliability test ends with have teeth: one violation
// of each kind, planted with SQL behind the allocator's back, is found by
// ipam.Check (what `ipamctl check` runs) and by the independent SQL of
// checkInvariants. Among them is a reuse inside a cooldown with a hold of the
// releasing owner in between, which a check that compares each hand-out only
// with the event just before it would miss.
func TestInvariantChecksCatchPlantedViolations(t *testing.T) {
	url := setup(t)
	ctx := context.Background()
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, Actor: "terraform"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, r := range []struct {
		pool string
		o    ipam.Owner
	}{
		{"c1/node", ipam.Owner{Kind: ipam.OwnerNode, ID: "pn1", NodeID: "pn1"}},
		{"c1/node", ipam.Owner{Kind: ipam.OwnerNode, ID: "pn2", NodeID: "pn2"}},
		{"c1/node", ipam.Owner{Kind: ipam.OwnerNode, ID: "pn3", NodeID: "pn3"}},
		{"c1/instance", ipam.Owner{Kind: ipam.OwnerInstance, ID: "pa", InstanceID: "pa"}},
		{"c1/v4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: "pe1", EnvID: "pe1"}},
		{"c1/v4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: "pe2", EnvID: "pe2"}},
	} {
		if _, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: testdb.Pool(r.pool), Owner: r.o}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Release(ctx, "c1", ipam.Owner{Kind: ipam.OwnerInstance, ID: "pa"}, 0); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, url) // clean before the plants
	if t.Failed() {
		return
	}
	var unique string
	if err := func() error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		return c.QueryRow(ctx, `SELECT conname FROM pg_constraint WHERE conrelid = 'ipam_allocations'::regclass AND contype = 'u'`).Scan(&unique)
	}(); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, url,
		// unique_active_address: the same address active for a second owner.
		`ALTER TABLE ipam_allocations DROP CONSTRAINT `+unique,
		`INSERT INTO ipam_allocations (id, cluster_id, pool_id, address, ordinal, state, generation, owner_kind, owner_id, actor, allocated_at)
			SELECT gen_random_uuid(), cluster_id, pool_id, address, ordinal, 'active', 1, 'node', 'planted', 'x', now()
			FROM ipam_allocations WHERE owner_id = 'pn1'`,
		// address_in_pool: an address outside its pool, past the row
		// trigger that refuses it (schema migration 12).
		`ALTER TABLE ipam_allocations DISABLE TRIGGER ipam_allocations_in_pool_update`,
		`UPDATE ipam_allocations SET address = '2001:db8:ffff::9/128' WHERE owner_id = 'pn2'`,
		// one_ipv4_per_environment: a second IPv4 for environment pe1.
		`UPDATE ipam_allocations SET env_id = 'pe1' WHERE owner_id = 'pe2'`,
		// no_reuse_inside_cooldown: pa's address, cooling for 24h, is held by pa's plan and then goes to pb.
		`INSERT INTO ipam_events (id, at, type, cluster_id, pool_id, allocation_id, generation, address, owner_kind, owner_id, actor)
			SELECT gen_random_uuid(), clock_timestamp(), 'allocation.reserved', cluster_id, pool_id, id, generation + 1, address, 'instance', 'pa', 'x'
			FROM ipam_allocations WHERE owner_id = 'pa'`,
		`UPDATE ipam_allocations SET state = 'active', owner_id = 'pb', instance_id = 'pb', generation = generation + 2, released_at = NULL, reusable_at = NULL, cooling_until = NULL
			WHERE owner_id = 'pa'`,
		`INSERT INTO ipam_events (id, at, type, cluster_id, pool_id, allocation_id, generation, address, owner_kind, owner_id, actor)
			SELECT gen_random_uuid(), clock_timestamp() + interval '1 millisecond', 'instance.allocated', cluster_id, pool_id, id, generation, address, 'instance', 'pb', 'x'
			FROM ipam_allocations WHERE owner_id = 'pb'`,
		// A write without its event (the SQL's no-partial-write promise).
		`UPDATE ipam_allocations SET generation = generation + 7 WHERE owner_id = 'pn3'`,
		// stripe_counters: the counter of ordinal 1 moved back behind it.
		`UPDATE ipam_pool_stripes SET next_ordinal = 1 WHERE pool_id = 'c1/node' AND stripe = 1`,
		// usage_counters: the node pool's counters no longer add up to its active rows.
		`UPDATE ipam_pool_counters SET active = active + 2 WHERE pool_id = 'c1/node' AND slot = 7`,
		// pool_settings_in_force: the instance pool no longer carries the cluster's cooldown.
		`UPDATE ipam_pools SET cooldown = interval '1 second' WHERE id = 'c1/instance'`,
		// node_blocks: a node block over an address the node counter handed out.
		`INSERT INTO ipam_node_blocks (cluster_id, block, block_index, node_id, state)
			SELECT cluster_id, network(set_masklen(address, 124)), 999, 'ghost', 'active' FROM ipam_allocations WHERE owner_id = 'pn3'`,
		// tombstones_inherited: a live tombstone under pn3's row, as a pool that forgot to inherit it would leave.
		`INSERT INTO ipam_tombstones (address, scope, reusable_at, cluster_id, pool_id, allocation_id, generation, owner_kind, owner_id)
			SELECT address, '', now() + interval '1 day', 'gone', 'gone/node', gen_random_uuid(), 1, 'node', 'buried' FROM ipam_allocations WHERE owner_id = 'pn3'`,
	)
	violations, broken, _ := invariantViolations(t, url)
	found := map[string]int{}
	for _, v := range violations {
		found[v.Invariant]++
	}
	for _, inv := range operator.Invariants {
		if found[inv] == 0 {
			t.Errorf("ipam.Check missed the planted %s violation; it found %v", inv, violations)
		}
	}
	for _, q := range invariantQueries[:5] {
		if len(broken[q.name]) == 0 {
			t.Errorf("the SQL check %q missed its planted violation", q.name)
		}
	}
	if out, code := runIpamctl(t, url, "check"); code != 3 {
		t.Errorf("ipamctl check exited %d on a broken database, want 3:\n%s", code, out)
	}
	t.Logf("planted 6 violations: ipam.Check found %d (%v), the SQL checks %d kinds, ipamctl check exited 3", len(violations), found, len(broken))
}

// The audit judges a hand-out by the address's latest release, as the
// allocator does (DESIGN: reusable_at is fixed at release from the cooldown
// of the day). Node "a" releases ::1 (30 days), takes it back, the cluster's
// node cooldown is shortened to zero, "a" releases ::1 again and "b" gets it
// at once: legitimate, so `ipamctl check` must not report it (a false alarm
// would page someone and exit 3 on a healthy database).
func TestCheckJudgesTheLatestRelease(t *testing.T) {
	url := testdb.New(t)
	ctx := context.Background()
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, Actor: "terraform"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := st.CreateCluster(ctx, ipam.Cluster{ID: "c1", Prefix: netip.MustParsePrefix("2001:db8::/48"),
		NodePrefix: netip.MustParsePrefix("2001:db8::/126"), InstancePrefix: netip.MustParsePrefix("2001:db8:0:1::/64"),
		NodeCooldown: ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown})
	if err != nil {
		t.Fatal(err)
	}
	node := func(id string) ipam.Owner { return ipam.Owner{Kind: ipam.OwnerNode, ID: id, NodeID: id} }
	alloc := func(id string) netip.Addr {
		t.Helper()
		res, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: node(id)})
		if err != nil {
			t.Fatalf("allocate %s: %v", id, err)
		}
		return res.Address
	}
	release := func(id string) {
		t.Helper()
		if ok, err := st.Release(ctx, "c1", node(id), 0); err != nil || !ok {
			t.Fatalf("release %s: %v %v", id, ok, err)
		}
	}
	first := alloc("a")
	alloc("c")
	alloc("d") // the node pool (3 addresses) is full
	release("a")
	if got := alloc("a"); got != first {
		t.Fatalf("a got %s back, want its cooling %s", got, first)
	}
	c.NodeCooldown = 0
	if _, err := st.UpdateCluster(ctx, c); err != nil {
		t.Fatal(err)
	}
	release("a")
	if got := alloc("b"); got != first {
		t.Fatalf("b got %s, want %s (released with no cooldown)", got, first)
	}
	violations, broken, _ := invariantViolations(t, url)
	for _, v := range violations {
		t.Errorf("BUG: ipam.Check (ipamctl check) reports a legitimate reuse: %s", v)
	}
	for name, bad := range broken {
		t.Errorf("the SQL check %q reports a legitimate reuse: %v", name, bad)
	}
}
