package engine_test

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// TestSchemaInvariants writes past the core, as a statement that forgot
// its checks would, and expects the database itself to refuse: every
// invariant of migration 12 holds whatever path writes.
func TestSchemaInvariants(t *testing.T) {
	t.Parallel()
	e := newExploreEnv(t)
	fixtureV4(true, true).setup(e) // e0 active in 198.51.100.0/29, e1's expired hold on 203.0.113.1

	refused := func(name, constraint, sql string) {
		t.Helper()
		_, err := e.raw.Exec(e.ctx, sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23514" || pe.ConstraintName != constraint {
			t.Errorf("%s: %v, want check_violation on %s", name, err, constraint)
		}
	}
	allowed := func(name, sql string) {
		t.Helper()
		if _, err := e.raw.Exec(e.ctx, sql); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	// The pool side: no shape change or delete may leave an active row out.
	refused("a shrink leaving e0's active address out", "ipam_pools_keep_live_rows",
		`UPDATE ipam_pools SET cidrs = '{203.0.113.0/29}' WHERE id = 'c1/v4'`)
	refused("an exclusion over e0's active address", "ipam_pools_keep_live_rows",
		`UPDATE ipam_pools SET exclude = '{198.51.100.0/30}' WHERE id = 'c1/v4'`)
	refused("a pool delete under e0's active address", "ipam_pools_keep_live_rows",
		`DELETE FROM ipam_pools WHERE id = 'c1/v4'`)
	refused("a cluster delete under e0's active address", "ipam_pools_keep_live_rows",
		`DELETE FROM ipam_clusters WHERE id = 'c1'`)

	// An expired hold is not live: the shrink may go (the core deletes the
	// row; here it stays behind, as a forgetful writer would leave it).
	allowed("a shrink leaving only an expired hold out",
		`UPDATE ipam_pools SET cidrs = '{198.51.100.0/29}' WHERE id = 'c1/v4'`)

	// The row side: nothing enters 'active' or 'reserved' outside its pool.
	refused("an expired hold outside its pool confirmed", "ipam_allocations_in_pool",
		`UPDATE ipam_allocations SET state = 'active', reserved_until = NULL, reusable_at = NULL, cooling_until = NULL
			WHERE owner_id = 'e1'`)
	refused("an expired hold outside its pool extended", "ipam_allocations_in_pool",
		`UPDATE ipam_allocations SET reserved_until = ipam_now() + interval '1 hour', reusable_at = ipam_now() + interval '1 hour'
			WHERE owner_id = 'e1'`)
	refused("a free row the pool gave up handed out", "ipam_allocations_in_pool",
		`UPDATE ipam_allocations SET state = 'active', owner_kind = 'env_ipv4', owner_id = 'e8', reusable_at = NULL, cooling_until = NULL
			WHERE address = '203.0.113.2' AND state = 'free'`)
	refused("an active row inserted outside its pool", "ipam_allocations_in_pool",
		`INSERT INTO ipam_allocations (id, cluster_id, pool_id, address, ordinal, state, owner_kind, owner_id)
			VALUES (gen_random_uuid(), 'c1', 'c1/v4', '192.0.2.7/32', 99, 'active', 'env_ipv4', 'e9')`)
	refused("an active row inserted in the block the pool gave up", "ipam_allocations_in_pool",
		`INSERT INTO ipam_allocations (id, cluster_id, pool_id, address, ordinal, state, owner_kind, owner_id)
			VALUES (gen_random_uuid(), 'c1', 'c1/v4', '203.0.113.2/32', 99, 'active', 'env_ipv4', 'e9')`)
	// Nothing deletes a row active, held or inside its cooldown, but with
	// its pool.
	refused("an active row deleted", "ipam_allocations_keep_cooldown",
		`DELETE FROM ipam_allocations WHERE owner_id = 'e0'`)
	allowed("e0 released", `UPDATE ipam_allocations SET state = 'cooling', released_at = ipam_now(),
		reusable_at = ipam_now() + interval '1 hour', cooling_until = ipam_now() + interval '1 hour' WHERE owner_id = 'e0'`)
	refused("a cooling row deleted", "ipam_allocations_keep_cooldown",
		`DELETE FROM ipam_allocations WHERE owner_id = 'e0'`)
	allowed("an expired hold with no cooldown deleted", `DELETE FROM ipam_allocations WHERE owner_id = 'e1'`)
	allowed("a free row inside its pool handed out",
		`UPDATE ipam_allocations SET state = 'active', owner_kind = 'env_ipv4', owner_id = 'e9', reusable_at = NULL, cooling_until = NULL
			WHERE address = '198.51.100.6' AND state = 'free'`)
}

// The core's private IPv4 space (judged at plan) is the schema's (judged by
// the constraints of migration 13): one definition, checked.
func TestPrivateIPv4MatchesSchema(t *testing.T) {
	t.Parallel()
	e := newExploreEnv(t)
	var schema []netip.Prefix
	if err := e.raw.QueryRow(e.ctx, `SELECT ipam_private_ipv4()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(schema, engine.PrivateIPv4) {
		t.Fatalf("the schema's private IPv4 space %v is not the core's %v", schema, engine.PrivateIPv4)
	}
}

// Seam: a public IPv4 block that holds private space (10.0.0.0/7 holds
// 10.0.0.0/8 and the public 11.0.0.0/8) was judged public as a whole, so
// another cluster's private pool could overlap it, and 10.0.0.1 could be
// active in both clusters with ipamctl check forgiving it as private. A
// block is now wholly public or wholly private, at plan and in the schema.
func TestSeamPublicBlockHoldingPrivateSpace(t *testing.T) {
	t.Parallel()
	e := newExploreEnv(t)
	e.cluster("a", "2001:db8:a::/48")
	e.cluster("b", "2001:db8:b::/48")
	if _, err := e.st.CreatePool(e.ctx, engine.Pool{ClusterID: "a", Name: "priv", CIDRs: []netip.Prefix{pfx("10.0.0.0/24")}}); err != nil {
		t.Fatal(err)
	}
	for _, mixed := range []string{"10.0.0.0/7", "100.0.0.0/8", "172.0.0.0/8", "192.168.0.0/15", "0.0.0.0/0"} {
		_, err := e.st.CreatePool(e.ctx, engine.Pool{ClusterID: "b", Name: "pub", CIDRs: []netip.Prefix{pfx(mixed)}})
		var inv *engine.InvalidError
		if !errors.As(err, &inv) || inv.Field != "cidrs" || !strings.Contains(err.Error(), "mixes public and private") {
			t.Errorf("pool %s: %v, want invalid_input on cidrs naming the mix", mixed, err)
		}
	}
	// Wholly public and wholly private blocks are fine, a private one in
	// several clusters too.
	for _, ok := range []string{"11.0.0.0/24", "10.0.0.0/24"} {
		if _, err := e.st.CreatePool(e.ctx, engine.Pool{ClusterID: "b", Name: "p" + strings.NewReplacer(".", "-", "/", "-").Replace(ok),
			CIDRs: []netip.Prefix{pfx(ok)}}); err != nil {
			t.Errorf("pool %s: %v", ok, err)
		}
	}
	// The schema refuses it whatever statement writes.
	_, err := e.raw.Exec(e.ctx, `UPDATE ipam_pools SET cidrs = '{10.0.0.0/7}' WHERE id = 'b/p11-0-0-0-24'`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.ConstraintName != "ipam_pools_blocks_unmixed" {
		t.Errorf("a mixed block written past the core: %v, want check_violation on ipam_pools_blocks_unmixed", err)
	}
	// And keeps every public block under the exclusion between clusters.
	_, err = e.raw.Exec(e.ctx, `UPDATE ipam_pools SET cidrs = '{11.0.0.0/25}' WHERE id = 'a/priv'`)
	if !errors.As(err, &pe) || pe.ConstraintName != "ipam_pool_blocks_no_overlap" {
		t.Errorf("a public block over another cluster's, written past the core: %v, want the exclusion violation", err)
	}
	// A mixed block made before the rule (the constraint is NOT VALID, so
	// old rows stay): Check reports it.
	e.exec(`ALTER TABLE ipam_pools DROP CONSTRAINT ipam_pools_blocks_unmixed`)
	e.exec(`ALTER TABLE ipam_pool_blocks DROP CONSTRAINT ipam_pool_blocks_public`)
	e.exec(`UPDATE ipam_pools SET cidrs = '{10.0.0.0/7}' WHERE id = 'b/p11-0-0-0-24'`)
	rep, err := engine.OperatorOf(e.st).Check(e.ctx, "")
	if err != nil || rep.Counts[engine.InvariantUniqueAddress] != 1 || !strings.Contains(rep.Violations[0].Detail, "10.0.0.0/7 mixes public and private") {
		t.Errorf("a legacy mixed block: %v %v", err, rep.Counts)
	}
}

// Seam: Check read duplicates with a limit and forgave the private ones
// afterwards, so 101 private IPv4 addresses reused by two clusters (which is
// fine) hid every real duplicate behind them. Every violation is now
// counted, and only the listing is cut.
func TestCheckCountsEveryDuplicate(t *testing.T) {
	t.Parallel()
	e := newExploreEnv(t)
	for _, c := range []struct{ id, prefix string }{{"a", "2001:db8:a::/48"}, {"b", "2001:db8:b::/48"}} {
		e.cluster(c.id, c.prefix)
		if _, err := e.st.CreatePool(e.ctx, engine.Pool{ClusterID: c.id, Name: "priv", CIDRs: []netip.Prefix{pfx("10.0.0.0/25")}}); err != nil {
			t.Fatal(err)
		}
		for i := range 101 {
			if _, err := e.st.Allocate(e.ctx, engine.AllocateRequest{Pool: engine.OperatorPool(c.id, "priv"), Owner: envOwner(fmt.Sprint("e", i))}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.st.Allocate(e.ctx, engine.AllocateRequest{Pool: engine.NodePool(c.id), Owner: engine.Owner{Kind: engine.OwnerNode, ID: "n1", NodeID: "n1"}}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := engine.OperatorOf(e.st).Check(e.ctx, "")
	if err != nil || !rep.OK() {
		t.Fatalf("101 private addresses in two clusters: %v %+v", err, rep.Violations)
	}
	// Cluster b's node takes cluster a's node address, past every guard.
	e.exec(`ALTER TABLE ipam_allocations DISABLE TRIGGER ipam_allocations_in_pool_update`)
	e.exec(`UPDATE ipam_allocations SET address = (SELECT address FROM ipam_allocations WHERE cluster_id = 'a' AND owner_id = 'n1')
		WHERE cluster_id = 'b' AND owner_id = 'n1'`)
	if rep, err = engine.OperatorOf(e.st).Check(e.ctx, ""); err != nil {
		t.Fatal(err)
	}
	if rep.Counts[engine.InvariantUniqueAddress] != 1 || rep.Total() < 1 {
		t.Fatalf("an IPv6 address active in two clusters behind 101 private ones: counts %v, violations %+v", rep.Counts, rep.Violations)
	}
}
