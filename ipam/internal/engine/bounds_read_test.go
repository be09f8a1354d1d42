package engine_test

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// Seam: waits were bounded for writes (SET LOCAL lock_timeout in every
// transaction of the core) but not for statements outside a transaction:
// with an operator's transaction holding ACCESS EXCLUSIVE on a table (as
// VACUUM FULL, a non-concurrent index build or LOCK TABLE do), the refresh
// read, a plan's first look for its hold, listings and the schema check
// waited for as long as it was held. Each now fails with ipam_busy, naming
// the holder, once the lock bound has passed; each runs on a new client, so
// that the statement is also prepared under the lock, which is where a
// fresh provider process waits.
func TestReadsWaitAtMostTheLockBound(t *testing.T) {
	t.Parallel()
	url := clusterDB(t, "n1")
	ctx := context.Background()
	for _, tc := range []struct {
		name, table string
		call        func(context.Context, *engine.Client) error
	}{
		{"the refresh read", "ipam_allocations", func(ctx context.Context, st *engine.Client) error {
			_, err := st.GetActive(ctx, "c1", engine.OwnerNode, "n1")
			return err
		}},
		{"a plan's hold", "ipam_allocations", func(ctx context.Context, st *engine.Client) error {
			_, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n2")}, time.Hour)
			return err
		}},
		{"a lookup by address", "ipam_allocations", func(ctx context.Context, st *engine.Client) error {
			_, err := st.FindActiveByAddress(ctx, netip.MustParseAddr("2001:db8::1"))
			return err
		}},
		{"a listing", "ipam_allocations", func(ctx context.Context, st *engine.Client) error {
			_, err := engine.OperatorOf(st).ListAllocations(ctx, engine.ListFilter{ClusterID: "c1"})
			return err
		}},
		{"the schema check", engine.VersionTable, func(ctx context.Context, st *engine.Client) error {
			return st.CheckSchema(ctx)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lockExclusive(t, url, tc.table)
			// The bound is short: it is waited for in full (some calls
			// wait it more than once), and only ipam_busy, below, says
			// that the bound ended the wait.
			st, err := engine.Open(ctx, engine.Config{DatabaseURL: url, Actor: "terraform", LockTimeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			// A hang fails here rather than at the test's own timeout: a
			// bound on hangs, generous for a busy machine, not on speed.
			cctx, cancel := context.WithTimeout(ctx, hangBound)
			defer cancel()
			err = tc.call(cctx, st)
			if engine.Code(err) != engine.CodeBusy || !strings.Contains(err.Error(), "AccessExclusiveLock") {
				t.Fatalf("%s under an ACCESS EXCLUSIVE lock on %s: %v, want ipam_busy naming the holder", tc.name, tc.table, err)
			}
		})
	}
}

// A busy statement is named busy even when the look-up of the lock's
// holders cannot answer at first: the look-up asks again until it answers or
// the statement bound ends, and the store's own bounds never end it (it
// reads only the server's views). Here the look-up's view is locked for
// longer than one look-up may take (2 s): the read was answered ipam_timeout
// after its whole statement bound, as it was under load when the look-up,
// bounded by the lock bound like any statement, ended itself.
func TestLockHolderLookupThatCannotAnswerAtFirst(t *testing.T) {
	t.Parallel()
	url := clusterDB(t)
	ctx := context.Background()
	lockExclusive(t, url, "ipam_allocations")
	views := lockExclusive(t, url, "pg_locks") // what the look-up reads
	go func() {
		time.Sleep(3 * time.Second)
		_ = views.Rollback(ctx)
	}()
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: url, Actor: "terraform",
		LockTimeout: 100 * time.Millisecond, StatementTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cctx, cancel := context.WithTimeout(ctx, hangBound)
	defer cancel()
	start := time.Now()
	_, err = engine.OperatorOf(st).ListAllocations(cctx, engine.ListFilter{ClusterID: "c1"})
	if engine.Code(err) != engine.CodeBusy || !strings.Contains(err.Error(), "AccessExclusiveLock") {
		t.Fatalf("a listing under an ACCESS EXCLUSIVE lock, its holders' look-up held up 3 s: %v (after %s), want ipam_busy naming the holder",
			err, time.Since(start).Round(time.Millisecond))
	}
}

// clusterDB is a test database with cluster c1 (2001:db8::/48) and a node
// address for each of nodes.
func clusterDB(t *testing.T, nodes ...string) string {
	t.Helper()
	url := testdb.New(t)
	ctx := context.Background()
	setup, err := engine.Open(ctx, engine.Config{DatabaseURL: url, Actor: "terraform"})
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	mkCluster(t, setup, "c1", "2001:db8::/48", "", "")
	for _, n := range nodes {
		if _, err := setup.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node(n)}); err != nil {
			t.Fatal(err)
		}
	}
	return url
}

// lockExclusive takes table's ACCESS EXCLUSIVE lock in a transaction of a
// session of its own, held until the test ends or the transaction is rolled
// back.
func lockExclusive(t *testing.T, url, table string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(ctx) })
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return tx
}

// Reads that take every connection of the client's pool and wait on an
// operator's lock, with more queued for a connection, are still told
// ipam_busy at the lock bound: the look-up of the lock's holders does not
// queue behind them for a connection, and the calls that reach their bound
// together share one look, not a connection each.
func TestLockHolderLookupWithEveryConnectionWaiting(t *testing.T) {
	t.Parallel()
	url := clusterDB(t, "n1")
	ctx := context.Background()
	lockExclusive(t, url, "ipam_allocations")
	const pool, readers = 2, 24
	var probe connectProbe
	st := probe.client(t, url, pool, engine.Config{Actor: "terraform", LockTimeout: 100 * time.Millisecond, StatementTimeout: 30 * time.Second})
	cctx, cancel := context.WithTimeout(ctx, hangBound)
	defer cancel()
	errs := make(chan error, readers)
	start := time.Now()
	for range readers {
		go func() {
			_, err := st.GetActive(cctx, "c1", engine.OwnerNode, "n1")
			errs <- err
		}()
	}
	for range readers {
		if err := <-errs; engine.Code(err) != engine.CodeBusy || !strings.Contains(err.Error(), "AccessExclusiveLock") {
			t.Fatalf("%d refresh reads on a pool of %d connections under an ACCESS EXCLUSIVE lock: %v (after %s), want ipam_busy naming the holder",
				readers, pool, err, time.Since(start).Round(time.Millisecond))
		}
	}
	// One look answers every read whose bound ends while it runs; a loaded
	// machine may spread the bounds' ends over a few looks, never one each.
	if made := probe.made.Load(); made > readers/4 {
		t.Errorf("%d connections beside the pool for the looks of %d reads that reached their lock bound together, want them to share a few", made, readers)
	}
}

// connectProbe watches the connections a client makes beside its pool (a
// pool of its own, full before it arms): how many, and the most being made
// at once, each held up 50 ms in the pool's BeforeConnect hook.
type connectProbe struct {
	armed           atomic.Bool
	made, now, most atomic.Int32
}

// client is a client over a pool of conns connections at url, each made,
// with the probe armed once they all are.
func (p *connectProbe) client(t *testing.T, url string, conns int32, cfg engine.Config) *engine.Client {
	t.Helper()
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = conns
	pc.BeforeConnect = p.connect
	db, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	var held []*pgxpool.Conn
	for range conns {
		c, err := db.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	p.armed.Store(true)
	st, err := engine.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

func (p *connectProbe) connect(context.Context, *pgx.ConnConfig) error {
	if !p.armed.Load() {
		return nil
	}
	p.made.Add(1)
	n := p.now.Add(1)
	defer p.now.Add(-1)
	for m := p.most.Load(); n > m && !p.most.CompareAndSwap(m, n); m = p.most.Load() {
	}
	time.Sleep(50 * time.Millisecond)
	return nil
}

// A call that waits for a lock another session holds is reported while it
// waits, each WaitReportInterval: how long and who holds it up (the
// holder's pid, application and state), so that a wait up to lock_timeout,
// and a call that waits for several locks in turn, is never silent. Both
// kinds of calls: a transaction of the full path (an operator's release),
// and a one-statement allocation (the fast path most Terraform plans and
// applies take). The call then goes on when the holder lets the lock go.
func TestALockWaitIsReportedWhileItLasts(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	var log waitLog
	holder, calls := lockWaitWorld(t, url, 30*time.Second, log.record)
	queued, err := pgx.Connect(ctx, url+"&application_name=queued-behind-it")
	if err != nil {
		t.Fatal(err)
	}
	defer queued.Close(ctx)
	for i, c := range calls {
		tx, err := holder.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM ipam_pools WHERE id = 'c1/v4' FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
		queuedDone := make(chan error, 1)
		if i == 1 {
			// Another session queued for the lock ahead of the call: the
			// report names the session that holds it, not the queue.
			go func() {
				_, err := queued.Exec(ctx, `SELECT 1 FROM ipam_pools WHERE id = 'c1/v4' FOR UPDATE`)
				queuedDone <- err
			}()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				var n int
				if err := holder.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'queued-behind-it'
					AND wait_event_type = 'Lock'`).Scan(&n); err != nil || n > 0 || time.Now().After(deadline) {
					break
				}
			}
		} else {
			queuedDone <- nil
		}
		w := log.reportedWhileHeld(t, c, func() error { return tx.Commit(ctx) })
		if err := <-queuedDone; err != nil {
			t.Fatal(err)
		}
		s := w.String()
		if !w.Lock || w.Waited < 3*time.Second || w.Bound != 30*time.Second || !strings.Contains(s, "waiting for a lock") ||
			!strings.Contains(s, "holder-of-the-pool") || !strings.Contains(s, "idle in transaction") || !strings.Contains(s, "of 30 s (lock_timeout)") ||
			strings.Contains(s, "queued-behind-it") {
			t.Fatalf("%s: reported %+v: %s", c.name, w, s)
		}
		t.Logf("%s: reported: %s", c.name, s)
		if strings.Contains(s, "password") || strings.Contains(s, url) {
			t.Fatalf("the report carries the connection string: %s", s)
		}
	}
}

// A call that runs out of its lock bound waiting for a row lock names the
// session that held it (ipam_busy), as its last wait report saw it: the
// look it made at the error names only strong table locks, and found
// nothing. Both kinds of calls, as above; with a lock bound of 3 s too,
// shorter than the reports' interval (the first look comes at half the
// bound: it came at 5 s, and a call bounded by less was never told); and
// with no lock bound and a statement bound of 3 s, whose ipam_timeout names
// the holder too (it blamed an overloaded server). Found by a trial as an
// operator.
func TestALockWaitThatRunsOutNamesItsHolder(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		lock, statement time.Duration
		code            string
	}{{6 * time.Second, 0, engine.CodeBusy}, {3 * time.Second, 0, engine.CodeBusy}, {-1, 3 * time.Second, engine.CodeTimeout}} {
		url := testdb.New(t)
		ctx := context.Background()
		holder, calls := lockWaitWorld(t, url, b.lock, func(context.Context, engine.Wait) {}, b.statement)
		tx, err := holder.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM ipam_pools WHERE id = 'c1/v4' FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			err := c.call()
			if engine.Code(err) != b.code || !strings.Contains(err.Error(), "holder-of-the-pool") {
				t.Errorf("%s under a row lock held past its bound (lock %s, statement %s): %v, want %s naming the holder",
					c.name, b.lock, b.statement, err, b.code)
			}
			t.Logf("%s: %v", c.name, err)
		}
		_ = tx.Rollback(ctx)
	}
}

// lockCall is a call of lockWaitWorld's that waits for the pool's lock.
type lockCall struct {
	name string
	call func() error
}

// lockWaitWorld opens a client with the lock bound and OnWait given on the
// database at url, with cluster c1 and its pool c1/v4 (env e1 holds an
// address in it), a connection that can hold the pool's lock
// (application_name holder-of-the-pool), and the two kinds of calls that
// then wait for it: an operator's release of e1 (a transaction), and an
// allocation of e2 (one statement).
func lockWaitWorld(t *testing.T, url string, lockTimeout time.Duration, onWait func(context.Context, engine.Wait), statementTimeout ...time.Duration) (*pgx.Conn, []lockCall) {
	t.Helper()
	ctx := context.Background()
	cfg := engine.Config{DatabaseURL: url, Actor: "terraform", LockTimeout: lockTimeout, OnWait: onWait}
	if len(statementTimeout) > 0 {
		cfg.StatementTimeout = statementTimeout[0]
	}
	st, err := engine.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour, CIDRs: prefixes("198.51.100.0/29")}); err != nil {
		t.Fatal(err)
	}
	env := func(id string) engine.Owner {
		return engine.Owner{Kind: engine.OwnerEnvIPv4, ID: id, OrgID: "acme", EnvID: id}
	}
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: testdb.Pool("c1/v4"), Owner: env("e1")}); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(ctx, url+"&application_name=holder-of-the-pool")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close(context.Background()) })
	return holder, []lockCall{
		{"an operator's release (a transaction)", func() error {
			_, err := engine.OperatorOf(st).ReleaseAllocation(ctx, engine.ReleaseRequest{ClusterID: "c1", OwnerKind: engine.OwnerEnvIPv4,
				OwnerID: "e1", Reason: "test", Force: true})
			return err
		}},
		{"an allocation (one statement)", func() error {
			_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: testdb.Pool("c1/v4"), Owner: env("e2")})
			return err
		}},
	}
}

// A call that waits for an operator's strong lock on a table (LOCK TABLE,
// VACUUM FULL, a non-concurrent index build) is reported while it waits, as
// a call waiting for a row lock is: a refresh's read (one statement outside
// a transaction), an operator's listing (a read-only transaction) and an
// allocation. The reads were silent until their bound ran out (found by a
// trial as a new team, behind LOCK TABLE ... IN EXCLUSIVE MODE).
func TestATableLockWaitIsReportedWhileItLasts(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	var log waitLog
	holder, _ := lockWaitWorld(t, url, 30*time.Second, log.record)
	st := openClient(t, engine.Config{DatabaseURL: url, Actor: "terraform", LockTimeout: 30 * time.Second, OnWait: log.record})
	for _, c := range []lockCall{
		{"a refresh's read (one statement)", func() error {
			_, err := st.GetActive(ctx, "c1", engine.OwnerEnvIPv4, "e1")
			return err
		}},
		{"an operator's listing (a read-only transaction)", func() error {
			_, err := engine.OperatorOf(st).ListAllocations(ctx, engine.ListFilter{ClusterID: "c1"})
			return err
		}},
		{"an allocation", func() error {
			_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: testdb.Pool("c1/v4"),
				Owner: engine.Owner{Kind: engine.OwnerEnvIPv4, ID: "e3", OrgID: "acme", EnvID: "e3"}})
			return err
		}},
	} {
		tx, err := holder.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE ipam_allocations IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		w := log.reportedWhileHeld(t, c, func() error { return tx.Commit(ctx) })
		if s := w.String(); !w.Lock || !strings.Contains(s, "holder-of-the-pool") || !strings.Contains(s, "of 30 s (lock_timeout)") {
			t.Fatalf("%s: reported %+v: %s", c.name, w, s)
		}
		t.Logf("%s: reported: %s", c.name, w.String())
	}
}

// waitLog records what OnWait is told, for a test to read.
type waitLog struct {
	mu    sync.Mutex
	waits []engine.Wait
}

func (l *waitLog) record(_ context.Context, w engine.Wait) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waits = append(l.waits, w)
}

func (l *waitLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waits = nil
}

// reportedWhileHeld runs c while a lock it waits for is held, until a wait
// is reported (20 s at most), then lets the lock go (release): the call
// must then succeed. It returns the first report.
func (l *waitLog) reportedWhileHeld(t *testing.T, c lockCall, release func() error) engine.Wait {
	t.Helper()
	l.reset()
	done := make(chan error, 1)
	go func() { done <- c.call() }()
	for deadline := time.Now().Add(20 * time.Second); len(l.all()) == 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("%s after the lock was let go: %v", c.name, err)
	}
	waits := l.all()
	if len(waits) == 0 {
		t.Fatalf("%s: no wait was reported while it waited for the lock", c.name)
	}
	return waits[0]
}

// all is a copy of what was told since the last reset.
func (l *waitLog) all() []engine.Wait {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]engine.Wait(nil), l.waits...)
}
