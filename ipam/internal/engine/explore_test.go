package engine_test

// The interleaving explorer: races found by construction, not by luck.
//
// Two operations of the core run against one fresh database. The first is
// paused at one of its statement boundaries (every statement, transaction
// control and batch that its client sends, seen by pgx's QueryTracer and
// BatchTracer on the client's pool, fast statements and shared batches
// included); the second then runs to its end, or until it waits for a lock
// (seen in pg_stat_activity); then the first resumes. Every boundary of the
// first is tried, in both orders, each on a database of its own. After each
// run the invariants are checked (engine.Check) together with the model: an
// operation that told its caller it holds an address must still hold it
// (unless a forced destroy that succeeded took it), and an address released
// is not handed to another owner inside its cooldown (checkCooldown).
//
// Nothing sleeps: the pause waits for a channel, and the wait for the second
// operation polls the server until it has ended or waits for a lock.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// exploreOp is what the tracer knows of one running operation.
type exploreOp struct {
	n       atomic.Int32 // statement boundaries passed
	pid     atomic.Uint32
	pauseAt int32 // the boundary to pause before; -1: none
	paused  chan struct{}
	resume  chan struct{}
	resumed sync.Once

	mu sync.Mutex
	// order: the statements that failed on the lock order (a deadlock, or
	// the row trigger catching a statement that had not taken its pool's
	// lock first), which retries hide from the caller.
	order []string
}

// ended records a statement's failure that breaks the lock order.
func (op *exploreOp) ended(err error) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return
	}
	if pe.Code == "40P01" || (pe.Code == "23514" && pe.ConstraintName == "ipam_allocations_in_pool") {
		op.mu.Lock()
		op.order = append(op.order, pe.Code+" "+pe.Message)
		op.mu.Unlock()
	}
}

type exploreKey struct{}

func (op *exploreOp) boundary(ctx context.Context, conn *pgx.Conn) {
	op.pid.Store(conn.PgConn().PID())
	if op.n.Add(1)-1 == op.pauseAt {
		close(op.paused)
		select {
		case <-op.resume:
		case <-ctx.Done():
		}
	}
}

// release lets the operation go on from its pause (or never pause); a
// run that fails half-way releases it too, so that its connection comes
// back and the test ends instead of waiting for it.
func (op *exploreOp) release() {
	op.resumed.Do(func() { close(op.resume) })
}

// exploreTracer pauses the operation its context names at its boundary.
type exploreTracer struct{}

func opOf(ctx context.Context) *exploreOp {
	op, _ := ctx.Value(exploreKey{}).(*exploreOp)
	return op
}

func (exploreTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if op := opOf(ctx); op != nil {
		op.boundary(ctx, conn)
	}
	return ctx
}
func (exploreTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if op := opOf(ctx); op != nil {
		op.ended(d.Err)
	}
}
func (exploreTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	if op := opOf(ctx); op != nil {
		op.boundary(ctx, conn)
	}
	return ctx
}
func (exploreTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if op := opOf(ctx); op != nil {
		op.ended(d.Err)
	}
}
func (exploreTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// exploreEnv is one run's database: a client whose pool carries the tracer,
// and an untraced pool for the fixture's clock and the checks.
type exploreEnv struct {
	t    testing.TB
	ctx  context.Context
	st   *engine.Client
	pool *pgxpool.Pool // the client's pool, traced: a caller's transaction begins here
	raw  *pgxpool.Pool // untraced: the fixture's clock, the steps' own reads, the checks
}

// exploreConfig is the explorer's client configuration. Short lock bounds: a
// wait that the explorer's schedule makes endless (which it must not) fails
// the run as busy instead of hanging it.
var exploreConfig = engine.Config{Actor: "terraform", LockTimeout: 20 * time.Second}

// exploreKept are the tables whose rows come with the schema (the
// migrations' record): emptying a database for the next run keeps them.
var exploreKept = []string{"ipam_schema_definitions", "ipam_schema_version"}

// reset empties e's database for the next run of its pair and gives it a
// new client. A run costs a fraction of what a new database for each did
// (most of its CPU: the database's copy, then every backend reading the
// catalogs again), and the pair's backends keep their caches. The new
// client holds none of the last run's pools or batches. Every table but the
// schema's own is emptied: a table a migration adds is emptied too.
func (e *exploreEnv) reset() {
	e.t.Helper()
	// A run has ended when both of its operations have; wait for their
	// connections to come back to the pool all the same.
	for start := time.Now(); e.pool.Stat().AcquiredConns() > 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > hangBound {
			e.t.Fatalf("%d connections still taken from the pool %v after the run ended", e.pool.Stat().AcquiredConns(), hangBound)
		}
	}
	var tables string
	if err := e.raw.QueryRow(e.ctx, `SELECT string_agg(quote_ident(tablename), ', ') FROM pg_tables
		WHERE schemaname = current_schema() AND tablename <> ALL ($1)`, exploreKept).Scan(&tables); err != nil {
		e.t.Fatal(err)
	}
	e.exec(`TRUNCATE ` + tables)
	st, err := engine.New(e.pool, exploreConfig)
	if err != nil {
		e.t.Fatal(err)
	}
	e.st = st
}

func newExploreEnv(t testing.TB) *exploreEnv {
	t.Helper()
	url := testdb.New(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	cfg.ConnConfig.Tracer = exploreTracer{}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := engine.New(pool, exploreConfig)
	if err != nil {
		t.Fatal(err)
	}
	// raw is untraced and a pool: the steps, the fixture, the checks and
	// the wait for a lock use it at once.
	raw, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	return &exploreEnv{t: t, ctx: ctx, st: st, pool: pool, raw: raw}
}

func (e *exploreEnv) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.raw.Exec(e.ctx, sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// clock moves database time d ahead of the real clock.
func (e *exploreEnv) clock(d time.Duration) {
	e.t.Helper()
	e.exec(`INSERT INTO ipam_clock (skew) VALUES ($1::interval)
		ON CONFLICT (singleton) DO UPDATE SET skew = EXCLUDED.skew`, fmt.Sprintf("%d seconds", int64(d.Seconds())))
}

// cluster creates a cluster with the default cooldowns.
func (e *exploreEnv) cluster(id, prefix string) {
	e.t.Helper()
	if _, err := e.st.CreateCluster(ctxBG, engine.Cluster{ID: id, Prefix: pfx(prefix),
		NodeCooldown: engine.DefaultNodeCooldown, InstanceCooldown: engine.DefaultInstanceCooldown}); err != nil {
		e.t.Fatal(err)
	}
}

// exploreAck is what an operation told its caller.
type exploreAck struct {
	held     []engine.Allocation // addresses the caller was told it holds
	released []engine.Owner      // owners told their address is released
	forced   bool                // a forced destroy that succeeded: it may take acknowledged rows
	// took: owners whose allocations the step released whoever held them
	// (an operator's forced release): another step's acknowledgement of
	// them may be gone.
	took []engine.Owner
	// origin: the configuration the step allocated for; its held rows must
	// record it (one manager per allocation).
	origin string
}

// exploreStep is one operation of the core, run on a fixture's database.
type exploreStep struct {
	name string
	run  func(ctx context.Context, e *exploreEnv) (exploreAck, error)
}

// exploreFixture sets a database up for a pair.
type exploreFixture struct {
	name  string
	setup func(e *exploreEnv)
}

var ctxBG = context.Background()

func envOwner(id string) engine.Owner {
	return engine.Owner{Kind: engine.OwnerEnvIPv4, ID: id, EnvID: id, OrgID: "o1"}
}

// fixtureV4 is cluster c1 (2001:db8:1::/48) with an IPv4 pool c1/v4 of two
// blocks, 198.51.100.0/29 and 203.0.113.0/29 (one hour cooldown), env e1's
// plan-time hold on 203.0.113.1, expired (expired: true) or live, and with
// active: env e0 active in the first block (so that a non-forced destroy
// refuses).
func fixtureV4(expired, active bool) exploreFixture {
	name := "live hold"
	if expired {
		name = "expired hold"
	}
	if active {
		name += ", e0 active"
	}
	return exploreFixture{name: name, setup: func(e *exploreEnv) {
		e.t.Helper()
		e.cluster("c1", "2001:db8:1::/48")
		if _, err := e.st.CreatePool(ctxBG, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
			CIDRs: []netip.Prefix{pfx("198.51.100.0/29"), pfx("203.0.113.0/29")}}); err != nil {
			e.t.Fatal(err)
		}
		if active {
			if _, err := e.st.Allocate(ctxBG, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e0")}); err != nil {
				e.t.Fatal(err)
			}
		}
		ttl := time.Hour
		if expired {
			ttl = time.Minute
		}
		if _, err := e.st.Reserve(ctxBG, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e1"),
			Address: netip.MustParseAddr("203.0.113.1")}, ttl); err != nil {
			e.t.Fatal(err)
		}
		if expired {
			e.clock(2 * time.Minute)
		}
	}}
}

func allocStep(name string, req engine.AllocateRequest) exploreStep {
	return exploreStep{name: name, run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		r, err := e.st.Allocate(ctx, req)
		if err != nil {
			return exploreAck{}, err
		}
		return exploreAck{held: []engine.Allocation{r.Allocation}}, nil
	}}
}

// originAllocStep allocates as configuration origin (actor terraform).
func originAllocStep(name, origin string, req engine.AllocateRequest) exploreStep {
	return exploreStep{name: name, run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		st, err := engine.New(e.pool, engine.Config{Actor: "terraform", Origin: origin, LockTimeout: 20 * time.Second})
		if err != nil {
			return exploreAck{}, err
		}
		r, err := st.Allocate(ctx, req)
		if err != nil {
			return exploreAck{}, err
		}
		return exploreAck{held: []engine.Allocation{r.Allocation}, origin: origin}, nil
	}}
}

func holdStep(name string, req engine.AllocateRequest) exploreStep {
	return exploreStep{name: name, run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		_, err := e.st.Reserve(ctx, req, time.Hour)
		return exploreAck{}, err
	}}
}

func releaseStep(name, cluster string, o engine.Owner) exploreStep {
	return exploreStep{name: name, run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		ok, err := e.st.Release(ctx, cluster, o, 0)
		if err != nil || !ok {
			return exploreAck{}, err
		}
		return exploreAck{released: []engine.Owner{o}}, nil
	}}
}

func poolUpdateStep(name string, cidrs, exclude []netip.Prefix) exploreStep {
	return exploreStep{name: name, run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		_, err := e.st.UpdatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour, CIDRs: cidrs, Exclude: exclude})
		return exploreAck{}, err
	}}
}

func poolDestroyStep(force bool) exploreStep {
	return exploreStep{name: fmt.Sprintf("pool destroy (force %v)", force), run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		err := e.st.DeletePool(ctx, "c1/v4", force)
		return exploreAck{forced: force && err == nil}, err
	}}
}

func clusterDestroyStep(force bool) exploreStep {
	return exploreStep{name: fmt.Sprintf("cluster destroy (force %v)", force), run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		err := e.st.DeleteCluster(ctx, "c1", force)
		return exploreAck{forced: force && err == nil}, err
	}}
}

var (
	stepConfirm = allocStep("confirm of e1's hold", engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"),
		Owner: envOwner("e1"), Address: netip.MustParseAddr("203.0.113.1")})
	stepAllocFresh = allocStep("allocate e5 (reuse queue)", engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e5")})
	stepAllocExact = allocStep("allocate e6 at 203.0.113.3 (exact)", engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"),
		Owner: envOwner("e6"), Address: netip.MustParseAddr("203.0.113.3")})
	stepAllocNode = allocStep("allocate node n1", engine.AllocateRequest{Pool: engine.NodePool("c1"),
		Owner: engine.Owner{Kind: engine.OwnerNode, ID: "n1", NodeID: "n1"}})
	stepHold    = holdStep("hold for e7", engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e7")})
	stepRelease = releaseStep("release e0", "c1", envOwner("e0"))
	// stepOpReleaseE0: an operator's forced release of e0 (ipamctl release
	// --force), whoever holds it.
	stepOpReleaseE0 = exploreStep{name: "ipamctl release --force of e0", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		res, err := engine.OperatorOf(e.st).ReleaseAllocation(ctx, engine.ReleaseRequest{ClusterID: "c1",
			OwnerKind: engine.OwnerEnvIPv4, OwnerID: "e0", Reason: "explorer", Force: true})
		if err != nil || res.AlreadyReleased {
			return exploreAck{}, err
		}
		return exploreAck{took: []engine.Owner{envOwner("e0")}}, nil
	}}
	// Two configurations (one actor, two origins) creating one owner.
	stepCreateE8A = originAllocStep("configuration A creates e8", "/work/a", engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e8")})
	stepCreateE8B = originAllocStep("configuration B creates e8", "/work/b", engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e8")})
	stepShrink    = poolUpdateStep("shrink to the first block", []netip.Prefix{pfx("198.51.100.0/29")}, nil)
	stepExclude   = poolUpdateStep("exclude 203.0.113.0/30", []netip.Prefix{pfx("198.51.100.0/29"), pfx("203.0.113.0/29")},
		[]netip.Prefix{pfx("203.0.113.0/30")})
)

// fixtureBlocks is cluster c1 (2001:db8:1::/48) whose node n1 has instance
// blocks (/124), instance i1 active in them, and i2's live plan-time hold
// in them.
var fixtureBlocks = exploreFixture{name: "node blocks", setup: func(e *exploreEnv) {
	e.t.Helper()
	e.cluster("c1", "2001:db8:1::/48")
	if _, err := e.st.ScaleNodeBlocks(ctxBG, "c1", "n1", blockScaling(4)); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.Allocate(ctxBG, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: onNode("i1")}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.Reserve(ctxBG, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: onNode("i2")}, time.Hour); err != nil {
		e.t.Fatal(err)
	}
}}

// fixtureBlocksFull: node n1's one block (a /126: 4 addresses) full, so
// that the next instance placed on n1 grows the node.
var fixtureBlocksFull = fixtureBlocksWith("node blocks, full", 4)

// fixtureBlocksTwoFree: n1's one block with two free, so that two placement
// transactions each placing two instances on n1 fill it with their first
// ones and grow it with their second ones.
var fixtureBlocksTwoFree = fixtureBlocksWith("node blocks, two free", 2)

// fixtureBlocksWith: node n1's one block (a /126: 4 addresses) with used
// instances on it.
func fixtureBlocksWith(name string, used int) exploreFixture {
	return exploreFixture{name: name, setup: func(e *exploreEnv) {
		e.t.Helper()
		e.cluster("c1", "2001:db8:1::/48")
		sc := blockScaling(0)
		sc.PrefixLength = 126
		if _, err := e.st.ScaleNodeBlocks(ctxBG, "c1", "n1", sc); err != nil {
			e.t.Fatal(err)
		}
		for i := range used {
			if _, err := e.st.Allocate(ctxBG, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: onNode(fmt.Sprintf("f%d", i))}); err != nil {
				e.t.Fatal(err)
			}
		}
	}}
}

// fixtureMixedFleet: nodes n1 and n2 each with one full block (a /126: 4
// addresses), so that the next instance placed on either carves a fresh
// block, and node n0 without blocks (the cluster's instance pool).
var fixtureMixedFleet = exploreFixture{name: "a mixed fleet, two full nodes", setup: func(e *exploreEnv) {
	e.t.Helper()
	// A small instance prefix, whose counter the carves keep below the blocks.
	if _, err := e.st.CreateCluster(ctxBG, engine.Cluster{ID: "c1", Prefix: pfx("2001:db8:1::/48"),
		NodePrefix: pfx("2001:db8:1::/120"), InstancePrefix: pfx("2001:db8:1:1::/120"),
		NodeCooldown: engine.DefaultNodeCooldown, InstanceCooldown: engine.DefaultInstanceCooldown}); err != nil {
		e.t.Fatal(err)
	}
	sc := blockScaling(0)
	sc.PrefixLength = 126
	for _, node := range []string{"n1", "n2"} {
		if _, err := e.st.ScaleNodeBlocks(ctxBG, "c1", node, sc); err != nil {
			e.t.Fatal(err)
		}
		for i := range 4 {
			if _, err := e.st.AllocateInstance(ctxBG, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: fmt.Sprintf("%s-f%d", node, i), OrgID: "o1", EnvID: "e1", NodeID: node}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}}

// placeTwoInTx is a scheduler's placement transaction that places two
// instances on n1.
func placeTwoInTx(a, b string) exploreStep {
	return placeInTx(placed{a, "n1"}, placed{b, "n1"})
}

// placed is an instance and the node it is placed on.
type placed struct{ id, node string }

// placeInTx is a scheduler's placement transaction that places instances in
// order.
func placeInTx(ps ...placed) exploreStep {
	var name []string
	for _, p := range ps {
		name = append(name, p.id+" on "+p.node)
	}
	return exploreStep{name: "place " + strings.Join(name, " and ") + " in one caller's transaction", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		tx, err := e.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			return exploreAck{}, err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		var ack exploreAck
		for _, p := range ps {
			addr, err := e.st.AllocateInstance(ctx, tx, engine.InstanceRequest{ClusterID: "c1", InstanceID: p.id, OrgID: "o1", EnvID: "e1", NodeID: p.node})
			if err != nil {
				return exploreAck{}, err
			}
			ack.held = append(ack.held, engine.Allocation{ClusterID: "c1", Address: addr.Address,
				Owner: engine.Owner{Kind: engine.OwnerInstance, ID: p.id, InstanceID: p.id, NodeID: p.node}})
		}
		return ack, tx.Commit(ctx)
	}}
}

func blockScaling(demand int64) engine.BlockScaling {
	return engine.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 8, Demand: &demand}
}

// onNode is an instance placed on node n1.
func onNode(id string) engine.Owner {
	return engine.Owner{Kind: engine.OwnerInstance, ID: id, InstanceID: id, NodeID: "n1"}
}

// heldAddress reads an owner's held address (the fixture's), for a step
// that confirms it.
func (e *exploreEnv) heldAddress(owner string) netip.Addr {
	var a netip.Prefix
	if err := e.raw.QueryRow(e.ctx, `SELECT address FROM ipam_allocations WHERE owner_id = $1 AND state = 'reserved'`, owner).Scan(&a); err != nil {
		e.t.Fatalf("the hold of %s: %v", owner, err)
	}
	return a.Addr()
}

var (
	stepInstanceOnNode = allocStep("allocate i5 on n1", engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: onNode("i5")})
	stepHoldOnNode     = holdStep("hold for i6 on n1", engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: onNode("i6")})
	stepReleaseI1      = releaseStep("release i1", "c1", onNode("i1"))
	stepConfirmI2      = exploreStep{name: "confirm of i2's hold", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		var n int
		if err := e.raw.QueryRow(ctx, `SELECT count(*) FROM ipam_clusters WHERE id = 'c1'`).Scan(&n); err != nil || n == 0 {
			// a forced destroy ran first: the apply's confirm finds no cluster
			return exploreAck{}, fmt.Errorf("cluster c1: %w", engine.ErrNotFound)
		}
		return allocStep("", engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: onNode("i2"), Address: e.heldAddress("i2")}).run(ctx, e)
	}}
	stepScaleBlocks = exploreStep{name: "scale n1's blocks up", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		_, err := e.st.ScaleNodeBlocks(ctx, "c1", "n1", blockScaling(60))
		return exploreAck{}, err
	}}
	stepReleaseBlocks = exploreStep{name: "release n1's blocks", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		return exploreAck{}, e.st.ReleaseNodeBlocks(ctx, "c1", "n1")
	}}
	// stepRescaleBlocks: n1's scaling again, with its settings as they are.
	stepRescaleBlocks = exploreStep{name: "rescale n1's blocks", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		_, err := e.st.RescaleNodeBlocks(ctx, "c1", "n1")
		return exploreAck{}, err
	}}
	// The scheduler's placement: the allocation inside its transaction.
	stepInstanceInTx = inCallersTx("place i7 on n1 in the caller's transaction", onNode("i7"),
		func(ctx context.Context, e *exploreEnv, tx pgx.Tx) (netip.Addr, error) {
			a, err := e.st.AllocateInstance(ctx, tx, engine.InstanceRequest{ClusterID: "c1", InstanceID: "i7", OrgID: "o1", EnvID: "e1", NodeID: "n1"})
			return a.Address, err
		})
	stepEnvInTx = inCallersTx("enable e8's IPv4 in the caller's transaction", envOwner("e8"),
		func(ctx context.Context, e *exploreEnv, tx pgx.Tx) (netip.Addr, error) {
			a, err := e.st.AllocateEnvIPv4(ctx, tx, engine.EnvIPv4Request{ClusterID: "c1", Pool: "v4", EnvID: "e8", OrgID: "o1"})
			return a.Address, err
		})
	stepSetApply = exploreStep{name: "apply set s1 (a key in c1/v4)", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		ms, err := e.st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{Kind: engine.OwnerSet, ID: "s1"},
			Add: []engine.SetEntry{{Key: "a", Pools: []string{"c1/v4"}}}})
		return setAck(ms, err)
	}}
	stepPoolCreate = exploreStep{name: "create pool c1/v6", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		_, err := e.st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v6", Cooldown: time.Hour, CIDRs: []netip.Prefix{pfx("2001:db8:1:9::/120")}})
		return exploreAck{}, err
	}}
	stepClusterUpdate = exploreStep{name: "update c1's gateway and MTU", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		c, err := e.st.GetCluster(ctx, "c1")
		if err != nil {
			return exploreAck{}, err
		}
		c.GatewayIPv6, c.MTU = netip.MustParseAddr("fe80::2"), 1400
		_, err = e.st.UpdateCluster(ctx, c)
		return exploreAck{}, err
	}}
)

// fixtureV4Stale is fixtureV4(true, true) with e0, which a Terraform state
// read 59 days ago, unseen for 40 days: a stale leak that a reclaim would
// release (only what a state holds is stale by age).
var fixtureV4Stale = exploreFixture{name: "expired hold, e0 active and stale", setup: func(e *exploreEnv) {
	e.t.Helper()
	fixtureV4(true, true).setup(e)
	e.exec(`UPDATE ipam_allocations SET allocated_at = now() - interval '60 days', last_seen_at = now() - interval '40 days',
		confirmed_at = now() - interval '59 days' WHERE owner_id = 'e0'`)
}}

var (
	// stepReclaim: an operator's reclaim of the stale leaks (ipamctl leaks
	// --stale-days 30, then reclaim --apply).
	stepReclaim = exploreStep{name: "reclaim stale leaks", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		rep, err := engine.OperatorOf(e.st).FindStaleLeaks(ctx, "c1", nil, 30)
		if err != nil {
			return exploreAck{}, err
		}
		res, err := engine.OperatorOf(e.st).Reclaim(ctx, rep, engine.ReclaimOptions{Apply: true})
		var ack exploreAck
		for _, r := range res {
			if r.Outcome == engine.OutcomeReclaimed {
				ack.released = append(ack.released, engine.Owner{Kind: r.Leak.OwnerKind, ID: r.Leak.OwnerID})
			}
		}
		return ack, err
	}}
	// stepRefresh: a Terraform refresh of e0, which tells its state e0
	// holds the address (and records that it was seen).
	stepRefresh = exploreStep{name: "refresh e0", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		a, err := e.st.GetActive(ctx, "c1", engine.OwnerEnvIPv4, "e0")
		if err != nil {
			return exploreAck{}, err
		}
		return exploreAck{held: []engine.Allocation{a}}, nil
	}}
	stepGrow = poolUpdateStep("grow by 192.0.2.0/29", []netip.Prefix{pfx("198.51.100.0/29"), pfx("203.0.113.0/29"), pfx("192.0.2.0/29")}, nil)
)

// fixtureV4Cooling is fixtureV4(false, false) with env e0's address
// released (cooling for an hour) and a second cluster c2 (2001:db8:2::/48):
// a non-forced destroy of c1/v4 or c1 succeeds and leaves e0's address as a
// tombstone, which a pool created over the same blocks must inherit.
var fixtureV4Cooling = exploreFixture{name: "live hold, e0 cooling, cluster c2", setup: func(e *exploreEnv) {
	e.t.Helper()
	fixtureV4(false, true).setup(e)
	if ok, err := e.st.Release(ctxBG, "c1", envOwner("e0"), 0); err != nil || !ok {
		e.t.Fatalf("release e0: %v %v", ok, err)
	}
	e.cluster("c2", "2001:db8:2::/48")
}}

var (
	// stepPoolCreateOver: c2's pool over c1/v4's blocks, which the
	// exclusion between clusters refuses while c1/v4 exists.
	stepPoolCreateOver = exploreStep{name: "create pool c2/v4 over c1/v4's blocks", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		_, err := e.st.CreatePool(ctx, engine.Pool{ClusterID: "c2", Name: "v4", Cooldown: time.Hour,
			CIDRs: []netip.Prefix{pfx("198.51.100.0/29"), pfx("203.0.113.0/29")}})
		return exploreAck{}, err
	}}
	// stepReplaceE0: a create_before_destroy replacement of e0 that moves
	// it to 203.0.113.3: the plan's mark, then the create, which releases
	// e0's address into cooldown for e0 and claims the new one.
	stepReplaceE0 = exploreStep{name: "replace e0, moving it to 203.0.113.3", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		gen, err := ownerGeneration(ctx, e, "e0")
		if err != nil {
			return exploreAck{}, err
		}
		if _, err := e.st.MarkReplacement(ctx, "c1", envOwner("e0"), gen, time.Hour); err != nil {
			return exploreAck{}, err
		}
		return allocStep("", engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e0"),
			Address: netip.MustParseAddr("203.0.113.3")}).run(ctx, e)
	}}
	// stepDestroyOldE0: the replaced object's destroy, carrying the
	// generation e0's allocation had when the fixture made it.
	stepDestroyOldE0 = exploreStep{name: "destroy e0's replaced object", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		gen, err := ownerGeneration(ctx, e, "e0")
		if err != nil {
			return exploreAck{}, err
		}
		ok, err := e.st.Release(ctx, "c1", envOwner("e0"), gen)
		if err != nil || !ok {
			return exploreAck{}, err
		}
		return exploreAck{released: []engine.Owner{envOwner("e0")}}, nil
	}}
	// stepSetOnNode: set s2 adds a key in node n1's blocks.
	stepSetOnNode = exploreStep{name: "apply set s2 (a key on n1)", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		ms, err := e.st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{Kind: engine.OwnerSet, ID: "s2", NodeID: "n1"},
			Add: []engine.SetEntry{{Key: "a", Pools: []string{"c1/blocks/n1"}}}})
		return setAck(ms, err)
	}}
)

// fixtureV4Confirmed is fixtureV4(true, true) with e0's allocation read by
// a refresh: a create of e0 is refused (owner_conflict) unless a plan
// marks the allocation as being replaced.
var fixtureV4Confirmed = exploreFixture{name: "expired hold, e0 active and confirmed", setup: func(e *exploreEnv) {
	e.t.Helper()
	fixtureV4(true, true).setup(e)
	if _, err := stepRefresh.run(ctxBG, e); err != nil {
		e.t.Fatal(err)
	}
}}

var (
	// stepCreateE0Again: the create half of a replacement of e0 that keeps
	// its address (no claim, the same pool): refused while nothing marks
	// e0's allocation, else it takes it over at its address, wherever the
	// mark lands in its transaction.
	stepCreateE0Again = exploreStep{name: "create e0 again (a replacement's create)", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		var before netip.Addr
		if err := e.raw.QueryRow(ctx, `SELECT address FROM ipam_allocations WHERE owner_id = 'e0' AND state = 'active'`).Scan(&before); err != nil {
			return exploreAck{}, err
		}
		r, err := e.st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e0")})
		if err != nil {
			return exploreAck{}, err
		}
		if r.Address != before {
			return exploreAck{held: []engine.Allocation{r.Allocation}}, fmt.Errorf("the replacement's create moved e0 from %s to %s, asking for no address", before, r.Address)
		}
		return exploreAck{held: []engine.Allocation{r.Allocation}}, nil
	}}
	// stepMarkE0: a plan of the same configuration marks e0's allocation
	// as being replaced.
	stepMarkE0 = exploreStep{name: "mark e0 as being replaced", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		var gen int64
		if err := e.raw.QueryRow(ctx, `SELECT generation FROM ipam_allocations WHERE owner_id = 'e0' AND state = 'active'`).Scan(&gen); err != nil {
			return exploreAck{}, err
		}
		_, err := e.st.MarkReplacement(ctx, "c1", envOwner("e0"), gen, time.Hour)
		return exploreAck{}, err
	}}
)

// fixtureV4MarkedBy is fixtureV4(true, false) with e0 allocated by
// configuration owner, read by its refresh, and marked as being replaced by
// a plan of configuration marker (the same actor): marker's create takes it
// over.
func fixtureV4MarkedBy(owner, marker string) exploreFixture {
	return exploreFixture{name: "expired hold, e0 " + owner + "'s, marked by " + marker + "'s plan", setup: func(e *exploreEnv) {
		e.t.Helper()
		fixtureV4(true, false).setup(e)
		o, m := originClient(e, owner), originClient(e, marker)
		r, err := o.Allocate(ctxBG, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e0")})
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := o.GetActive(ctxBG, "c1", engine.OwnerEnvIPv4, "e0"); err != nil {
			e.t.Fatal(err)
		}
		if _, err := m.MarkReplacement(ctxBG, "c1", envOwner("e0"), r.Generation, time.Hour); err != nil {
			e.t.Fatal(err)
		}
	}}
}

// originClient is a client of configuration origin (actor terraform) on e's
// traced pool.
func originClient(e *exploreEnv, origin string) *engine.Client {
	e.t.Helper()
	st, err := engine.New(e.pool, engine.Config{Actor: "terraform", Origin: origin, LockTimeout: 20 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

var (
	// stepCreateE0AsB: the create of /cfg/b's replacement takes /cfg/a's e0
	// over, unless a plan of /cfg/a marked it since: it never takes over a
	// generation whose mark is another configuration's.
	stepCreateE0AsB = exploreStep{name: "create e0 as /cfg/b (takes it over)", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		var before int64
		if err := e.raw.QueryRow(ctx, `SELECT generation FROM ipam_allocations WHERE owner_id = 'e0' AND state = 'active'`).Scan(&before); err != nil {
			return exploreAck{}, err
		}
		r, err := originClient(e, "/cfg/b").Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e0")})
		if err != nil {
			return exploreAck{}, err
		}
		var markOrigin string
		var markGen int64
		if err := e.raw.QueryRow(ctx, `SELECT coalesce(replace_origin, ''), coalesce(replace_generation, 0) FROM ipam_allocations WHERE id = $1`,
			r.ID).Scan(&markOrigin, &markGen); err != nil {
			return exploreAck{}, err
		}
		if markOrigin == "/cfg/a" && markGen == before {
			return exploreAck{}, fmt.Errorf("/cfg/b took over generation %d, which /cfg/a's plan had marked", before)
		}
		return exploreAck{held: []engine.Allocation{r.Allocation}, origin: "/cfg/b"}, nil
	}}
	// stepMarkE0AsA: a plan of /cfg/a marks e0 (the fixture's generation),
	// replacing /cfg/b's mark.
	stepMarkE0AsA = exploreStep{name: "mark e0 as being replaced by /cfg/a's plan", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		gen, err := ownerGeneration(ctx, e, "e0")
		if err != nil {
			return exploreAck{}, err
		}
		_, err = originClient(e, "/cfg/a").MarkReplacement(ctx, "c1", envOwner("e0"), gen, time.Hour)
		return exploreAck{}, err
	}}
)

var (
	// stepMoveE0AsB: the create of /cfg/b's replacement of e0 for another
	// org (its org_id changed): with /cfg/b's plan's mark it moves e0 to
	// another address (the old one cools for o1); once a plan of /cfg/a
	// marked e0 since, it is refused.
	stepMoveE0AsB = exploreStep{name: "create e0 for another org as /cfg/b (moves it)", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		o := envOwner("e0")
		o.OrgID = "o2"
		r, err := originClient(e, "/cfg/b").Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: o})
		if err != nil {
			return exploreAck{}, err
		}
		return exploreAck{held: []engine.Allocation{r.Allocation}, origin: "/cfg/b"}, nil
	}}
	// stepMarkE0AsAKept: stepMarkE0AsA, acknowledging the allocation it
	// marked: no create of another configuration's plan may move or take
	// it after the mark (before it, the mark finds its generation gone).
	stepMarkE0AsAKept = exploreStep{name: "mark e0 as being replaced by /cfg/a's plan (kept)", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		gen, err := ownerGeneration(ctx, e, "e0")
		if err != nil {
			return exploreAck{}, err
		}
		a, err := originClient(e, "/cfg/a").MarkReplacement(ctx, "c1", envOwner("e0"), gen, time.Hour)
		if err != nil {
			return exploreAck{}, err
		}
		return exploreAck{held: []engine.Allocation{a}}, nil
	}}
)

// claimedX is the address the owner race's pair claims: free in fixtureV4.
var claimedX = netip.MustParseAddr("198.51.100.4")

var (
	// stepClaimE9: /cfg/a's e9 claims claimedX. Refused for another
	// holder of the address, that holder must have taken it before e9 got
	// an address anywhere: else e9's own allocation (owner_conflict) was
	// the answer at every moment the holder's was.
	stepClaimE9 = exploreStep{name: "e9 claims 198.51.100.4 as /cfg/a", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		r, err := originClient(e, "/cfg/a").Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e9"),
			Address: claimedX})
		var iu *engine.AddressInUseError
		if errors.As(err, &iu) && iu.OwnerID != "e9" {
			var ownFirst bool
			if qerr := e.raw.QueryRow(ctxBG, `SELECT coalesce(bool_or(o.allocated_at < x.allocated_at), false)
				FROM ipam_allocations o, ipam_allocations x
				WHERE o.owner_id = 'e9' AND o.state = 'active' AND x.address = $1 AND x.state = 'active'`,
				netip.PrefixFrom(claimedX, 32)).Scan(&ownFirst); qerr != nil {
				return exploreAck{}, qerr
			}
			if ownFirst {
				return exploreAck{}, fmt.Errorf("the claim named %s's %s, taken after e9 got its own address: %v", iu.OwnerID, claimedX, err)
			}
		}
		if err != nil {
			return exploreAck{}, err
		}
		return exploreAck{held: []engine.Allocation{r.Allocation}, origin: "/cfg/a"}, nil
	}}
	// stepE9ThenE10: /cfg/b's e9 gets any address, then e10 claims
	// claimedX.
	stepE9ThenE10 = exploreStep{name: "e9 gets an address as /cfg/b, then e10 claims 198.51.100.4", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		a, err := originClient(e, "/cfg/b").Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e9")})
		if err != nil {
			return exploreAck{}, err
		}
		ack := exploreAck{held: []engine.Allocation{a.Allocation}}
		b, err := e.st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e10"), Address: claimedX})
		if err != nil {
			return ack, err
		}
		ack.held = append(ack.held, b.Allocation)
		return ack, nil
	}}
)

// stepCreateE0AsA: the create of /cfg/a's replacement takes e0 over. It
// acknowledges nothing: the release of the pair may follow it and release
// e0, which the pair is about (the verifier would call that a loss).
var stepCreateE0AsA = exploreStep{name: "create e0 as /cfg/a (takes it over)", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
	_, err := originClient(e, "/cfg/a").Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e0")})
	return exploreAck{}, err
}}

// stepReleaseE0AsA: configuration /cfg/a releases e0 without a generation
// (what it manages): it releases e0 if e0 is /cfg/a's, refuses if it is
// another configuration's, and never answers "nothing released" while e0
// is /cfg/a's.
var stepReleaseE0AsA = exploreStep{name: "release e0 without generation as /cfg/a", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
	ok, err := originClient(e, "/cfg/a").Release(ctx, "c1", envOwner("e0"), 0)
	if err != nil {
		return exploreAck{}, err
	}
	if ok {
		return exploreAck{released: []engine.Owner{envOwner("e0")}}, nil
	}
	// Read untraced (no operation in the context), without a refresh's record.
	if a, err := e.st.Peek().GetActive(ctxBG, "c1", engine.OwnerEnvIPv4, "e0"); err == nil && a.Origin == "/cfg/a" {
		return exploreAck{}, errors.New("the release answered that nothing was released, and e0 is /cfg/a's")
	}
	return exploreAck{}, nil
}}

// fixtureV4Set is fixtureV4(true, true) with set s1 holding key a at
// 203.0.113.2, in the block that stepShrink drops and stepExclude excludes.
var fixtureV4Set = exploreFixture{name: "expired hold, e0 active, set s1's key a at 203.0.113.2", setup: func(e *exploreEnv) {
	e.t.Helper()
	fixtureV4(true, true).setup(e)
	if _, err := stepSetApplyAt("a", "203.0.113.2").run(ctxBG, e); err != nil {
		e.t.Fatal(err)
	}
}}

// stepSetRestate: set s1's key a restated (its address no longer asked
// for exactly, the pool still listed): only its stored request changes.
var stepSetRestate = exploreStep{name: "restate set s1's key a", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
	ms, err := e.st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{Kind: engine.OwnerSet, ID: "s1"},
		Restate: []engine.SetEntry{{Key: "a", Pools: []string{"c1/v4"}}}})
	var ack exploreAck
	for _, m := range ms {
		if m.Key == "a" && m.Address != netip.MustParseAddr("203.0.113.2") {
			return ack, fmt.Errorf("the restate moved key a to %s", m.Address)
		}
		ack.held = append(ack.held, m.Allocation)
	}
	return ack, err
}}

// stepReplaceSet: a create_before_destroy replacement of set s1: the
// plan's mark of key a at the fixture's generation, then the create,
// which takes it over at its address.
var stepReplaceSet = exploreStep{name: "replace set s1, keeping key a", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
	gen, err := ownerGeneration(ctx, e, "s1#a")
	if err != nil {
		return exploreAck{}, err
	}
	if err := e.st.MarkSetReplacement(ctx, "c1", "s1", map[string]int64{"a": gen}, time.Hour); err != nil {
		return exploreAck{}, err
	}
	return stepSetApplyAt("a", "203.0.113.2").run(ctx, e)
}}

// stepDestroyOldSet: the replaced set object's destroy, carrying key a's
// generation when the fixture made it: it releases a only if no create
// took it over first.
var stepDestroyOldSet = exploreStep{name: "destroy set s1's replaced object", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
	gen, err := ownerGeneration(ctx, e, "s1#a")
	if err != nil {
		return exploreAck{}, err
	}
	return exploreAck{}, e.st.ReleaseSetAt(ctx, "c1", "s1", map[string]int64{"a": gen})
}}

// stepSetApplyAt: set s1 adds key, claiming addr in c1/v4.
func stepSetApplyAt(key, addr string) exploreStep {
	return exploreStep{name: "apply set s1 (key " + key + " at " + addr + ")", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		ms, err := e.st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{Kind: engine.OwnerSet, ID: "s1"},
			Add: []engine.SetEntry{{Key: key, Pools: []string{"c1/v4"}, Address: netip.MustParseAddr(addr), Requested: true}}})
		return setAck(ms, err)
	}}
}

// setAck acknowledges the members a set change answered with.
func setAck(ms []engine.SetMember, err error) (exploreAck, error) {
	var ack exploreAck
	for _, m := range ms {
		ack.held = append(ack.held, m.Allocation)
	}
	return ack, err
}

// stepSetMoveToA: set s1 removes key b and adds key a on 203.0.113.2, in
// one change (a key renamed in the configuration, keeping its address). A
// refusal naming key b as the address's holder is no answer either order
// with a concurrent change of the set gives: b goes before a comes.
var stepSetMoveToA = exploreStep{name: "apply set s1 (remove key b, key a at 203.0.113.2)", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
	ms, err := e.st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{Kind: engine.OwnerSet, ID: "s1"}, Remove: []string{"b"},
		Add: []engine.SetEntry{{Key: "a", Pools: []string{"c1/v4"}, Address: netip.MustParseAddr("203.0.113.2"), Requested: true}}})
	var iu *engine.AddressInUseError
	if errors.As(err, &iu) && iu.OwnerID == "s1#b" {
		return exploreAck{}, fmt.Errorf("key a refused as held by key b, which the same change removes: %v", err)
	}
	return setAck(ms, err)
}}

// ownerGeneration: the generation an owner's allocation had when the
// fixture made it (its first event's), which the replaced object's
// private state holds.
func ownerGeneration(ctx context.Context, e *exploreEnv, owner string) (int64, error) {
	var gen int64
	err := e.raw.QueryRow(ctx, `SELECT generation FROM ipam_events WHERE owner_id = $1 ORDER BY at, generation LIMIT 1`, owner).Scan(&gen)
	return gen, err
}

// inCallersTx is the scheduler's way: an allocation for o in c1 inside a
// transaction of the caller's own (on the traced pool), committed.
func inCallersTx(name string, o engine.Owner, alloc func(context.Context, *exploreEnv, pgx.Tx) (netip.Addr, error)) exploreStep {
	return exploreStep{name: name, run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		tx, err := e.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			return exploreAck{}, err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		addr, err := alloc(ctx, e, tx)
		if err == nil {
			err = tx.Commit(ctx)
		}
		if err != nil {
			return exploreAck{}, err
		}
		return exploreAck{held: []engine.Allocation{{ClusterID: "c1", Address: addr, Owner: o}}}, nil
	}}
}

// explorePair tries every interleaving of a and b (both orders, every
// boundary of the first) on fresh databases, and reports each run whose
// outcome breaks an invariant or the model.
func explorePair(t *testing.T, fx exploreFixture, a, b exploreStep) {
	t.Helper()
	e := newExploreEnv(t)
	for _, order := range [][2]exploreStep{{a, b}, {b, a}} {
		first, second := order[0], order[1]
		k := countBoundaries(e, fx, first)
		for i := 0; i <= k; i++ {
			name := fmt.Sprintf("%s paused before statement %d of %d, then %s", first.name, i+1, k, second.name)
			if i == k {
				name = fmt.Sprintf("%s, then %s", first.name, second.name)
			}
			if msg := exploreRun(e, fx, first, second, int32(i)); msg != "" {
				t.Errorf("%s [%s]:\n%s", name, fx.name, msg)
			}
		}
	}
}

// countBoundaries runs step alone after the fixture, in e emptied, and
// counts its statement boundaries.
func countBoundaries(e *exploreEnv, fx exploreFixture, step exploreStep) int {
	e.t.Helper()
	e.reset()
	fx.setup(e)
	op := &exploreOp{pauseAt: -1}
	if _, err := step.run(context.WithValue(ctxBG, exploreKey{}, op), e); err != nil {
		e.t.Logf("%s alone [%s]: %v", step.name, fx.name, err)
	}
	return int(op.n.Load())
}

type exploreResult struct {
	ack exploreAck
	err error
}

// exploreRun runs first, paused before its boundary pauseAt, with second in
// that pause, in e emptied, and returns what went wrong ("" when nothing
// did).
func exploreRun(e *exploreEnv, fx exploreFixture, first, second exploreStep, pauseAt int32) string {
	e.t.Helper()
	e.reset()
	fx.setup(e)
	op1 := &exploreOp{pauseAt: pauseAt, paused: make(chan struct{}), resume: make(chan struct{})}
	defer op1.release()
	op2 := &exploreOp{pauseAt: -1}
	ctx1, cancel1 := context.WithTimeout(context.WithValue(ctxBG, exploreKey{}, op1), hangBound)
	defer cancel1()
	ctx2, cancel2 := context.WithTimeout(context.WithValue(ctxBG, exploreKey{}, op2), hangBound)
	defer cancel2()

	var r1, r2 exploreResult
	done1, done2 := make(chan struct{}), make(chan struct{})
	go func() { defer close(done1); r1.ack, r1.err = first.run(ctx1, e) }()
	select {
	case <-op1.paused:
	case <-done1:
	}
	go func() { defer close(done2); r2.ack, r2.err = second.run(ctx2, e) }()
	waitEndOrLockWait(e, op2, done2)
	op1.release() // first may have ended before its boundary pauseAt
	<-done1
	<-done2

	var problems []string
	for _, r := range []struct {
		step exploreStep
		res  exploreResult
	}{{first, r1}, {second, r2}} {
		if r.res.err != nil && !expectedRefusal(r.res.err) {
			problems = append(problems, fmt.Sprintf("  %s failed unexpectedly: %v", r.step.name, r.res.err))
		}
	}
	for _, op := range []*exploreOp{op1, op2} {
		for _, o := range op.order {
			problems = append(problems, "  lock order broken (retried): "+o)
		}
	}
	problems = append(problems, exploreVerify(e, r1.ack, r2.ack)...)
	if len(problems) == 0 {
		return ""
	}
	return fmt.Sprintf("  %s: %v\n  %s: %v\n%s", first.name, errOrOK(r1.err), second.name, errOrOK(r2.err), strings.Join(problems, "\n"))
}

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// expectedRefusal: the outcomes an operation may meet when another one
// changed the world under it (a refusal naming why), as opposed to a raw
// error, a lock bound or a deadlock.
func expectedRefusal(err error) bool {
	switch engine.Code(err) {
	case engine.CodeNotFound, engine.CodeInvalid, engine.CodeConflict, engine.CodeExhausted, engine.CodeAddressInUse,
		engine.CodeAddressCooling, engine.CodeOwnerConflict, engine.CodeHoldLost:
		return true
	}
	return false
}

// waitEndOrLockWait returns once the operation has ended or its backend
// waits for a lock.
func waitEndOrLockWait(e *exploreEnv, op *exploreOp, done chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		if pid := op.pid.Load(); pid != 0 {
			var waiting bool
			err := e.raw.QueryRow(e.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`,
				pid).Scan(&waiting)
			if err != nil {
				e.t.Fatal(err)
			}
			if waiting {
				return
			}
		}
		select {
		case <-done:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// exploreVerify checks the invariants and the model after a run.
func exploreVerify(e *exploreEnv, acks ...exploreAck) []string {
	var out []string
	rep, err := engine.OperatorOf(e.st).Check(e.ctx, "")
	if err != nil {
		return []string{fmt.Sprintf("  check: %v", err)}
	}
	for _, v := range rep.Violations {
		out = append(out, fmt.Sprintf("  invariant %s: %s %s %s", v.Invariant, v.PoolID, v.Address, v.Detail))
	}
	forced := false
	var took []engine.Owner
	for _, a := range acks {
		forced = forced || a.forced
		took = append(took, a.took...)
	}
	for _, a := range acks {
		for _, h := range a.held {
			if forced || slices.ContainsFunc(took, func(o engine.Owner) bool { return o.Kind == h.Owner.Kind && o.ID == h.Owner.ID }) {
				continue
			}
			// By the address in its cluster: the one row it has there.
			var state, owner string
			err := e.raw.QueryRow(e.ctx, `SELECT state, coalesce(owner_id, '') FROM ipam_allocations WHERE cluster_id = $1 AND address = $2`,
				h.ClusterID, netip.PrefixFrom(h.Address, h.Address.BitLen())).Scan(&state, &owner)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				out = append(out, fmt.Sprintf("  %s was told it holds %s, and its row is gone", h.Owner.ID, h.Address))
			case err != nil:
				out = append(out, fmt.Sprintf("  read %s: %v", h.Address, err))
			case state != engine.StateActive || owner != h.Owner.ID:
				out = append(out, fmt.Sprintf("  %s was told it holds %s, which is now %s by %s", h.Owner.ID, h.Address, state, owner))
			case a.origin != "":
				var origin string
				if err := e.raw.QueryRow(e.ctx, `SELECT coalesce(CASE WHEN origin_generation = generation THEN origin END, '')
					FROM ipam_allocations WHERE cluster_id = $1 AND address = $2`, h.ClusterID,
					netip.PrefixFrom(h.Address, h.Address.BitLen())).Scan(&origin); err != nil || origin != a.origin {
					out = append(out, fmt.Sprintf("  the configuration in %s was told it manages %s's %s, which records %q (%v)",
						a.origin, h.Owner.ID, h.Address, origin, err))
				}
			}
		}
	}
	// A live tombstone inside an operator pool that it binds, with no row
	// at its address: the pool was created or grew without inheriting it.
	rows, err := e.raw.Query(e.ctx, `SELECT t.address::text, p.id FROM ipam_tombstones t JOIN ipam_pools p
		ON p.category IN ('ipv4', 'ipv6') AND p.kind <> 'parked' AND t.address <<= ANY (p.cidrs) AND NOT t.address <<= ANY (p.exclude)
			AND t.scope = ipam_tombstone_scope(t.address, p.cluster_id)
		WHERE t.reusable_at > ipam_now()
			AND NOT EXISTS (SELECT 1 FROM ipam_allocations a WHERE a.cluster_id = p.cluster_id AND a.address = t.address)`)
	if err == nil {
		var addr, pool string
		_, err = pgx.ForEachRow(rows, []any{&addr, &pool}, func() error {
			out = append(out, fmt.Sprintf("  pool %s did not inherit the tombstone %s", pool, addr))
			return nil
		})
	}
	if err != nil {
		out = append(out, fmt.Sprintf("  read tombstones: %v", err))
	}
	// An address active in two clusters, or in two rows of one: whatever
	// Check's own rules forgive.
	var dups int
	if err := e.raw.QueryRow(e.ctx, `SELECT count(*) FROM (SELECT address FROM ipam_allocations WHERE state = 'active'
		GROUP BY address HAVING count(*) > 1) d`).Scan(&dups); err != nil {
		out = append(out, fmt.Sprintf("  count duplicates: %v", err))
	} else if dups > 0 {
		out = append(out, fmt.Sprintf("  %d addresses are active twice", dups))
	}
	return out
}

// explorePairs are the pairs of operations the explorer drives, by fixture.
// The ones marked short run in make test; make soak (IPAM_SOAK=1) runs all.
var explorePairs = []struct {
	short bool
	fx    exploreFixture
	a, b  exploreStep
}{
	// An expired plan-time hold confirmed while its pool shrinks or is destroyed.
	{true, fixtureV4(true, true), stepConfirm, stepShrink},
	{true, fixtureV4(true, false), stepConfirm, poolDestroyStep(false)},
	{true, fixtureV4(true, false), stepConfirm, clusterDestroyStep(false)},
	{true, fixtureV4(true, true), stepConfirm, stepExclude},
	{false, fixtureV4(true, false), stepConfirm, poolDestroyStep(true)},
	{false, fixtureV4(true, false), stepConfirm, clusterDestroyStep(true)},
	// The same with a live hold (the shrink and the destroys refuse).
	{false, fixtureV4(false, true), stepConfirm, stepShrink},
	{false, fixtureV4(false, false), stepConfirm, poolDestroyStep(false)},
	{false, fixtureV4(false, false), stepConfirm, clusterDestroyStep(false)},
	// Allocations, holds and releases against the pool's shape writers.
	{true, fixtureV4(true, true), stepAllocFresh, stepShrink},
	{true, fixtureV4(true, true), stepAllocExact, stepShrink},
	{true, fixtureV4(true, false), stepAllocFresh, poolDestroyStep(false)},
	{false, fixtureV4(true, false), stepAllocExact, poolDestroyStep(false)},
	{false, fixtureV4(true, true), stepAllocExact, stepExclude},
	{false, fixtureV4(true, true), stepHold, stepShrink},
	{false, fixtureV4(true, false), stepHold, poolDestroyStep(false)},
	{true, fixtureV4(true, false), stepAllocNode, clusterDestroyStep(false)},
	{false, fixtureV4(true, false), stepAllocFresh, clusterDestroyStep(false)},
	{false, fixtureV4(true, true), stepRelease, poolDestroyStep(false)},
	{false, fixtureV4(true, true), stepRelease, stepAllocFresh},
	// Two allocations racing each other.
	{false, fixtureV4(true, true), stepConfirm, stepAllocExact},
	{false, fixtureV4(true, true), stepConfirm, stepAllocFresh},
	// A caller's transaction, a set, a new pool, a cluster update.
	{true, fixtureV4(true, true), stepEnvInTx, stepShrink},
	{false, fixtureV4(true, false), stepEnvInTx, poolDestroyStep(false)},
	{false, fixtureV4(true, true), stepSetApply, stepShrink},
	{false, fixtureV4(true, false), stepSetApply, poolDestroyStep(false)},
	{false, fixtureV4(true, false), stepPoolCreate, clusterDestroyStep(false)},
	{false, fixtureV4(true, true), stepAllocNode, stepClusterUpdate},
	// A node's blocks: placements, holds and releases against scaling and release.
	{true, fixtureBlocks, stepInstanceOnNode, stepReleaseBlocks},
	// Two placements that both find the node full: one grows it, neither
	// waits for the other's pool lock while holding the scaling lock.
	{true, fixtureBlocksFull, stepInstanceOnNode, stepInstanceInTx},
	// Two placement transactions of two instances each: their first ones
	// fill the node, their second ones grow it, and neither growth waits
	// for the other's first placement.
	{false, fixtureBlocksTwoFree, placeTwoInTx("i7", "i8"), placeTwoInTx("i9", "i10")},
	// Two placement transactions in a mixed fleet: each places an instance
	// from the cluster's pool (n0 has no blocks), then one on its own full
	// node, whose fresh block's carve waits for neither's first placement.
	{false, fixtureMixedFleet, placeInTx(placed{"i7", "n0"}, placed{"i8", "n1"}), placeInTx(placed{"i9", "n0"}, placed{"i10", "n2"})},
	{true, fixtureBlocks, stepInstanceInTx, stepReleaseBlocks},
	{true, fixtureBlocks, stepConfirmI2, stepReleaseBlocks},
	{false, fixtureBlocks, stepInstanceOnNode, stepScaleBlocks},
	{false, fixtureBlocks, stepConfirmI2, stepScaleBlocks},
	{false, fixtureBlocks, stepHoldOnNode, stepReleaseBlocks},
	{false, fixtureBlocks, stepReleaseI1, stepReleaseBlocks},
	{false, fixtureBlocks, stepScaleBlocks, stepReleaseBlocks},
	{false, fixtureBlocks, stepInstanceOnNode, stepClusterUpdate},
	{false, fixtureBlocks, stepInstanceOnNode, clusterDestroyStep(true)},
	// An operator's forced release of e0 against a replacement that moves
	// it, its own release, and the pool's shrink.
	{true, fixtureV4(true, true), stepOpReleaseE0, stepReplaceE0},
	{false, fixtureV4(true, true), stepOpReleaseE0, stepRelease},
	{false, fixtureV4(true, true), stepOpReleaseE0, stepShrink},
	// An operator's reclaim, and a pool that grows.
	{true, fixtureV4Stale, stepReclaim, stepRefresh},
	{true, fixtureV4(true, true), stepRelease, stepShrink},
	{false, fixtureV4Stale, stepReclaim, stepRelease},
	{false, fixtureV4Stale, stepReclaim, stepConfirm},
	{false, fixtureV4Stale, stepReclaim, stepShrink},
	{false, fixtureV4(true, true), stepGrow, stepAllocFresh},
	{false, fixtureV4(true, true), stepGrow, stepConfirm},
	// Destroys that leave tombstones against the pools that must inherit
	// them, and forced destroys and sets against a node's blocks.
	{true, fixtureV4Cooling, poolDestroyStep(false), stepPoolCreateOver},
	{false, fixtureV4Cooling, clusterDestroyStep(false), stepPoolCreateOver},
	{false, fixtureV4Cooling, poolDestroyStep(true), stepPoolCreateOver},
	{true, fixtureBlocks, stepHoldOnNode, clusterDestroyStep(true)},
	// A replacement that moves its owner's address, against a release of
	// the same owner and the pool's shape writers.
	{true, fixtureV4(true, true), stepReplaceE0, stepDestroyOldE0},
	{false, fixtureV4(true, true), stepReplaceE0, stepShrink},
	{false, fixtureV4(true, true), stepReplaceE0, stepAllocExact},
	// A replacement's create that keeps the address, while its plan marks
	// the allocation: it takes it over at its address, or is refused.
	{true, fixtureV4Confirmed, stepCreateE0Again, stepMarkE0},
	// The replacement's create of another configuration's allocation
	// against that configuration's release without a generation.
	{true, fixtureV4MarkedBy("/cfg/b", "/cfg/a"), stepCreateE0AsA, stepReleaseE0AsA},
	// A configuration's replacement of another's allocation against that
	// configuration's plan marking it again.
	{true, fixtureV4MarkedBy("/cfg/a", "/cfg/b"), stepCreateE0AsB, stepMarkE0AsA},
	// The same replacement for another org, which moves the owner.
	{true, fixtureV4MarkedBy("/cfg/a", "/cfg/b"), stepMoveE0AsB, stepMarkE0AsAKept},
	// An owner's claim of an address against the owner getting another
	// address, then another owner taking the claimed one.
	{true, fixtureV4(true, true), stepClaimE9, stepE9ThenE10},
	{false, fixtureBlocks, stepConfirmI2, clusterDestroyStep(true)},
	{false, fixtureBlocks, stepSetOnNode, stepReleaseBlocks},
	{false, fixtureBlocks, stepSetOnNode, stepScaleBlocks},
	// A set key and a placement that both find the node full: one grows
	// it (the set with the node's scaling locks taken first), the other
	// lands in the new block, and neither waits for the other in a cycle.
	// A growth against a release or a scaling of the node's blocks: the
	// growth takes the scaling's locks in the scaling's order.
	{true, fixtureBlocksFull, stepSetOnNode, stepInstanceOnNode},
	{true, fixtureBlocksFull, stepInstanceOnNode, stepReleaseBlocks},
	{false, fixtureBlocksFull, stepSetOnNode, stepReleaseBlocks},
	{false, fixtureBlocksFull, stepSetOnNode, stepRescaleBlocks},
	{false, fixtureBlocksFull, stepInstanceOnNode, stepRescaleBlocks},
	// A set key's new request while its pool's shape changes.
	{true, fixtureV4Set, stepSetRestate, stepShrink},
	{false, fixtureV4Set, stepSetRestate, stepExclude},
	{false, fixtureV4Set, stepSetRestate, poolDestroyStep(false)},
	// Two changes of one set: the second waits for the first.
	{true, fixtureV4(true, true), stepSetMoveToA, stepSetApplyAt("b", "203.0.113.2")},
	// A set's create-first replacement against its old object's destroy.
	{true, fixtureV4Set, stepReplaceSet, stepDestroyOldSet},
	{false, fixtureV4Set, stepReplaceSet, stepShrink},
	// Two configurations creating one owner: never both its managers.
	{true, fixtureV4(true, true), stepCreateE8A, stepCreateE8B},
}

// TestExploreInterleavings runs every pair of explorePairs through every
// interleaving of their statements (the short ones in make test, all in
// make soak) and fails on any run that breaks an invariant, loses an
// acknowledged allocation or breaks the lock order.
//
// Not parallel with the package's other tests: it runs before them, so that
// the timing-sensitive races among them do not share the machine with it.
// Its pairs run in parallel with each other (go test's -parallel at a time):
// each pair has a database of its own, and the explorer's schedule waits for
// locks, never for time. Alone, one pair at a time kept the machine's two
// cores 66 % busy.
func TestExploreInterleavings(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the interleaving explorer runs in the full tier (make test) and in make soak")
	}
	soak := os.Getenv("IPAM_SOAK") != ""
	for _, p := range explorePairs {
		if !p.short && !soak {
			continue
		}
		t.Run(fmt.Sprintf("%s x %s [%s]", p.a.name, p.b.name, p.fx.name), func(t *testing.T) {
			t.Parallel()
			explorePair(t, p.fx, p.a, p.b)
		})
	}
}
