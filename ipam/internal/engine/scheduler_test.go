package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// scheduler is a caller with its own table, pool and IPAM client, over a
// database of its own.
type scheduler struct {
	t      *testing.T
	db     *pgxpool.Pool
	client *engine.Client
}

func newScheduler(t *testing.T, instancePrefix string) *scheduler {
	t.Helper()
	return newSchedulerOver(t, instancePrefix, testdb.New(t), nil)
}

// newSchedulerOver is newScheduler over the database at url, with its pool
// set up by configure (nil: pgx's defaults).
func newSchedulerOver(t *testing.T, instancePrefix, url string, configure func(*pgxpool.Config)) *scheduler {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(cfg)
	}
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	client, err := engine.New(db, engine.Config{Actor: "scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c := engine.Cluster{ID: "c1", Prefix: netip.MustParsePrefix("2001:db8:5::/48")}
	if instancePrefix != "" {
		c.InstancePrefix = netip.MustParsePrefix(instancePrefix)
	}
	if _, err := client.CreateCluster(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `CREATE TABLE placements (instance_id text PRIMARY KEY, overlay inet)`); err != nil {
		t.Fatal(err)
	}
	return &scheduler{t: t, db: db, client: client}
}

func (s *scheduler) begin() pgx.Tx {
	s.t.Helper()
	tx, err := s.db.BeginTx(context.Background(), pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

func (s *scheduler) count(sql string, args ...any) int {
	s.t.Helper()
	var n int
	if err := s.db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// place allocates an instance's address in tx and writes the caller's
// placement row beside it.
func (s *scheduler) place(tx pgx.Tx, id string) engine.InstanceAddress {
	s.t.Helper()
	ctx := context.Background()
	a, err := s.client.AllocateInstance(ctx, tx, instanceRequest(id))
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO placements VALUES ($1, $2)`, id, a.Prefix); err != nil {
		s.t.Fatal(err)
	}
	return a
}

func instanceRequest(id string) engine.InstanceRequest {
	return engine.InstanceRequest{ClusterID: "c1", InstanceID: id, OrgID: "acme", EnvID: "prod", NodeID: "n1"}
}

// AllocateInstance in the caller's transaction: a commit keeps the caller's
// row, the allocation and its instance.allocated event; a rollback leaves no
// allocation and no event, and the address goes back (the placement tried
// again gets it); an
// exhausted pool is ErrExhausted, recorded outside the aborted transaction.
func TestAllocateInstanceInCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("commit", func(t *testing.T) {
		t.Parallel()
		s := newScheduler(t, "")
		tx := s.begin()
		a := s.place(tx, "web-1")
		// Nothing is visible outside the transaction before it commits.
		if n := s.count(`SELECT count(*) FROM ipam_allocations WHERE owner_id = 'web-1'`); n != 0 {
			t.Fatalf("allocation visible before commit: %d rows", n)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if !netip.MustParsePrefix("2001:db8:5:1::/64").Contains(a.Address) || a.Prefix.Bits() != 128 || a.MTU != 1420 ||
			a.GatewayIPv6 != netip.MustParseAddr("fe80::1") {
			t.Fatalf("instance address %+v", a)
		}
		if n := s.count(`SELECT count(*) FROM ipam_allocations WHERE owner_id = 'web-1' AND state = 'active' AND address = $1`, a.Prefix); n != 1 {
			t.Fatalf("%d active allocations after commit, want 1", n)
		}
		if n := s.count(`SELECT count(*) FROM ipam_events WHERE type = 'instance.allocated' AND instance_id = 'web-1' AND actor = 'scheduler'`); n != 1 {
			t.Fatalf("%d instance.allocated events, want 1", n)
		}
		if n := s.count(`SELECT count(*) FROM placements`); n != 1 {
			t.Fatalf("%d placement rows, want 1", n)
		}
	})
	t.Run("rollback", func(t *testing.T) {
		t.Parallel()
		s := newScheduler(t, "")
		tx := s.begin()
		a := s.place(tx, "web-1")
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if n := s.count(`SELECT count(*) FROM ipam_allocations WHERE owner_id = 'web-1'`); n != 0 {
			t.Fatalf("%d allocations after rollback, want 0", n)
		}
		if n := s.count(`SELECT count(*) FROM ipam_events WHERE instance_id = 'web-1'`); n != 0 {
			t.Fatalf("%d events after rollback, want 0", n)
		}
		if n := s.count(`SELECT count(*) FROM placements`); n != 0 {
			t.Fatalf("%d placement rows after rollback, want 0", n)
		}
		// The address went back: the placement tried again (its owner
		// starts on the same stripe) gets it.
		tx = s.begin()
		b := s.place(tx, "web-1")
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if b.Address != a.Address {
			t.Fatalf("after the rollback the placement tried again got %s, want the free %s", b.Address, a.Address)
		}
	})
	t.Run("every address through the one statement", func(t *testing.T) {
		// Placements start at their owner's stripe and wrap round to the
		// stripes below it: a small pool fills to its last address with no
		// placement falling back to the full path (a pick that did not wrap
		// would fail silently into it).
		t.Parallel()
		s := newScheduler(t, "2001:db8:5:1::/122") // ::1 to ::3f
		seen := map[netip.Addr]string{}
		for i := range 63 {
			id := fmt.Sprintf("w%d", i)
			tx := s.begin()
			a := s.place(tx, id)
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if other, dup := seen[a.Address]; dup {
				t.Fatalf("%s got %s, already %s's", id, a.Address, other)
			}
			seen[a.Address] = id
		}
		if n := s.client.FullPathRuns(); n != 0 {
			t.Fatalf("%d placements took the full path, want none", n)
		}
		tx := s.begin()
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := s.client.AllocateInstance(ctx, tx, instanceRequest("w63")); !errors.Is(err, engine.ErrExhausted) {
			t.Fatalf("a placement in the full pool: %v, want ErrExhausted", err)
		}
	})
	t.Run("exhausted", func(t *testing.T) {
		t.Parallel()
		s := newScheduler(t, "2001:db8:5:1::/126") // ::1 to ::3
		for _, id := range []string{"a", "b", "c"} {
			if _, err := s.client.AllocateInstance(ctx, nil, instanceRequest(id)); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
		tx := s.begin()
		if _, err := tx.Exec(ctx, `INSERT INTO placements VALUES ('d', NULL)`); err != nil {
			t.Fatal(err)
		}
		_, err := s.client.AllocateInstance(ctx, tx, instanceRequest("d"))
		if !errors.Is(err, engine.ErrExhausted) || engine.Code(err) != "ipam_exhausted" {
			t.Fatalf("allocation from a full prefix: %v (code %q), want ErrExhausted", err, engine.Code(err))
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if n := s.count(`SELECT count(*) FROM ipam_allocation_failures WHERE reason = 'ipam_exhausted' AND owner_id = 'd'`); n != 1 {
			t.Fatalf("%d recorded failures, want 1", n)
		}
		if n := s.count(`SELECT count(*) FROM ipam_events WHERE type = 'instance.allocation_failed' AND instance_id = 'd'
				AND data->>'reason' = 'ipam_exhausted' AND org_id = 'acme' AND env_id = 'prod'`); n != 1 {
			t.Fatalf("%d instance.allocation_failed events, want 1", n)
		}
		if n := s.count(`SELECT count(*) FROM placements`); n != 0 {
			t.Fatalf("%d placement rows, want 0", n)
		}
	})
	t.Run("a refusal keeps the caller's transaction usable", func(t *testing.T) {
		t.Parallel()
		s := newScheduler(t, "")
		if _, err := s.client.AllocateInstance(ctx, nil, instanceRequest("web-1")); err != nil {
			t.Fatal(err)
		}
		tx := s.begin()
		req := instanceRequest("web-2")
		req.Address = netip.MustParseAddr("2001:db8:5:1::1") // web-1's
		_, err := s.client.AllocateInstance(ctx, tx, req)
		if !errors.Is(err, engine.ErrAddressTaken) {
			t.Fatalf("claiming web-1's address: %v, want ErrAddressTaken", err)
		}
		bad := instanceRequest("web-3")
		bad.ClusterID = "no such cluster"
		if _, err := s.client.AllocateInstance(ctx, tx, bad); !errors.Is(err, engine.ErrInvalid) && !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("unknown cluster: %v, want ErrInvalid or ErrNotFound", err)
		}
		a, err := s.client.AllocateInstance(ctx, tx, instanceRequest("web-2"))
		if err != nil {
			t.Fatalf("the transaction is unusable after a refusal: %v", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO placements VALUES ('web-2', $1)`, a.Prefix); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if n := s.count(`SELECT count(*) FROM ipam_allocations WHERE state = 'active'`); n != 2 {
			t.Fatalf("%d active allocations, want 2", n)
		}
	})
	t.Run("isolation other than read committed, read only, or a query mode without descriptions is refused", func(t *testing.T) {
		t.Parallel()
		s := newScheduler(t, "")
		tx, err := s.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := s.client.AllocateInstance(ctx, tx, instanceRequest("web-1")); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("serializable transaction: %v, want ErrInvalid", err)
		}
		// A READ ONLY transaction is the caller's choice, not a standby:
		// invalid_input on tx, not ipam_unavailable.
		ro, err := s.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ro.Rollback(ctx) }()
		if _, err := s.client.AllocateInstance(ctx, ro, instanceRequest("web-1")); !errors.Is(err, engine.ErrInvalid) ||
			!strings.Contains(err.Error(), "READ ONLY") {
			t.Fatalf("read-only transaction: %v, want ErrInvalid naming READ ONLY", err)
		}
		if err := s.client.ReleaseInstance(ctx, ro, "c1", "web-1"); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("release in a read-only transaction: %v, want ErrInvalid", err)
		}
		// A transaction on a connection whose query mode never has the
		// server describe a statement is refused as engine.New refuses such
		// a pool, not as the request's "input" that "does not fit its type".
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
			cfg := s.db.Config().Copy()
			cfg.ConnConfig.DefaultQueryExecMode = mode
			other, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			tx, err := other.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = s.client.AllocateInstance(ctx, tx, instanceRequest("web-1"))
			if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "tx: default_query_exec_mode=") {
				t.Fatalf("a transaction in query mode %v: %v, want ErrInvalid naming default_query_exec_mode", mode, err)
			}
			if err := s.client.ReleaseInstance(ctx, tx, "c1", "web-1"); !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("release in a transaction in query mode %v: %v, want ErrInvalid", mode, err)
			}
		}
	})
	// A caller's transaction that already failed is named as such, on the
	// one-statement path and the full one, and not as the allocator's own
	// savepoint missing (as it was: the undo of a savepoint never made).
	t.Run("a transaction already failed is named", func(t *testing.T) {
		t.Parallel()
		s := newScheduler(t, "")
		tx := s.begin()
		if _, err := tx.Exec(ctx, `INSERT INTO placements VALUES ('web-1', 'not an address')`); err == nil {
			t.Fatal("the caller's bad row was accepted")
		}
		for what, call := range map[string]func() error{
			"AllocateInstance": func() error { _, err := s.client.AllocateInstance(ctx, tx, instanceRequest("web-1")); return err },
			"AllocateNode": func() error {
				_, err := s.client.AllocateNode(ctx, tx, engine.NodeRequest{ClusterID: "c1", NodeID: "n9"})
				return err
			},
			"ReleaseInstance": func() error { return s.client.ReleaseInstance(ctx, tx, "c1", "web-1") },
		} {
			if err := call(); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "tx: the transaction has already failed") {
				t.Errorf("%s in a failed transaction: %v, want invalid_input naming the transaction", what, err)
			}
		}
	})
}

// ReleaseInstance in the caller's transaction: the address cools down only
// when the caller commits; a rollback keeps it active; releasing what is not
// held is a no-op.
func TestReleaseInstanceInCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newScheduler(t, "")
	a, err := s.client.AllocateInstance(ctx, nil, instanceRequest("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	tx := s.begin()
	if err := s.client.ReleaseInstance(ctx, tx, "c1", "web-1"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.count(`SELECT count(*) FROM ipam_allocations WHERE owner_id = 'web-1' AND state = 'active'`); n != 1 {
		t.Fatalf("after a rolled-back release: %d active, want 1", n)
	}
	tx = s.begin()
	if err := s.client.ReleaseInstance(ctx, tx, "c1", "web-1"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.count(`SELECT count(*) FROM ipam_allocations WHERE owner_id = 'web-1' AND state = 'cooling'
			AND reusable_at >= released_at + interval '24 hours'`); n != 1 {
		t.Fatalf("after a committed release: %d cooling for 24h, want 1", n)
	}
	if err := s.client.ReleaseInstance(ctx, nil, "c1", "web-1"); err != nil {
		t.Fatalf("releasing what is not held: %v, want a no-op", err)
	}
	if err := s.client.ReleaseInstance(ctx, nil, "c1", "never-placed"); err != nil {
		t.Fatalf("releasing what was never held: %v, want a no-op", err)
	}
	// A cluster that does not exist is named, not a no-op, in a transaction
	// of its own or the caller's.
	for _, tx := range []pgx.Tx{nil, s.begin()} {
		err := s.client.ReleaseInstance(ctx, tx, "nosuch", "web-1")
		if !errors.Is(err, engine.ErrNotFound) || engine.Code(err) != engine.CodeInvalid || !strings.Contains(err.Error(), `cluster "nosuch" does not exist`) {
			t.Fatalf("release in a cluster that does not exist: %v", err)
		}
		if tx != nil {
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Inside its cooldown the address goes to no other instance.
	b, err := s.client.AllocateInstance(ctx, nil, instanceRequest("web-2"))
	if err != nil || b.Address == a.Address {
		t.Fatalf("web-2 got %s (%v); web-1's %s is cooling", b.Address, err, a.Address)
	}
}

// Concurrent placements, each in its own caller transaction, never get the
// same address; the node, environment IPv4 and read calls work through the
// same client.
func TestConcurrentPlacementsAndOtherCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newScheduler(t, "")
	const n = 24
	addrs := make([]netip.Addr, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx, err := s.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
			if err != nil {
				errs[i] = err
				return
			}
			defer func() { _ = tx.Rollback(ctx) }()
			a, err := s.client.AllocateInstance(ctx, tx, instanceRequest("i"+string(rune('a'+i))))
			if err != nil {
				errs[i] = err
				return
			}
			addrs[i] = a.Address
			errs[i] = tx.Commit(ctx)
		}()
	}
	wg.Wait()
	seen := map[netip.Addr]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("placement %d: %v", i, errs[i])
		}
		if seen[addrs[i]] {
			t.Fatalf("%s handed out twice", addrs[i])
		}
		seen[addrs[i]] = true
	}

	node, err := s.client.AllocateNode(ctx, nil, engine.NodeRequest{ClusterID: "c1", NodeID: "n1"})
	if err != nil || node.Address != netip.MustParseAddr("2001:db8:5::1") {
		t.Fatalf("node address %v (%v)", node.Address, err)
	}
	if _, err := s.client.AllocateEnvIPv4(ctx, nil, engine.EnvIPv4Request{ClusterID: "c1", Pool: "nope", OrgID: "acme", EnvID: "prod"}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("IPv4 from a missing pool: %v, want ErrInvalid", err)
	}
	info, err := engine.OperatorOf(s.client).LookupAddress(ctx, node.Address, "")
	if err != nil || len(info) != 1 || info[0].Owner.ID != "n1" {
		t.Fatalf("lookup %s: %+v (%v)", node.Address, info, err)
	}
	u, err := engine.OperatorOf(s.client).PoolUsage(ctx, "c1")
	if err != nil || len(u.Categories) == 0 {
		t.Fatalf("usage: %+v (%v)", u, err)
	}
	if err := s.client.ReleaseNode(ctx, nil, "c1", "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.GetCluster(ctx, "missing"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing cluster: %v, want ErrNotFound", err)
	}
}

// A release that names no holder takes no other manager's allocation: the
// scheduler's ReleaseInstance of an instance that Terraform allocated is
// refused with owner_conflict naming Terraform's actor, as its
// AllocateInstance is, and leaves the address active. A release that
// carries the allocation's generation (the caller read it) releases it.
func TestReleaseWithoutGenerationKeepsToItsActor(t *testing.T) {
	t.Parallel()
	tf, _ := newStore(t, "terraform")
	ctx := context.Background()
	mkCluster(t, tf, "c1", "2001:db8::/48", "", "")
	a, err := tf.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: instance("web-1")})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := engine.Open(ctx, engine.Config{DatabaseURL: testdbURLOf(t, tf), Actor: "scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	defer sched.Close()
	err = sched.ReleaseInstance(ctx, nil, "c1", "web-1")
	var oc *engine.OwnerConflictError
	if !errors.As(err, &oc) || oc.Actor != "terraform" || !strings.Contains(err.Error(), "without the allocation's generation") {
		t.Fatalf("the scheduler's release of Terraform's instance: %v, want owner_conflict naming actor terraform", err)
	}
	if got, err := tf.GetActive(ctx, "c1", engine.OwnerInstance, "web-1"); err != nil || got.Address != a.Address {
		t.Fatalf("after the refused release: %v %v, want %s still active", got.Address, err, a.Address)
	}
	// Its own allocations it releases without a generation; what is not
	// held at all is still a no-op.
	if _, err := sched.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: "job-1", OrgID: "o1", EnvID: "e1"}); err != nil {
		t.Fatal(err)
	}
	if err := sched.ReleaseInstance(ctx, nil, "c1", "job-1"); err != nil {
		t.Fatalf("the scheduler's release of its own instance: %v", err)
	}
	if err := sched.ReleaseInstance(ctx, nil, "c1", "never"); err != nil {
		t.Fatalf("releasing what is not held: %v, want a no-op", err)
	}
	// With the generation it read, any caller releases it.
	if ok, err := sched.Release(ctx, "c1", instance("web-1"), a.Generation); err != nil || !ok {
		t.Fatalf("a release carrying the generation: %v %v", ok, err)
	}
}

// A caller that gives a call up (its context canceled, or its deadline
// passed) is told so, with the context's error to test for: not that the
// database is unavailable, nor that a statement ran past the store's
// statement_timeout, which a canceled placement in the caller's transaction
// and a deadline passed on the one-statement path reported.
func TestCallerGivingUpIsNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newScheduler(t, "")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	late, cancelLate := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancelLate()
	for _, end := range []struct {
		ctx  context.Context
		want error
	}{{canceled, context.Canceled}, {late, context.DeadlineExceeded}} {
		for what, call := range map[string]func(context.Context) error{
			"AllocateInstance": func(ctx context.Context) error {
				_, err := s.client.AllocateInstance(ctx, nil, instanceRequest("web-1"))
				return err
			},
			"AllocateInstance in a transaction": func(ctx context.Context) error {
				tx := s.begin()
				defer func() { _ = tx.Rollback(context.Background()) }()
				_, err := s.client.AllocateInstance(ctx, tx, instanceRequest("web-1"))
				return err
			},
			"ReleaseInstance in a transaction": func(ctx context.Context) error {
				tx := s.begin()
				defer func() { _ = tx.Rollback(context.Background()) }()
				return s.client.ReleaseInstance(ctx, tx, "c1", "web-1")
			},
			"Reserve": func(ctx context.Context) error {
				_, err := s.client.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")}, time.Hour)
				return err
			},
		} {
			err := call(end.ctx)
			if !errors.Is(err, end.want) || engine.Code(err) != "" || !strings.Contains(err.Error(), "the caller gave the call up") {
				t.Errorf("%s, context %v: %v (code %q), want the caller's %v named", what, end.want, err, engine.Code(err), end.want)
			}
		}
	}
	if n := s.count(`SELECT count(*) FROM ipam_allocations`); n != 0 {
		t.Fatalf("%d allocations written by calls given up before they began, want none", n)
	}
}

// Placements that hold every connection of the caller's pool, each in its
// transaction, and fail for an exhausted pool are told so and their failures
// are recorded: the record, which must outlive the callers' rollbacks, does
// not wait for a connection that only their ends would give back. The
// connections it takes instead are one at a time, each set up by the pool's
// own hook: this scheduler keeps the IPAM's tables in a schema of their own.
func TestFailedPlacementsHoldingEveryConnectionAreRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	setup, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Exec(ctx, `CREATE SCHEMA scheduler_ipam`); err != nil {
		t.Fatal(err)
	}
	_ = setup.Close(ctx)
	const conns = 4
	var probe connectProbe
	s := newSchedulerOver(t, "2001:db8:5:1::/126", url, func(cfg *pgxpool.Config) { // ::1 to ::3
		cfg.MaxConns = conns
		cfg.BeforeConnect = probe.connect
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, `SET search_path = scheduler_ipam`)
			return err
		}
	})
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.client.AllocateInstance(ctx, nil, instanceRequest(id)); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	var txs []pgx.Tx
	for range conns {
		txs = append(txs, s.begin())
	}
	probe.armed.Store(true) // the pool's connections are all made
	var wg sync.WaitGroup
	for i, tx := range txs {
		wg.Go(func() {
			if _, err := s.client.AllocateInstance(ctx, tx, instanceRequest(fmt.Sprintf("late%d", i))); !errors.Is(err, engine.ErrExhausted) {
				t.Errorf("a placement in the full pool: %v, want ErrExhausted", err)
			}
		})
	}
	wg.Wait()
	if made, most := probe.made.Load(), probe.most.Load(); made != conns || most != 1 {
		t.Errorf("%d connections beside the pool for the records of %d placements that failed holding every connection of it, %d at once; want one each, one at a time",
			made, conns, most)
	}
	for _, tx := range txs {
		_ = tx.Rollback(ctx)
	}
	if n := s.count(`SELECT count(*) FROM ipam_allocation_failures WHERE reason = 'ipam_exhausted' AND owner_id LIKE 'late%'`); n != conns {
		t.Fatalf("%d failures recorded of %d placements that failed holding every connection of the pool, want all", n, conns)
	}
}

// Two callers' transactions that each took one of a pool's last free
// addresses and then ask for another: each pick finds the other's row held
// and waits for it, and PostgreSQL breaks the deadlock. The pick broken
// counts the row as taken, so that request gets ipam_exhausted at once, its
// caller rolls back, and the other transaction takes the address it gave
// up. The retry that followed met the same deadlock each time, and one of
// them failed with conflict after about 11 s.
func TestCallersWaitingForEachOthersLastAddresses(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/29")}}); err != nil {
		t.Fatal(err)
	}
	env := func(tx pgx.Tx, id string) error {
		_, err := st.AllocateEnvIPv4(ctx, tx, engine.EnvIPv4Request{ClusterID: "c1", Pool: "v4", OrgID: "o", EnvID: id})
		return err
	}
	usage := func() (active, size int) {
		t.Helper()
		if err := raw.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'active'), count(*) FROM ipam_allocations
			WHERE pool_id = 'c1/v4'`).Scan(&active, &size); err != nil {
			t.Fatal(err)
		}
		return active, size
	}
	for i := 0; ; i++ {
		if active, size := usage(); active == size-2 {
			break
		}
		if err := env(nil, fmt.Sprint("fill", i)); err != nil {
			t.Fatal(err)
		}
	}
	errs := twoCallersTwice(t, raw, env)
	failed, ok := errs[0], errs[1] == nil
	if failed == nil {
		failed, ok = errs[1], true
	}
	if active, size := usage(); !ok || engine.Code(failed) != engine.CodeExhausted || active != size {
		t.Fatalf("the callers' transactions: %v, %v; the pool %d of %d active (want one to commit both addresses, the other ipam_exhausted)",
			errs[0], errs[1], active, size)
	}
}

// twoCallersTwice runs two callers' transactions at once, each on a
// connection of its own: each asks once (ask with the id "a1" or "b1"),
// waits until both have, asks again ("a2", "b2") and commits. On its first
// error a transaction rolls back, and that error is its result.
func twoCallersTwice(t *testing.T, raw *pgx.Conn, ask func(tx pgx.Tx, id string) error) []error {
	t.Helper()
	ctx := context.Background()
	var first, wg sync.WaitGroup
	first.Add(2)
	errs := make([]error, 2)
	for i, c := range []string{"a", "b"} {
		conn, err := pgx.Connect(ctx, raw.Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer conn.Close(ctx)
			tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
			if err == nil {
				defer func() { _ = tx.Rollback(ctx) }()
				err = ask(tx, c+"1")
			}
			first.Done()
			first.Wait()
			if err == nil {
				err = ask(tx, c+"2")
			}
			if err != nil {
				_ = tx.Rollback(ctx)
			} else {
				err = tx.Commit(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errs
}

// Two callers' transactions hold every address of an instance pool (its
// counter at its end, nothing cooling): the first two, the second one.
// Each then asks for one more at once, and waits for the rows the other
// holds. One of them answers ipam_exhausted, at the latest after
// PostgreSQL's deadlock_timeout, and the other, once the first ends, an
// address the first held or ipam_exhausted. A
// trial of the scheduler's API found the two retrying their deadlock for
// minutes (an instance pool of a /126).
func TestCallersWaitingForEachOthersFullInstancePool(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "2001:db8:0:1::/126")
	ctx := context.Background()
	req := func(id string) engine.InstanceRequest {
		return engine.InstanceRequest{ClusterID: "c1", InstanceID: id, OrgID: "o", EnvID: "e"}
	}
	var txs []pgx.Tx
	for _, ids := range [][]string{{"a", "b"}, {"c"}} {
		tx := callersTx(t, raw.Config().ConnString())
		for _, id := range ids {
			if _, err := st.AllocateInstance(ctx, tx, req(id)); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
		txs = append(txs, tx)
	}
	type answer struct {
		i   int
		err error
	}
	done := make(chan answer, 2)
	for i, id := range []string{"e", "f"} {
		go func() {
			_, err := st.AllocateInstance(ctx, txs[i], req(id))
			if err != nil {
				_ = txs[i].Rollback(ctx)
			}
			done <- answer{i, err}
		}()
	}
	for n := range 2 {
		select {
		case a := <-done:
			// The second may take an address the first, rolled back, held.
			if engine.Code(a.err) != engine.CodeExhausted && (n == 0 || a.err != nil) {
				t.Errorf("transaction %d's ask (answer %d): %v, want ipam_exhausted", a.i, n+1, a.err)
			}
			_ = txs[a.i].Rollback(ctx) // ends it: the other stops waiting
		case <-time.After(30 * time.Second):
			t.Fatal("the callers' transactions still wait after 30 s")
		}
	}
}

// The client's LockTimeout bounds its waits in a caller's transaction too:
// a placement of an instance that another caller's transaction placed
// first, and holds, answers ipam_busy once the bound has passed (it waited
// for the other transaction's end, however long: found by a trial of the
// scheduler's API), on the one-statement path and on the full one (a node
// with blocks), and the caller's own lock_timeout and statement_timeout
// are as they were after the call.
func TestACallersTransactionIsBoundedByTheClientsLockTimeout(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: url, Actor: "scheduler", LockTimeout: 300 * time.Millisecond,
		StatementTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n2", scaling(4, 4)); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"n1", "n2"} {
		req := engine.InstanceRequest{ClusterID: "c1", InstanceID: "i-" + node, OrgID: "o", EnvID: "e", NodeID: node}
		var txs []pgx.Tx
		for range 2 {
			tx := callersTx(t, url)
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '25s'; SET LOCAL statement_timeout = '29s'`); err != nil {
				t.Fatal(err)
			}
			txs = append(txs, tx)
		}
		if _, err := st.AllocateInstance(ctx, txs[0], req); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := st.AllocateInstance(ctx, txs[1], req)
		if took := time.Since(start); !errors.Is(err, engine.ErrBusy) || took > 5*time.Second {
			t.Errorf("node %s: the second transaction's placement: %v after %s, want ipam_busy after the client's 300ms", node, err, took)
		}
		var lock, statement string
		if err := txs[1].QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout')`).Scan(&lock, &statement); err != nil ||
			lock != "25s" || statement != "29s" {
			t.Errorf("node %s: the caller's settings after the call: %q, %q, %v; want 25s and 29s", node, lock, statement, err)
		}
		for _, tx := range txs {
			_ = tx.Rollback(ctx)
		}
	}
}

// A call in a transaction the caller has already ended, or in a typed nil
// one, is invalid_input on tx, which errors.Is matches with pgx.ErrTxClosed too (found by a trial of
// the scheduler's API: it was a bare "tx is closed", with no code).
func TestACallInAClosedTransactionIsInvalid(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "scheduler")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	for _, end := range []func(pgx.Tx) error{func(tx pgx.Tx) error { return tx.Commit(ctx) }, func(tx pgx.Tx) error { return tx.Rollback(ctx) }} {
		tx, err := raw.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		if err := end(tx); err != nil {
			t.Fatal(err)
		}
		_, aerr := st.AllocateInstance(ctx, tx, engine.InstanceRequest{ClusterID: "c1", InstanceID: "i1", OrgID: "o", EnvID: "e"})
		rerr := st.ReleaseInstance(ctx, tx, "c1", "i1")
		for _, err := range []error{aerr, rerr} {
			var ie *engine.InvalidError
			if !errors.As(err, &ie) || ie.Field != "tx" || !errors.Is(err, pgx.ErrTxClosed) {
				t.Errorf("a call in a closed transaction: %v, want invalid_input on tx, matching pgx.ErrTxClosed", err)
			}
		}
	}
	// A typed nil is no transaction either (it panicked).
	var never *pgxpool.Tx
	_, aerr := st.AllocateInstance(ctx, never, engine.InstanceRequest{ClusterID: "c1", InstanceID: "i1", OrgID: "o", EnvID: "e"})
	rerr := st.ReleaseInstance(ctx, never, "c1", "i1")
	for _, err := range []error{aerr, rerr} {
		var ie *engine.InvalidError
		if !errors.As(err, &ie) || ie.Field != "tx" || !strings.Contains(err.Error(), "nil *pgxpool.Tx") {
			t.Errorf("a call in a typed nil transaction: %v, want invalid_input on tx", err)
		}
	}
}

// A read of what does not exist names what was asked for, not a bare
// not_found (found by a trial of the scheduler's API).
func TestNotFoundNamesWhatWasAsked(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "scheduler")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	_, cerr := st.GetCluster(ctx, "nope")
	_, aerr := st.GetActive(ctx, "c1", engine.OwnerInstance, "i-none")
	for _, c := range []struct {
		err  error
		want string
	}{{cerr, `cluster "nope" does not exist`}, {aerr, `instance "i-none" holds no active allocation in cluster "c1"`}} {
		if !errors.Is(c.err, engine.ErrNotFound) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%v, want not_found saying %s", c.err, c.want)
		}
	}
}

// A call whose caller's deadline passes while it runs fails as given up
// (errors.Is context.DeadlineExceeded, no code), never as ipam_unavailable:
// pgx closes the connection of a statement the deadline interrupted, and
// that "conn closed" was taken for the database's absence (found by a trial
// as an outside reviewer: 3 releases in 1,200 short-deadline calls).
func TestACallersDeadlineIsNotTheDatabasesAbsence(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	db, err := pgxpool.New(context.Background(), url) // the pool a scheduler has: a few connections
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := engine.New(db, engine.Config{Actor: "scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	mkCluster(t, st, "c1", "2001:db8::/48", "", "2001:db8:0:1::/125")
	if _, err := st.CreatePool(context.Background(), engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: prefixes("203.0.113.0/24")}); err != nil {
		t.Fatal(err)
	}
	ops := engine.OperatorOf(st)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wrong []string
	for w := range 8 {
		wg.Go(func() {
			for i := range 150 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+(i*7+w)%80)*time.Millisecond)
				id := fmt.Sprintf("i%d-%d", w, i%3)
				var err error
				// The scheduler's verbs, an address set's change and an
				// operator's read: each ends its own way (the fast path, a
				// transaction, a read-only transaction).
				switch i % 4 {
				case 0:
					_, err = st.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: id, OrgID: "o", EnvID: "e"})
				case 1:
					err = st.ReleaseInstance(ctx, nil, "c1", id)
				case 2:
					ch := engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "s" + id}}
					if i%8 == 2 {
						ch.Add = []engine.SetEntry{{Key: "a", Pools: []string{"c1/v4"}}}
					} else {
						ch.Remove = []string{"a"}
					}
					_, err = st.ApplySet(ctx, ch)
				case 3:
					_, err = ops.PoolUsage(ctx, "c1")
				}
				// (An answer that came back as the deadline passed is one.)
				if ctx.Err() != nil && engine.Code(err) == engine.CodeUnavailable {
					mu.Lock()
					wrong = append(wrong, err.Error())
					mu.Unlock()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	if len(wrong) > 0 {
		t.Fatalf("%d calls whose deadline passed failed as the database's absence, e.g. %s", len(wrong), wrong[0])
	}
}

// callersTx is a caller's READ COMMITTED transaction on a connection of its
// own to url, closed when the test ends.
func callersTx(t *testing.T, url string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// A placement whose transaction's session the server ended (an operator's
// pg_terminate_backend) fails at once as ipam_unavailable that says the
// caller's transaction cannot go on and is to be run again
// (UnavailableError.CallersTx), and the failure is recorded outside the
// transaction, as a failed placement is.
func TestPlacementInAKilledSessionIsNamedAndRecorded(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, "")
	ctx := context.Background()
	tx := s.begin()
	s.place(tx, "k1")
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(ctx, `SELECT pg_terminate_backend($1, 10000)`, pid); err != nil {
		t.Fatal(err)
	}
	_, err := s.client.AllocateInstance(ctx, tx, instanceRequest("k2"))
	var ue *engine.UnavailableError
	if !errors.As(err, &ue) || !ue.CallersTx || !strings.Contains(err.Error(), "roll it back and run it again") {
		t.Fatalf("a placement in a transaction whose session was ended: %v, want ipam_unavailable naming the caller's transaction", err)
	}
	if n := s.count(`SELECT count(*) FROM ipam_allocation_failures WHERE reason = 'ipam_unavailable' AND owner_id = 'k2'`); n != 1 {
		t.Errorf("%d failures recorded for k2, want 1", n)
	}
	if n := s.count(`SELECT count(*) FROM ipam_allocations WHERE owner_id IN ('k1', 'k2') AND state = 'active'`); n != 0 {
		t.Errorf("%d addresses of the lost transaction active", n)
	}
}
