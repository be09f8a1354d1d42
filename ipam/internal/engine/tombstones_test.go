package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/tern/v2/migrate"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
	"github.com/overlayipam/terraform-provider-ipam/migrations"
)

// tombstones reads the live tombstones: address -> scope and owner.
func tombstones(t *testing.T, raw *pgx.Conn) map[string]string {
	t.Helper()
	rows, err := raw.Query(context.Background(), `SELECT host(address), scope, owner_id FROM ipam_tombstones
		WHERE reusable_at > ipam_now() ORDER BY address`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var a, scope, owner string
		if err := rows.Scan(&a, &scope, &owner); err != nil {
			t.Fatal(err)
		}
		out[a] = scope + "/" + owner
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustCheck(t *testing.T, st *engine.Client) {
	t.Helper()
	if rep, err := engine.OperatorOf(st).Check(context.Background(), ""); err != nil || !rep.OK() {
		t.Fatalf("check: %v %+v", err, rep.Violations)
	}
}

// A destroy of a cluster or pool that holds no active address succeeds
// without force: holds go, and what is still cooling stays behind as
// tombstones that a cluster or pool created later over the same addresses
// inherits, so that none is handed out before its cooldown ends. A private
// IPv4 tombstone binds only the cluster of its id.
func TestTombstonesOutliveTheirCluster(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	pool := func(cluster, name, cidr string) {
		t.Helper()
		if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: cluster, Name: name, Cooldown: time.Hour,
			CIDRs: []netip.Prefix{netip.MustParsePrefix(cidr)}}); err != nil {
			t.Fatal(err)
		}
	}
	pool("c1", "v4", "203.0.113.0/29")
	pool("c1", "p10", "10.0.0.0/29")
	alloc := func(cluster, poolName string, o engine.Owner) netip.Addr {
		t.Helper()
		ref := engine.ClusterPools(cluster)
		if poolName != "" {
			ref = engine.OperatorPool(cluster, poolName)
		}
		a, err := st.Allocate(ctx, engine.AllocateRequest{Pool: ref, Owner: o})
		if err != nil {
			t.Fatal(err)
		}
		return a.Address
	}
	release := func(cluster string, o engine.Owner) {
		t.Helper()
		if ok, err := st.Release(ctx, cluster, o, 0); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	n1, n2 := alloc("c1", "", node("n1")), alloc("c1", "", node("n2"))
	e1, e2 := alloc("c1", "v4", envOwner("e1")), alloc("c1", "p10", envOwner("e2"))
	release("c1", node("n1"))
	release("c1", envOwner("e1"))
	release("c1", envOwner("e2"))
	hold, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e3")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	// n2 is active: a destroy without force is refused, naming it.
	err = st.DeleteCluster(ctx, "c1", false)
	var ce *engine.ConflictError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "1 active") {
		t.Fatalf("destroy with an active address: %v, want a conflict naming 1 active", err)
	}
	release("c1", node("n2"))
	// Only cooling addresses and a hold left: the destroy succeeds.
	if err := st.DeleteCluster(ctx, "c1", false); err != nil {
		t.Fatalf("destroy with only cooling addresses and a hold: %v", err)
	}
	got := tombstones(t, raw)
	want := map[string]string{n1.String(): "/n1", n2.String(): "/n2", e1.String(): "/e1", e2.String(): "c1/e2"}
	if len(got) != len(want) {
		t.Fatalf("tombstones %v, want %v (the hold on %s had no cooldown)", got, want, hold.Address)
	}
	for a, w := range want {
		if got[a] != w {
			t.Errorf("tombstone of %s: %q, want %q", a, got[a], w)
		}
	}
	// Listed as cooling, with the pool they left.
	views, err := engine.OperatorOf(st).ListAllocations(ctx, engine.ListFilter{State: engine.StateCooling, ClusterID: "c1"})
	if err != nil || len(views) != 4 {
		t.Fatalf("cooling list after the destroy: %d %v, want the 4 tombstones", len(views), err)
	}
	for _, v := range views {
		if !v.Tombstone || v.State != engine.StateCooling || v.ClusterID != "c1" || v.PoolID == "" || !v.ReusableAt.After(time.Now().Add(-time.Minute)) {
			t.Errorf("listed tombstone: %+v", v)
		}
		// And looked up as the list shows it: cooling, with its last
		// holder, not "in no pool of any cluster".
		infos, err := engine.OperatorOf(st).LookupAddress(ctx, v.Address, "")
		if err != nil || len(infos) != 1 || !infos[0].Tombstone || infos[0].Status != engine.StateCooling ||
			infos[0].PoolID != v.PoolID || infos[0].Owner.ID != v.Owner.ID || !infos[0].ReusableAt.Equal(v.ReusableAt) {
			t.Errorf("lookup of the tombstone %s: %+v %v, want it cooling in %s, last held by %s", v.Address, infos, err, v.PoolID, v.Owner.ID)
		}
		if _, err := engine.OperatorOf(st).LookupAddress(ctx, v.Address, "c2"); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("lookup of the tombstone %s in another cluster: %v, want not_found", v.Address, err)
		}
	}
	var dropped int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_events WHERE type = 'allocation.hold_dropped'
		AND owner_id = 'e3' AND data->>'reason' = 'destroy'`).Scan(&dropped); err != nil || dropped != 1 {
		t.Fatalf("hold_dropped events for e3: %d %v, want 1", dropped, err)
	}

	// The same prefix and blocks at once, under another cluster id: none of
	// the cooling addresses is handed out, the private one excepted (it was
	// c1's).
	mkCluster(t, st, "c9", "2001:db8::/48", "", "")
	pool("c9", "v4", "203.0.113.0/29")
	pool("c9", "p10", "10.0.0.0/29")
	mustCheck(t, st)
	seen := map[netip.Addr]bool{}
	for i := range 4 {
		seen[alloc("c9", "", node("x"+string(rune('a'+i))))] = true
	}
	for i := range 4 {
		seen[alloc("c9", "v4", envOwner("y"+string(rune('a'+i))))] = true
	}
	for _, a := range []netip.Addr{n1, n2, e1} {
		if seen[a] {
			t.Errorf("%s handed out again inside its cooldown", a)
		}
	}
	var private []netip.Addr
	for i := range 6 {
		private = append(private, alloc("c9", "p10", envOwner("z"+string(rune('a'+i)))))
	}
	if !containsAddr(private, e2) {
		t.Errorf("c9's private pool never handed out %s (got %v): c1's tombstone binds c1 only", e2, private)
	}
	mustCheck(t, st)

	// Re-created under its own id, the private pool inherits e2's address:
	// another owner does not get it, e2 gets it back.
	mkCluster(t, st, "c1", "2001:db8:5::/48", "", "")
	if u, err := engine.OperatorOf(st).PoolUsage(ctx, "c1"); err != nil || u.Tombstones.Count != 1 || u.Tombstones.NextReusableAt == nil {
		t.Fatalf("usage of c1 re-created: tombstones %+v %v, want e2's", u.Tombstones, err)
	}
	pool("c1", "p10", "10.0.0.0/29")
	for i := range 5 {
		if a := alloc("c1", "p10", envOwner("w"+string(rune('a'+i)))); a == e2 {
			t.Fatalf("%s handed to another owner inside e2's cooldown", a)
		}
	}
	if a := alloc("c1", "p10", envOwner("e2")); a != e2 {
		t.Errorf("e2 back in c1: %s, want its own cooling address %s", a, e2)
	}
	if len(tombstones(t, raw)) != 0 {
		t.Errorf("tombstones left after every one was inherited: %v", tombstones(t, raw))
	}
	mustCheck(t, st)
}

func containsAddr(as []netip.Addr, a netip.Addr) bool {
	for _, b := range as {
		if a == b {
			return true
		}
	}
	return false
}

// A forced destroy releases its active addresses into their cooldown (with
// events) instead of deleting them: they become tombstones too.
func TestForcedDestroyLeavesTombstones(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/29")}}); err != nil {
		t.Fatal(err)
	}
	a, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeletePool(ctx, "c1/v4", false); err == nil {
		t.Fatal("a pool with an active address destroyed without force")
	}
	if err := st.DeletePool(ctx, "c1/v4", true); err != nil {
		t.Fatal(err)
	}
	if got := tombstones(t, raw); got[a.Address.String()] != "/e1" {
		t.Fatalf("tombstones after a forced destroy: %v, want e1's %s", got, a.Address)
	}
	var released int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_events WHERE owner_id = 'e1' AND data->>'reason' = 'force_destroy'`).Scan(&released); err != nil || released != 1 {
		t.Fatalf("release events of the forced destroy: %d %v", released, err)
	}
	// The same pool at once: its first address stays e1's until it cools.
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/29")}}); err != nil {
		t.Fatal(err)
	}
	b, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e2")})
	if err != nil || b.Address == a.Address {
		t.Fatalf("a new owner in the re-created pool: %v %v, not %s", b.Address, err, a.Address)
	}
	// Once the cooldown has passed, the address is anyone's again.
	if _, err := raw.Exec(ctx, `INSERT INTO ipam_clock (skew) VALUES (interval '2 hours')
		ON CONFLICT (singleton) DO UPDATE SET skew = EXCLUDED.skew`); err != nil {
		t.Fatal(err)
	}
	seen := false
	for i := range 5 {
		c, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("f" + string(rune('a'+i)))})
		if err != nil {
			t.Fatal(err)
		}
		seen = seen || c.Address == a.Address
	}
	if !seen {
		t.Errorf("%s never handed out after its cooldown", a.Address)
	}
	mustCheck(t, st)
}

// An instance address of a node's block, still cooling when its cluster was
// destroyed, stays a tombstone when the cluster is created anew (it lies
// beyond what the instance counter can reach) until the node's block is
// carved again over it: the block inherits it, and no other instance on the
// node gets it.
func TestNodeBlocksInheritTombstones(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(4, 4)); err != nil {
		t.Fatal(err)
	}
	i1 := engine.Owner{Kind: engine.OwnerInstance, ID: "i1", InstanceID: "i1", NodeID: "n1"}
	a, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: i1})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Release(ctx, "c1", i1, 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := st.DeleteCluster(ctx, "c1", false); err != nil {
		t.Fatal(err)
	}
	if got := tombstones(t, raw); got[a.Address.String()] != "/i1" {
		t.Fatalf("tombstones: %v, want i1's %s", got, a.Address)
	}
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(4, 4)); err != nil {
		t.Fatal(err)
	}
	if got := tombstones(t, raw); len(got) != 0 {
		t.Fatalf("tombstones left once the block was carved again: %v", got)
	}
	var pool, state string
	if err := raw.QueryRow(ctx, `SELECT pool_id, state FROM ipam_allocations WHERE address = $1 AND owner_id = 'i1'`,
		a.Address).Scan(&pool, &state); err != nil || pool != engine.NodeBlocksPool("c1", "n1").ID() || state != engine.StateCooling {
		t.Fatalf("i1's address after the block was carved again: %s %s %v, want cooling in n1's blocks", pool, state, err)
	}
	for i := range 8 {
		o := engine.Owner{Kind: engine.OwnerInstance, ID: "j" + string(rune('a'+i)), InstanceID: "j" + string(rune('a'+i)), NodeID: "n1"}
		b, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: o})
		if err != nil {
			t.Fatal(err)
		}
		if b.Address == a.Address {
			t.Fatalf("%s handed to %s inside i1's cooldown", b.Address, o.ID)
		}
	}
	mustCheck(t, st)
}

// The database refuses to hand out an address over a live tombstone that a
// path forgot to inherit, whatever writes it.
func TestSchemaRefusesBuriedAddress(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/29")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, `INSERT INTO ipam_tombstones (address, scope, reusable_at, cluster_id, pool_id,
			allocation_id, generation, owner_kind, owner_id)
		VALUES ('203.0.113.1', '', ipam_now() + interval '1 hour', 'gone', 'gone/v4', gen_random_uuid(), 1, 'env_ipv4', 'e0')`); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{"e9", "e0"} {
		// Neither another owner nor an owner of the same id in another
		// cluster.
		_, err := raw.Exec(ctx, `UPDATE ipam_allocations SET state = 'active', owner_kind = 'env_ipv4', owner_id = $1,
			reusable_at = NULL, cooling_until = NULL WHERE address = '203.0.113.1'`, owner)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.ConstraintName != "ipam_allocations_not_buried" {
			t.Fatalf("a buried address handed out to c1's %s: %v, want check_violation on ipam_allocations_not_buried", owner, err)
		}
	}
	// Its owner in its own cluster may take it back, for its own tenant only.
	if _, err := raw.Exec(ctx, `UPDATE ipam_tombstones SET cluster_id = 'c1', org_id = 'acme' WHERE address = '203.0.113.1'`); err != nil {
		t.Fatal(err)
	}
	_, err := raw.Exec(ctx, `UPDATE ipam_allocations SET state = 'active', owner_kind = 'env_ipv4', owner_id = 'e0', org_id = 'globex',
		reusable_at = NULL, cooling_until = NULL WHERE address = '203.0.113.1'`)
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.ConstraintName != "ipam_allocations_not_buried" {
		t.Fatalf("a buried address handed out to its owner under another org: %v, want check_violation on ipam_allocations_not_buried", err)
	}
	if _, err := raw.Exec(ctx, `UPDATE ipam_allocations SET state = 'active', owner_kind = 'env_ipv4', owner_id = 'e0', org_id = 'acme',
		reusable_at = NULL, cooling_until = NULL WHERE address = '203.0.113.1'`); err != nil {
		t.Fatalf("the tombstone's owner taking its address back: %v", err)
	}
	// check reports a tombstone that a pool covering it did not inherit.
	rep, err := engine.OperatorOf(st).Check(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatal("check passed with a live tombstone inside a pool")
	}
}

// An owner key means something only inside its cluster: env "prod" and
// instance "web-1" of a cluster built over a destroyed cluster's prefix and
// public IPv4 block are not the destroyed cluster's "prod" and "web-1".
// Inside the cooldown they get none of its addresses; the rows the new
// cluster inherits name their former cluster and carry none of the former
// owner's labels, and once the cooldown has passed the addresses are
// anyone's again.
func TestTombstoneOwnerIsScopedByCluster(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	ctx := context.Background()
	v4 := func(cluster string) engine.PoolRef {
		t.Helper()
		if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: cluster, Name: "v4", Cooldown: 720 * time.Hour,
			CIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/30")}}); err != nil {
			t.Fatal(err)
		}
		return engine.OperatorPool(cluster, "v4")
	}
	prod, web := envOwner("prod"), engine.Owner{Kind: engine.OwnerInstance, ID: "web-1", InstanceID: "web-1", OrgID: "acme", EnvID: "prod"}
	mkCluster(t, st, "fra1", "2001:db8::/48", "", "")
	pool := v4("fra1")
	oldIPv4, err := st.Allocate(ctx, engine.AllocateRequest{Pool: pool, Owner: prod})
	if err != nil {
		t.Fatal(err)
	}
	oldWeb, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("fra1"), Owner: web})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []engine.Owner{prod, web} {
		if ok, err := st.Release(ctx, "fra1", o, 0); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	if err := st.DeleteCluster(ctx, "fra1", false); err != nil {
		t.Fatal(err)
	}

	// Another org's cluster on the same prefix and block, with owners of
	// the same names.
	mkCluster(t, st, "ams1", "2001:db8::/48", "", "")
	pool = v4("ams1")
	newIPv4, err := st.Allocate(ctx, engine.AllocateRequest{Pool: pool, Owner: prod})
	if err != nil {
		t.Fatal(err)
	}
	if newIPv4.Address == oldIPv4.Address {
		t.Errorf("ams1's env prod got %s, fra1's prod's public IPv4 inside its 720 h cooldown", newIPv4.Address)
	}
	newWeb, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("ams1"), Owner: web})
	if err != nil {
		t.Fatal(err)
	}
	if newWeb.Address == oldWeb.Address {
		t.Errorf("ams1's instance web-1 got %s, fra1's web-1's address inside its cooldown", newWeb.Address)
	}
	// The inherited row names its former cluster and owner, and lists
	// under no label of this cluster.
	var owner string
	var env *string
	if err := raw.QueryRow(ctx, `SELECT owner_id, env_id FROM ipam_allocations WHERE cluster_id = 'ams1' AND address = $1`,
		oldIPv4.Address).Scan(&owner, &env); err != nil || owner != "fra1/prod" || env != nil {
		t.Errorf("ams1's row of %s: owner %q env %v (%v), want owner \"fra1/prod\" and no env", oldIPv4.Address, owner, env, err)
	}
	if l, err := engine.OperatorOf(st).ListAllocations(ctx, engine.ListFilter{ClusterID: "ams1", EnvID: "prod"}); err != nil {
		t.Fatal(err)
	} else {
		for _, a := range l {
			if a.Address == oldIPv4.Address || a.Address == oldWeb.Address {
				t.Errorf("ams1's env prod lists fra1's %s", a.Address)
			}
		}
	}
	// An operator finds it by the owner it is listed with (ipamctl list
	// --kind env_ipv4 --owner fra1/prod), and ams1's own prod apart.
	for id, want := range map[string]netip.Addr{"fra1/prod": oldIPv4.Address, "prod": newIPv4.Address} {
		l, err := engine.OperatorOf(st).ListAllocations(ctx, engine.ListFilter{ClusterID: "ams1", OwnerKind: prod.Kind, OwnerID: id})
		if err != nil || len(l) != 1 || l[0].Address != want || l[0].Owner.ID != id {
			t.Errorf("ams1's %s of owner %q: %+v (%v), want %s alone", prod.Kind, id, l, err, want)
		}
	}
	for _, id := range []string{"fra1/", "/prod", "fra 1/prod", "fra1/prod/x"} {
		if _, err := engine.OperatorOf(st).ListAllocations(ctx, engine.ListFilter{OwnerKind: prod.Kind, OwnerID: id}); engine.Code(err) != engine.CodeInvalid ||
			!strings.Contains(err.Error(), "owner_id") {
			t.Errorf("owner %q: %v, want invalid_input naming owner_id", id, err)
		}
	}
	mustCheck(t, st)
	// The database refuses it too, whatever path forgets: a tombstone of
	// fra1 over an address no pool has inherited binds ams1's prod.
	if _, err := raw.Exec(ctx, `INSERT INTO ipam_tombstones (address, scope, reusable_at, cluster_id, pool_id,
			allocation_id, generation, owner_kind, owner_id)
		VALUES ('2001:db8::ffff', '', ipam_now() + interval '1 hour', 'fra1', 'fra1/node', gen_random_uuid(), 1, 'node', 'n7')`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("ams1"), Owner: node("n7"),
		Address: netip.MustParseAddr("2001:db8::ffff")}); err == nil {
		t.Error("ams1's node n7 claimed fra1's n7's tombstoned address")
	}
}

// A database that another cluster's pool inherited a tombstone into before
// owners were scoped by cluster is mended by the upgrade: the row's owner
// becomes "<former cluster>/<owner>" without labels. The test goes down to
// the version before and up again, so the down migration runs too.
func TestUpgradeScopesInheritedTombstones(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	ctx := context.Background()
	m, err := migrate.NewMigrator(ctx, raw, engine.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		t.Fatal(err)
	}
	// Allocated and released at the current version (the hand-out needs
	// what later migrations add); the cluster's destroy runs at version 18.
	mkCluster(t, st, "fra1", "2001:db8::/48", "", "")
	a, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("fra1"), Owner: instance("web-1")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Release(ctx, "fra1", instance("web-1"), 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := m.MigrateTo(ctx, 18); err != nil {
		t.Fatal(err)
	}
	// This build's burial and inheritance write and read the tombstone's
	// allocated_at (migration 37): the column lives for them, then goes,
	// as version 18 had none.
	if _, err := raw.Exec(ctx, `ALTER TABLE ipam_tombstones ADD COLUMN allocated_at timestamptz`); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteCluster(ctx, "fra1", false); err != nil {
		t.Fatal(err)
	}
	mkCluster(t, st, "ams1", "2001:db8::/48", "", "")
	if _, err := raw.Exec(ctx, `ALTER TABLE ipam_tombstones DROP COLUMN allocated_at`); err != nil {
		t.Fatal(err)
	}
	// What the version before left: the former owner's key and labels.
	if _, err := raw.Exec(ctx, `UPDATE ipam_allocations SET owner_id = 'web-1', instance_id = 'web-1', env_id = 'env'
		WHERE cluster_id = 'ams1' AND address = $1`, a.Address); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var owner string
	var inst *string
	if err := raw.QueryRow(ctx, `SELECT owner_id, instance_id FROM ipam_allocations WHERE cluster_id = 'ams1' AND address = $1`,
		a.Address).Scan(&owner, &inst); err != nil || owner != "fra1/web-1" || inst != nil {
		t.Fatalf("after the upgrade: owner %q instance %v (%v), want \"fra1/web-1\" without labels", owner, inst, err)
	}
	if b, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("ams1"), Owner: instance("web-1")}); err != nil || b.Address == a.Address {
		t.Fatalf("ams1's web-1 after the upgrade: %v %v, not fra1's %s", b.Address, err, a.Address)
	}
}

// The upgrade to generations that never repeat (migration 34) starts them
// past every generation the database records, so that no state written
// before names a later hand-out, and gives the roles that may write the
// allocations (a runtime role) what a hand-out now needs. The test goes
// down to the version before and up again, so the down migration runs too.
func TestUpgradeStartsGenerationsPastTheRecordedOnes(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	a, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: instance("i1")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewMigrator(ctx, raw, engine.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, 33); err != nil {
		t.Fatal(err)
	}
	// What the version before may have left: a row handed out 41 times.
	if _, err := raw.Exec(ctx, `UPDATE ipam_allocations SET generation = 41 WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("ipam_gen_%d", time.Now().UnixNano())
	if _, err := raw.Exec(ctx, "CREATE ROLE "+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = raw.Exec(ctx, "DROP OWNED BY "+role)
		_, _ = raw.Exec(ctx, "DROP ROLE "+role)
	})
	if _, err := raw.Exec(ctx, "GRANT SELECT, INSERT, UPDATE, DELETE ON ipam_allocations TO "+role); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var usage bool
	if err := raw.QueryRow(ctx, `SELECT has_sequence_privilege($1, 'ipam_generations', 'USAGE')`, role).Scan(&usage); err != nil || !usage {
		t.Errorf("the role that may write allocations may not take a generation after the upgrade (%v)", err)
	}
	b, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: instance("i2")})
	if err != nil || b.Generation <= 41 {
		t.Fatalf("an allocation after the upgrade: generation %d (%v), want past 41", b.Generation, err)
	}
	if ok, err := st.Release(ctx, "c1", instance("i1"), 41); err != nil || !ok {
		t.Fatalf("the release of the allocation made before, at its generation: %v %v", ok, err)
	}
}

// An address left cooling by a destroyed pool keeps when it was handed out:
// listed and looked up as a tombstone, and inherited by a pool created over
// it, its AllocatedAt is its allocation's, not its release's (schema
// migration 37; before it a tombstone had none, and the inherited row took
// the release's time).
func TestInheritedCoolingAddressKeepsItsHandOutTime(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	ctx := context.Background()
	op := engine.OperatorOf(st)
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	pool := func() {
		t.Helper()
		if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
			CIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/29")}}); err != nil {
			t.Fatal(err)
		}
	}
	pool()
	a, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e1")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Release(ctx, "c1", envOwner("e1"), 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	cooling := func(what string, tomb bool) engine.AllocationView {
		t.Helper()
		views, err := op.ListAllocations(ctx, engine.ListFilter{ClusterID: "c1", OwnerKind: engine.OwnerEnvIPv4, OwnerID: "e1"})
		if err != nil || len(views) != 1 || views[0].State != engine.StateCooling || views[0].Tombstone != tomb || views[0].Address != a.Address {
			t.Fatalf("%s: e1's listing %+v %v, want %s cooling (a tombstone: %t)", what, views, err, a.Address, tomb)
		}
		v := views[0]
		if !v.AllocatedAt.Equal(a.AllocatedAt) || v.ReleasedAt.IsZero() || !v.ReleasedAt.After(a.AllocatedAt) {
			t.Errorf("%s: allocated at %v, released at %v; want allocated at %v (the hand-out), released after it",
				what, v.AllocatedAt, v.ReleasedAt, a.AllocatedAt)
		}
		infos, err := op.LookupAddress(ctx, a.Address, "c1")
		if err != nil || len(infos) != 1 || !infos[0].AllocatedAt.Equal(a.AllocatedAt) || !infos[0].ReleasedAt.Equal(v.ReleasedAt) {
			t.Errorf("%s: lookup %+v %v, want allocated at %v and released at %v, as listed", what, infos, err, a.AllocatedAt, v.ReleasedAt)
		}
		return v
	}
	released := cooling("released", false).ReleasedAt
	if err := st.DeletePool(ctx, "c1/v4", false); err != nil {
		t.Fatal(err)
	}
	if v := cooling("its pool destroyed", true); !v.ReleasedAt.Equal(released) {
		t.Errorf("the tombstone's release %v, want %v", v.ReleasedAt, released)
	}
	pool()
	if v := cooling("inherited by the pool created again", false); !v.ReleasedAt.Equal(released) {
		t.Errorf("the inherited row's release %v, want %v", v.ReleasedAt, released)
	}
	mustCheck(t, st)
}
