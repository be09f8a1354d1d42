package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// roundTrips counts what a pool sends its server: each batch (one round
// trip, one implicit transaction) and each query outside a batch.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A Terraform create of a new address costs three round trips, each its
// own transaction: the plan's hold (the look for a hold and the take of a
// new one go together), the apply's re-plan finding that hold again, and
// the create confirming it. The first refresh after it reads the allocation
// and records that the state holds it in one more. Another, anywhere, fails
// the test.
func TestPlanAndApplyOfANewAddressAreThreeRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, pool, sent := countedClient(t)
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	for _, req := range []engine.AllocateRequest{
		{Pool: engine.ClusterPools("c1"), Owner: instance("i1")},
		{Pool: engine.NodePool("c1"), Owner: node("n1")},
	} {
		step := func(what string, f func() error) {
			t.Helper()
			before := sent.n.Load()
			if err := f(); err != nil {
				t.Fatalf("%s %s: %v", req.Owner.Kind, what, err)
			}
			if n := sent.n.Load() - before; n != 1 {
				t.Errorf("%s %s: %d round trips, want 1", req.Owner.Kind, what, n)
			}
		}
		var planned engine.Hold
		step("plan: the hold", func() (err error) { planned, err = st.Reserve(ctx, req, time.Hour); return err })
		step("apply: the re-plan", func() error {
			again, err := st.Reserve(ctx, req, time.Hour)
			if err == nil && again.ID != planned.ID {
				t.Errorf("%s re-plan: hold %s, want the plan's %s", req.Owner.Kind, again.Address, planned.Address)
			}
			return err
		})
		step("apply: the create", func() error {
			confirm := req
			confirm.Address = planned.Address
			a, err := st.Allocate(ctx, confirm)
			if err == nil && (a.ID != planned.ID || a.State != engine.StateActive) {
				t.Errorf("%s create: %s %s, want the hold %s made active", req.Owner.Kind, a.Address, a.State, planned.Address)
			}
			return err
		})
		step("refresh: the first read, which confirms", func() error {
			a, err := st.GetActive(ctx, "c1", req.Owner.Kind, req.Owner.ID)
			if err == nil && a.Address != planned.Address {
				t.Errorf("%s refresh: %s, want %s", req.Owner.Kind, a.Address, planned.Address)
			}
			return err
		})
		var confirmed bool
		if err := pool.QueryRow(ctx, `SELECT confirmed_at IS NOT NULL AND last_seen_at IS NOT NULL FROM ipam_allocations
			WHERE cluster_id = 'c1' AND owner_kind = $1 AND owner_id = $2 AND state = 'active'`, req.Owner.Kind, req.Owner.ID).Scan(&confirmed); err != nil {
			t.Fatal(err)
		}
		if !confirmed {
			t.Errorf("%s refresh: the allocation is not confirmed", req.Owner.Kind)
		}
	}
}

// countedClient is a client of a new database whose pool counts the round
// trips it sends.
func countedClient(t *testing.T) (*engine.Client, *pgxpool.Pool, *roundTrips) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	sent := &roundTrips{}
	cfg.ConnConfig.Tracer = sent
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := engine.New(pool, engine.Config{Origin: "/work/config"})
	if err != nil {
		t.Fatal(err)
	}
	return st, pool, sent
}

// The first refresh of an address set reads its members, their blocks and
// records that its state holds them in one round trip.
func TestSetRefreshIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, pool, sent := countedClient(t)
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	owner := engine.Owner{ID: "vm-1", OrgID: "acme", InstanceID: "vm-1"}
	if _, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: owner, Add: []engine.SetEntry{
		{Key: "a", Family: 6}, {Key: "b", Family: 6}, {Key: "c", Family: 6},
	}}); err != nil {
		t.Fatal(err)
	}
	before := sent.n.Load()
	members, err := st.GetSet(ctx, "c1", "vm-1")
	if err != nil {
		t.Fatal(err)
	}
	if n := sent.n.Load() - before; n != 1 {
		t.Errorf("set refresh: %d round trips, want 1", n)
	}
	for _, m := range members {
		if !m.Block.IsValid() || !m.Block.Contains(m.Address) {
			t.Errorf("member %s: %s in block %s", m.Key, m.Address, m.Block)
		}
	}
	var unconfirmed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE set_owner = 'vm-1' AND state = 'active'
		AND (confirmed_at IS NULL OR last_seen_at IS NULL)`).Scan(&unconfirmed); err != nil {
		t.Fatal(err)
	}
	if len(members) != 3 || unconfirmed != 0 {
		t.Errorf("set refresh: %d members, %d of them unconfirmed; want 3 and 0", len(members), unconfirmed)
	}
}

// A release (a Terraform destroy, the scheduler's ReleaseInstance) costs one
// round trip: the release and its event in one statement, after the
// store's bounds, in one implicit transaction. Inside a caller's
// transaction it is one batch too, the savepoint's that an allocation there
// uses. Its event names the allocation as it was released, the releasing
// manager as its actor, and the reusable time; a release of what is not
// held (of a generation that moved on) is one round trip too, and writes
// nothing.
func TestReleaseIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, pool, sent := countedClient(t)
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	sched, err := engine.New(pool, engine.Config{Actor: "scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	step := func(what string, want int64, f func() (bool, error), released bool) {
		t.Helper()
		before := sent.n.Load()
		ok, err := f()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n := sent.n.Load() - before; n != want {
			t.Errorf("%s: %d round trips, want %d", what, n, want)
		}
		if ok != released {
			t.Errorf("%s: released %v, want %v", what, ok, released)
		}
	}
	event := func(what string, a engine.Allocation, actor string) {
		t.Helper()
		var typ, gotActor, owner, org string
		var gen int64
		var at, releasedAt time.Time
		var data, reusableAt *time.Time
		if err := pool.QueryRow(ctx, `SELECT e.type, e.actor, e.owner_id, coalesce(e.org_id, ''), e.generation,
				(e.data->>'reusable_at')::timestamptz, e.at, a.released_at, a.reusable_at
			FROM ipam_events e JOIN ipam_allocations a ON a.id = e.allocation_id
			WHERE e.allocation_id = $1 AND e.type LIKE '%.released'`, a.ID).Scan(&typ, &gotActor, &owner, &org, &gen, &data,
			&at, &releasedAt, &reusableAt); err != nil {
			t.Fatalf("%s: its event: %v", what, err)
		}
		if typ != "instance.released" || gotActor != actor || owner != a.Owner.ID || org != a.Owner.OrgID || gen != a.Generation ||
			!at.Equal(releasedAt) || data == nil || reusableAt == nil || !data.Equal(*reusableAt) {
			t.Errorf("%s: event %s by %s of %s (org %q, generation %d) at %s, reusable %v; want instance.released by %s of %s "+
				"(org %q, generation %d) at %s, reusable %v", what, typ, gotActor, owner, org, gen, at, data,
				actor, a.Owner.ID, a.Owner.OrgID, a.Generation, releasedAt, reusableAt)
		}
	}
	alloc := func(c *engine.Client, id string) engine.Allocation {
		t.Helper()
		o := instance(id)
		o.OrgID = "acme"
		a, err := c.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: o})
		if err != nil {
			t.Fatal(err)
		}
		return a.Allocation
	}

	// Terraform's destroy names the generation; another manager may release
	// with it, and is the event's actor.
	a := alloc(st, "i1")
	step("release with the generation", 1, func() (bool, error) { return sched.Release(ctx, "c1", a.Owner, a.Generation) }, true)
	event("release with the generation", a, "scheduler")
	step("release of a generation that moved on", 1, func() (bool, error) { return st.Release(ctx, "c1", a.Owner, a.Generation) }, false)

	// The scheduler's own release names none.
	b := alloc(sched, "i2")
	step("release without a generation", 1, func() (bool, error) { return true, sched.ReleaseInstance(ctx, nil, "c1", "i2") }, true)
	event("release without a generation", b, "scheduler")

	// In the caller's transaction: one statement.
	c := alloc(sched, "i3")
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	step("release in a caller's transaction", 1, func() (bool, error) { return true, sched.ReleaseInstance(ctx, tx, "c1", "i3") }, true)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	event("release in a caller's transaction", c, "scheduler")
}
