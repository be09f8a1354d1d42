package ipam_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
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
	refused("an active row inserted outside its pool", "ipam_allocations_in_pool",
		`INSERT INTO ipam_allocations (id, cluster_id, pool_id, address, ordinal, state, owner_kind, owner_id)
			VALUES (gen_random_uuid(), 'c1', 'c1/v4', '192.0.2.7/32', 99, 'active', 'env_ipv4', 'e9')`)
	refused("an active row inserted in the block the pool gave up", "ipam_allocations_in_pool",
		`INSERT INTO ipam_allocations (id, cluster_id, pool_id, address, ordinal, state, owner_kind, owner_id)
			VALUES (gen_random_uuid(), 'c1', 'c1/v4', '203.0.113.2/32', 99, 'active', 'env_ipv4', 'e9')`)
	allowed("a free row inside its pool handed out",
		`UPDATE ipam_allocations SET state = 'active', owner_kind = 'env_ipv4', owner_id = 'e9', reusable_at = NULL, cooling_until = NULL
			WHERE address = '198.51.100.6' AND state = 'free'`)
}
