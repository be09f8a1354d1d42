package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"
	"golang.org/x/sync/singleflight"
)

// conn is a client's connection machinery, shared by every view of it
// (InTx, Peek): the pool, the address it may name (never the secret), the
// bounds on waits, and how calls ride out a database with no usable server.
type conn struct {
	pool   dbPool
	addr   string
	secret string
	bounds bounds
	// failover bounds how long a call retries while no usable server
	// answers (see retryConn).
	failover time.Duration
	// onWait: Config.OnWait.
	onWait func(context.Context, Wait)
	// downSince (unix nanos) is when the failure began that a call rode out
	// for the whole failover bound in vain; 0 once a call succeeds. downCut:
	// that call's bound was the first contact's (FirstContactTimeout).
	downSince atomic.Int64
	downCut   atomic.Bool
	// cutFirstContact: the failover bound is the default, so a call waits
	// FirstContactTimeout only while nothing is there and no server has
	// answered yet (answered: a call succeeded once).
	cutFirstContact bool
	answered        atomic.Bool
	// looks shares one look for a lock's holders among the calls that ask
	// at once (lookOnce): when a lock holds up every connection of the pool
	// and more calls queue for one, they all reach their lock bound together,
	// and each would otherwise open a connection of its own for its look.
	looks singleflight.Group
	// asideSlot admits one connection of aside's own at a time: a client
	// opens at most one connection beyond its pool.
	asideSlot chan struct{}
	// noRecord: the role may not write, as a refresh's record found:
	// refreshes read without it from then on.
	noRecord atomic.Bool
}

// dbPool is the store's pgx pool. Every call on it rides out a database
// with no usable server up to the store's failover bound (see retryConn):
// acquiring a connection, a read (QueryRow, Query until its first row,
// Exec), the BEGIN of a transaction. What runs inside a transaction is
// retried by withTx, which runs the whole transaction again.
//
// It also picks the statement mode (see Client.StatementMode): pgx's named
// prepared statements (cache_statement, prepared once per connection) until
// a statement fails for want of them, as it does through a transaction
// pooler, then, for good, unnamed statements with cached descriptions
// (cache_describe): a new pool, and the call runs again.
type dbPool struct {
	sw *poolSwitch
	s  *conn
}

// poolSwitch is the pool a store's calls use now, shared by its InTx views.
type poolSwitch struct {
	cur atomic.Pointer[pgxpool.Pool]
	mu  sync.Mutex
	// cfg makes the describing pool; nil when the mode is fixed (set in
	// the connection string, or a pool the caller made).
	cfg *pgxpool.Config
	// retired is the pool switched away from: closed a minute later (calls
	// that picked it up just before the switch finish on it) or with the
	// store.
	retired *pgxpool.Pool
	// closed: the client's Close was called. A pool given to New stays
	// open, and the client's calls fail as on a closed pool all the same.
	closed atomic.Bool
}

func newDBPool(s *conn, pool *pgxpool.Pool, switchable *pgxpool.Config) dbPool {
	sw := &poolSwitch{cfg: switchable}
	sw.cur.Store(pool)
	return dbPool{sw: sw, s: s}
}

// get is the pool to use now.
func (p dbPool) get() *pgxpool.Pool { return p.sw.cur.Load() }

// Close closes the pool, and its retired predecessor; a borrowed pool
// (New) is only marked closed to the client (markClosed).
func (p dbPool) Close() {
	p.markClosed()
	p.sw.mu.Lock()
	retired := p.sw.retired
	p.sw.mu.Unlock()
	if retired != nil {
		retired.Close()
	}
	p.get().Close()
}

// markClosed makes every later call of the client fail as on a closed pool
// (puddle.ErrClosedPool, which mapErr names), whoever owns the pool.
func (p dbPool) markClosed() { p.sw.closed.Store(true) }

// isClosed: the client was closed.
func (p dbPool) isClosed() bool { return p.sw.closed.Load() }

func (p dbPool) Stat() *pgxpool.Stat                                { return p.get().Stat() }
func (p dbPool) Acquire(ctx context.Context) (*pgxpool.Conn, error) { return p.get().Acquire(ctx) }

// describeStatements switches the store from named prepared statements to
// unnamed ones when err says a named statement failed as only a
// transaction pooler makes it fail: one session's statement missing on the
// server connection another transaction got (26000), or already prepared
// there by another client (42P05). It reports whether the call should run
// again. The old pool closes a minute later (or with the store).
func (p dbPool) describeStatements(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || (pe.Code != pgerrcode.DuplicatePreparedStatement && pe.Code != pgerrcode.InvalidSQLStatementName) {
		return false
	}
	p.sw.mu.Lock()
	defer p.sw.mu.Unlock()
	if p.sw.cfg == nil {
		return p.get().Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheDescribe
	}
	cfg := p.sw.cfg.Copy()
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	np, nerr := pgxpool.NewWithConfig(context.Background(), cfg)
	if nerr != nil {
		return false
	}
	old := p.sw.cur.Swap(np)
	p.sw.cfg = nil
	p.sw.retired = old
	time.AfterFunc(time.Minute, old.Close)
	return true
}

// A statement outside a transaction has no SET LOCAL bounds on its waits (a
// transaction's are sent with its BEGIN; a fast statement sets its own in
// its batch), and preparing a statement, the first time a connection runs
// it, waits for the locks of its tables before any setting could apply. So
// a read that met an operator's ACCESS EXCLUSIVE lock (VACUUM FULL, a
// non-concurrent index build, LOCK TABLE) waited for as long as it was held.
// waitGuard bounds such a statement until its first result: past the lock
// bound, if a session holds a strong lock on the IPAM's tables, the
// statement is cancelled and fails with ErrBusy naming the holder; past the
// statement bound, with ErrTimeout. Once the first result is in, the guard
// is disarmed, and reading the rest is the caller's business.
type waitGuard struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	timer  *time.Timer // the armed timer (the second one once the first re-arms)
	// report tells OnWait, each WaitReportInterval, of a strong lock on
	// the IPAM's tables while the statement waits: what a statement outside
	// a transaction waits for (nil: no OnWait).
	report   *time.Timer
	disarmed bool
}

// guard arms a waitGuard for a statement run with ctx; nil (and ctx as it
// is) when the store has no bounds.
func (p dbPool) guard(ctx context.Context) (context.Context, *waitGuard) {
	s := p.s
	lock, stmt := s.bounds.lock, s.bounds.statement
	if lock <= 0 && stmt <= 0 {
		return ctx, nil
	}
	g := &waitGuard{}
	g.ctx, g.cancel = context.WithCancelCause(ctx)
	first := lock
	if first <= 0 || (stmt > 0 && stmt < lock) {
		first = stmt
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.onWait != nil {
		start := time.Now()
		g.report = time.AfterFunc(s.firstLook(), func() { g.reportWait(s, start) })
	}
	g.timer = time.AfterFunc(first, func() {
		fired := time.Now()
		var busy error
		if lock > 0 && first == lock {
			// The look asks until the statement ends or its own bound
			// would have (the re-armed timer below then fires at once).
			lctx, cancel := context.WithTimeout(g.ctx, s.lookWindow())
			h := s.lockHolders(lctx)
			cancel()
			if h != "" {
				busy = &BusyError{What: "waiting for a lock another session holds; held: " + scrub(h, s.secret), Timeout: lock}
			}
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		switch {
		case g.disarmed:
		case busy != nil:
			g.cancel(busy)
		case stmt > 0 && stmt > first:
			g.timer = time.AfterFunc(max(stmt-first-time.Since(fired), 0), func() {
				g.mu.Lock()
				defer g.mu.Unlock()
				if !g.disarmed {
					g.cancel(g.timeout(stmt))
				}
			})
		case stmt > 0:
			g.cancel(g.timeout(stmt))
		}
	})
	return g.ctx, g
}

// reportWait tells OnWait that the guarded statement, unanswered since
// start, waits while a session holds a strong lock on the IPAM's tables
// (an operator's LOCK TABLE, VACUUM FULL, an index build): a statement
// outside a transaction waits for nothing else. Then again each interval.
func (g *waitGuard) reportWait(s *conn, start time.Time) {
	lctx, cancel := context.WithTimeout(g.ctx, lookBound)
	h := s.lockHolders(lctx)
	cancel()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.disarmed {
		return
	}
	if h != "" {
		s.onWait(g.ctx, Wait{Addr: s.addr, Waited: time.Since(start), Bound: s.bounds.lock, Lock: true, Holders: scrub(h, s.secret)})
	}
	g.report.Reset(WaitReportInterval)
}

func (g *waitGuard) timeout(d time.Duration) error {
	return &TimeoutError{What: "the statement did not answer", Timeout: d}
}

// disarm stops the guard: the statement's first result is in.
func (g *waitGuard) disarm() {
	if g != nil {
		g.mu.Lock()
		g.disarmed = true
		g.timer.Stop()
		if g.report != nil {
			g.report.Stop()
		}
		g.mu.Unlock()
	}
}

// end disarms the guard and releases its context: the statement is done.
func (g *waitGuard) end() {
	if g != nil {
		g.cancel(nil)
		g.disarm()
	}
}

// why is the guard's own error when it cancelled the statement, else err.
func (g *waitGuard) why(err error) error {
	if g == nil || err == nil {
		return err
	}
	if cause := context.Cause(g.ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		var busy *BusyError
		var timeout *TimeoutError
		if errors.As(cause, &busy) || errors.As(cause, &timeout) {
			return cause
		}
	}
	return err
}

func (p dbPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return retryRow{p: p, ctx: ctx, sql: sql, args: args}
}

// retryRow runs its query when scanned, again while no usable server answers.
type retryRow struct {
	p    dbPool
	ctx  context.Context
	sql  string
	args []any
}

func (r retryRow) Scan(dest ...any) error {
	return r.p.s.retryConn(r.ctx, func() error {
		gctx, g := r.p.guard(r.ctx)
		defer g.end()
		return g.why(r.p.get().QueryRow(gctx, r.sql, r.args...).Scan(dest...))
	})
}

func (p dbPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	r := &retryRows{p: p, ctx: ctx, sql: sql, args: args}
	err := p.s.retryConn(ctx, func() error {
		var err error
		gctx, g := p.guard(ctx)
		if r.Rows, err = p.get().Query(gctx, sql, args...); err != nil {
			g.end()
			return g.why(err)
		}
		r.guard = g
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// retryRows runs its query again when it fails for want of a usable server
// before its first row (after a row, the failure is the caller's).
type retryRows struct {
	pgx.Rows
	p        dbPool
	ctx      context.Context
	sql      string
	args     []any
	seen     bool
	switched bool // the statement mode was switched for this query once
	first    time.Time
	attempt  int
	reported int        // the waits reported so far (pause)
	guard    *waitGuard // the current query's, disarmed at its first result
}

func (r *retryRows) Next() bool {
	for {
		if r.Rows.Next() {
			r.seen = true
			r.guard.disarm()
			return true
		}
		r.guard.disarm()
		err := r.Err()
		switch {
		case r.seen:
			return false
		case !r.switched && r.p.describeStatements(err):
			r.switched = true
		case r.p.s.failover > 0 && failoverError(err) && r.p.s.readOnlyRefusal(r.ctx, err) == nil:
			if r.first.IsZero() {
				r.first = time.Now()
			}
			if !r.p.s.pause(r.ctx, r.attempt, r.first, r.p.s.failover, false, err, &r.reported) {
				return false
			}
			r.attempt++
		default:
			return false
		}
		// On a failure to query again, r.Rows keeps the failure it had, and
		// the next round judges it again (waiting again, within the bound).
		gctx, g := r.p.guard(r.ctx)
		if rows, qerr := r.p.get().Query(gctx, r.sql, r.args...); qerr == nil {
			r.guard.end()
			r.Rows, r.guard = rows, g
		} else {
			g.end()
		}
	}
}

// Err is the query's failure: the guard's own when it cancelled the query,
// a ReadOnlyError for a write refused that ctx can do without.
func (r *retryRows) Err() error {
	err := r.guard.why(r.Rows.Err())
	if ro := r.p.s.readOnlyRefusal(r.ctx, err); ro != nil {
		return ro
	}
	return err
}

// Close closes the rows and releases the guard.
func (r *retryRows) Close() {
	r.Rows.Close()
	r.guard.end()
}

func (p dbPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := p.s.retryConn(ctx, func() error {
		var err error
		gctx, g := p.guard(ctx)
		defer g.end()
		tag, err = p.get().Exec(gctx, sql, args...)
		return g.why(err)
	})
	return tag, err
}

// SendBatch sends a batch. A fast statement's batch (it starts with
// sqlFastBounds) bounds its own waits; any other is guarded until it is
// closed.
func (p dbPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := p.ready(ctx); err != nil {
		return errBatch{err}
	}
	if len(b.QueuedQueries) > 0 && b.QueuedQueries[0].SQL == sqlFastBounds {
		// As the pool's own SendBatch does, with the connection's backend
		// watched for a lock wait while the batch runs (watchLocks).
		c, err := p.get().Acquire(ctx)
		if err != nil {
			return errBatch{err}
		}
		// Watched from before it is sent: pgx prepares a batch's new
		// statements inside SendBatch, and preparing waits for the locks
		// of their tables (an operator's LOCK TABLE).
		watch := p.s.watchLocks(ctx, c.Conn().PgConn().PID())
		return &watchedBatch{BatchResults: c.Conn().SendBatch(ctx, b), c: c, watch: watch}
	}
	gctx, g := p.guard(ctx)
	return guardedBatch{BatchResults: p.get().SendBatch(gctx, b), guard: g}
}

// watchedBatch is a fast statement's batch on a connection of its own,
// watched for lock waits until it is closed.
type watchedBatch struct {
	pgx.BatchResults
	c     *pgxpool.Conn
	watch *lockWatch
}

func (b *watchedBatch) Close() error {
	b.watch.end()
	err := b.BatchResults.Close()
	b.c.Release()
	return err
}

// heldIn is err, the failure of the batch br, with the lock's holders its
// watch saw when a lock wait ended it (lockWatch.held).
func heldIn(br pgx.BatchResults, err error) error {
	if wb, ok := br.(*watchedBatch); ok {
		return wb.watch.held(err)
	}
	return err
}

// guardedBatch reports the guard's error for a batch it cancelled, and
// releases it on Close.
type guardedBatch struct {
	pgx.BatchResults
	guard *waitGuard
}

func (b guardedBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, b.guard.why(err)
}

func (b guardedBatch) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	return rows, b.guard.why(err)
}

func (b guardedBatch) QueryRow() pgx.Row {
	return guardedRow{Row: b.BatchResults.QueryRow(), guard: b.guard}
}

func (b guardedBatch) Close() error {
	err := b.BatchResults.Close()
	b.guard.end()
	return b.guard.why(err)
}

type guardedRow struct {
	pgx.Row
	guard *waitGuard
}

func (r guardedRow) Scan(dest ...any) error { return r.guard.why(r.Row.Scan(dest...)) }

func (p dbPool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	var tx pgx.Tx
	err := p.s.retryConn(ctx, func() error {
		var err error
		tx, err = p.get().BeginTx(ctx, opts)
		return err
	})
	return tx, err
}

func (p dbPool) Ping(ctx context.Context) error {
	return p.s.retryConn(ctx, func() error { return p.get().Ping(ctx) })
}

// ready acquires a connection, retrying while no server is usable, and puts
// it back for the call that follows (the one-statement fast path, whose
// failure falls back to the full path in withTx).
func (p dbPool) ready(ctx context.Context) error {
	return p.s.retryConn(ctx, func() error {
		c, err := p.Acquire(ctx)
		if err != nil {
			return err
		}
		c.Release()
		return nil
	})
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// retryConn runs fn again, with backoff, while it fails because no usable
// server answered (see failoverError), until the store's failover bound has
// passed since the first such failure. fn must be safe to repeat: it may
// have failed after its commit reached the server. Other failures return at
// once. Past the bound the last failure is returned, marked with the time
// waited.
//
// Once a call has waited the whole bound in vain, the store is down: later
// calls try once and fail at once, without waiting again, until one
// succeeds. So an apply of many resources during a long outage fails after
// one bound, not one bound per resource.
//
// With the default bound, a call of a client that no server has answered
// yet, finding nothing there at every host, waits FirstContactTimeout only.
func (s *conn) retryConn(ctx context.Context, fn func() error) error {
	var first time.Time
	reported := 0 // the waits reported so far (pause)
	// absent: every failure of this call so far found nothing there, and
	// no server has answered the client yet (see FirstContactTimeout).
	absent := s.cutFirstContact
	if s.pool.isClosed() {
		return puddle.ErrClosedPool
	}
	for attempt := 0; ; attempt++ {
		err := fn()
		if err != nil && s.pool.describeStatements(err) {
			err = fn()
		}
		if err == nil {
			s.answered.Store(true)
			if attempt > 0 || s.downSince.Load() != 0 {
				s.downSince.Store(0)
			}
			return nil
		}
		if ro := s.readOnlyRefusal(ctx, err); ro != nil {
			s.answered.Store(true)
			return ro
		}
		if s.failover <= 0 || !failoverError(err) || ctx.Err() != nil {
			return err // a refusal, or the caller gave up: nothing to wait out
		}
		if down := s.downSince.Load(); down != 0 {
			return &waitedError{err: err, waited: time.Since(time.Unix(0, down)), bound: s.failover, firstContact: s.downCut.Load()}
		}
		absent = absent && !s.answered.Load() && nothingThere(err)
		bound := s.failover
		if absent {
			bound = min(bound, FirstContactTimeout)
		}
		if first.IsZero() {
			first = time.Now()
		}
		if !s.pause(ctx, attempt, first, bound, absent, err, &reported) {
			if ctx.Err() != nil {
				return &waitedError{err: errors.Join(ctx.Err(), err), waited: time.Since(first), bound: s.failover}
			}
			if s.downSince.CompareAndSwap(0, first.UnixNano()) {
				s.downCut.Store(absent)
			}
			return &waitedError{err: err, waited: time.Since(first), bound: s.failover, firstContact: absent}
		}
	}
}

// writesOptionalKey marks the context of a call whose writes its caller
// can do without (WritesOptional).
type writesOptionalKey struct{}

// WritesOptional marks ctx for calls whose writes the caller can do without:
// a plan-time hold, a refresh's record that it saw an allocation, a mark for
// a replacement or a confirmation. A read-only server (a standby, or a
// primary being demoted in a switchover) refuses such a write at once, with
// a ReadOnlyError, instead of being waited out as a failover: a plan against
// a standby, or during a switchover, goes on without the write (its
// addresses "known after apply", its records at the next refresh) rather
// than waiting failover_timeout for each, and then failing. Reads are not
// refused by a read-only server, and every other write still rides out the
// failover.
func WritesOptional(ctx context.Context) context.Context {
	return context.WithValue(ctx, writesOptionalKey{}, true)
}

// readOnlyRefusal is err as a ReadOnlyError when a read-only server refused
// a write that ctx marks as one its caller can do without; nil otherwise.
func (s *conn) readOnlyRefusal(ctx context.Context, err error) error {
	var pe *pgconn.PgError
	if ctx.Value(writesOptionalKey{}) == nil || !errors.As(err, &pe) || pe.Code != pgerrcode.ReadOnlySQLTransaction {
		return nil
	}
	return &ReadOnlyError{Msg: "the server is read-only (" + scrub(pe.Message, s.secret) + "; a standby or a demoted primary)", err: err}
}

// nothingThere reports whether err says that nothing is there at any host
// of the database: each refused the connection (nothing listens on the
// port), has no socket file (a Unix socket's directory without one), has no
// route, or has a name that does not resolve. A server that
// restarts or fails over mostly answers something (starting up, shutting
// down, read-only) or is slow to answer; this is mostly a wrong host or port.
func nothingThere(err error) bool {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return false
	}
	errs := hostErrors(ce)
	for _, e := range errs {
		var dnsErr *net.DNSError
		switch {
		case errors.Is(e, syscall.ECONNREFUSED), errors.Is(e, syscall.EHOSTUNREACH), errors.Is(e, syscall.ENETUNREACH),
			errors.Is(e, syscall.ENOENT):
		case errors.As(e, &dnsErr) && dnsErr.IsNotFound:
		default:
			return false
		}
	}
	return len(errs) > 0
}

// pause waits before the next attempt of a call that found no usable server
// (jittered backoff growing to a second); false when bound, counted from
// first, is spent or ctx is done. Each time the wait has crossed a multiple
// of WaitReportInterval not reported yet (*reported counts them, for the
// call), it tells the client's OnWait what it waits for (err, the last
// failure), so that no wait is silent: also when the multiple was crossed
// during an attempt rather than a pause (a slow connect on a busy machine).
func (s *conn) pause(ctx context.Context, attempt int, first time.Time, bound time.Duration, firstContact bool, err error, reported *int) bool {
	before := time.Since(first)
	left := bound - before
	if left <= 0 {
		return false
	}
	d := min(50*time.Millisecond<<min(attempt, 5), time.Second)
	d = min(d/2+rand.N(d), left)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
	}
	if after := time.Since(first); s.onWait != nil && int(after/WaitReportInterval) > *reported {
		*reported = int(after / WaitReportInterval)
		w := Wait{Addr: s.addr, Waited: after, Bound: bound, FirstContact: firstContact}
		if cf, ok := s.connFailure(err); ok {
			w.Last = cf
		}
		s.onWait(ctx, w)
	}
	return true
}

// waitedError is a failure that persisted for the failover bound (or, when
// firstContact, for FirstContactTimeout: see retryConn).
type waitedError struct {
	err          error
	waited       time.Duration
	bound        time.Duration
	firstContact bool
}

func (e *waitedError) Error() string { return e.err.Error() }
func (e *waitedError) Unwrap() error { return e.err }

// failoverError reports whether err says that no usable server answered, as
// during a switchover or a failover, rather than that one refused us: the
// connection was lost or refused, the server is shutting down, starting up
// or terminated the session (57P01..57P03), it is read-only (a standby, or a
// demoted primary), or every host tried answered one of these.
func failoverError(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		answers := hostErrors(ce)
		if len(answers) == 0 {
			return !refusedAtStart(ce)
		}
		for _, a := range answers {
			if refusedAtStart(a) {
				return false
			}
		}
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == pgerrcode.ReadOnlySQLTransaction, pe.Code == pgerrcode.AdminShutdown,
			pe.Code == pgerrcode.CrashShutdown, pe.Code == pgerrcode.CannotConnectNow:
			return true
		case pe.Code == pgerrcode.ProtocolViolation:
			// PgBouncer answers 08P01 both for what it refuses and for a
			// server behind it that it cannot reach now.
			return !refusedForGood(pe)
		case strings.HasPrefix(pe.Code, "08"):
			return true
		}
		return false
	}
	return isConnError(err)
}

// refusedForGood reports whether a server answered and refused us for good:
// bad credentials, a database or role that does not exist, a startup
// parameter a pooler does not accept, a certificate that does not verify.
// Retrying cannot help.
func refusedForGood(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "28"), pe.Code == pgerrcode.InvalidCatalogName, pe.Code == pgerrcode.FeatureNotSupported:
			return true
		case pe.Code == pgerrcode.ProtocolViolation:
			// PgBouncer's refusals; its other 08P01 answers ("pgbouncer cannot
			// connect to server", "server conn crashed?") pass with a failover.
			m := strings.ToLower(pe.Message)
			return strings.Contains(m, "unsupported") || strings.Contains(m, "no such") ||
				strings.Contains(m, "authentication") || strings.Contains(m, "password")
		}
		return false
	}
	if badCertificate(err) || notPostgres(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "server refused TLS") || strings.Contains(msg, "require_auth") ||
		strings.Contains(msg, "channel binding")
}

// refusedAtStart is refusedForGood for a server's answer to a connection's
// start, which also refuses for good a startup setting it does not take
// (options=-c with a value out of range or malformed: class 22; a setting
// it does not know: 42704). Mid-session, such codes name a statement's
// input, not the connection.
func refusedAtStart(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || pe.Code == pgerrcode.UndefinedObject) {
		return true
	}
	return refusedForGood(err)
}

// notPostgres reports whether what answered does not speak PostgreSQL's
// protocol (an HTTP server, another service on that port): its first bytes
// read as a message too long or of no known type. Retrying cannot help.
func notPostgres(err error) bool {
	var tooLong *pgproto3.ExceededMaxBodyLenErr
	return errors.As(err, &tooLong) || strings.Contains(err.Error(), "unknown message type")
}

// badCertificate reports whether the server's certificate failed our
// verification (sslmode=verify-ca / verify-full): an unknown CA, a name that
// does not match, an expired certificate.
func badCertificate(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci) ||
		strings.Contains(err.Error(), "x509: ")
}

// hostErrors are the per-host errors of a connection attempt over several
// hosts (or the one of a single host).
func hostErrors(ce *pgconn.ConnectError) []error {
	inner := ce.Unwrap()
	if j, ok := inner.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if inner == nil {
		return nil
	}
	return []error{inner}
}

// hostAnswer says what one host answered, without credentials: "host:port
// refused the connection", "host:port is read-only (a standby)", ...
func hostAnswer(err error, secret string) string {
	msg := err.Error()
	host := ""
	if i := strings.Index(msg, " ("); i > 0 && !strings.ContainsAny(msg[:i], " \t") {
		host = msg[:i] + " "
	}
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case badCertificate(err):
		return host + "presented a certificate that does not verify (" + scrub(rootCause(err), secret) + ")"
	case notPostgres(err):
		return host + "does not speak the PostgreSQL protocol (another service answers on that port: check the host and port)"
	case errors.Is(err, pgconn.ErrReadOnlyConnection):
		return host + "is read-only (a standby or a demoted primary; target_session_attrs=read-write skips it)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return host + "refused the connection (nothing listens there)"
	case errors.Is(err, syscall.ENOENT):
		return host + "has no socket file (no PostgreSQL listens in that directory on that port)"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return host + "dropped the connection"
	case errors.As(err, &pe):
		switch {
		case pe.Code == pgerrcode.ReadOnlySQLTransaction:
			return host + "is read-only (" + scrub(pe.Message, secret) + "; a standby or a demoted primary)"
		case pe.Code == pgerrcode.AdminShutdown, pe.Code == pgerrcode.CrashShutdown:
			return host + "terminated the session (" + scrub(pe.Message, secret) + ")"
		case pe.Code == pgerrcode.CannotConnectNow:
			return host + "is not accepting connections (" + scrub(pe.Message, secret) + ")"
		case strings.HasPrefix(pe.Code, "28"):
			return host + "rejected the credentials (" + scrub(pe.Message, secret) + ")"
		case pe.Code == pgerrcode.InvalidCatalogName:
			return host + "has no such database (" + scrub(pe.Message, secret) + ")"
		case pe.Code == pgerrcode.ProtocolViolation && !refusedForGood(pe):
			return host + "(a pooler) cannot reach its server (" + scrub(pe.Message, secret) + ")"
		case pe.Code == pgerrcode.ProtocolViolation, pe.Code == pgerrcode.FeatureNotSupported:
			return host + "refused the session (" + scrub(pe.Message, secret) + ")"
		case pe.Code == pgerrcode.TooManyConnections:
			return host + "has no connection slot left (" + scrub(pe.Message, secret) + ")"
		}
		return host + "answered " + pe.Code + " (" + scrub(pe.Message, secret) + ")"
	case errors.As(err, &ne) && ne.Timeout():
		return host + "did not answer in time (connect_timeout)"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return host + "cannot be resolved (" + dnsErr.Err + ")"
	}
	return host + scrub(rootCause(err), secret)
}

// connFailure turns a failure to reach a usable server into the core's error:
// RefusedError when a server answered and refused us, else UnavailableError
// naming what each host answered. ok is false when err is no such failure.
func (s *conn) connFailure(err error) (error, bool) {
	var waited, bound time.Duration
	firstContact := false
	var we *waitedError
	if errors.As(err, &we) {
		waited, bound, firstContact = we.waited, we.bound, we.firstContact
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		var answers []string
		refused, reached, full := true, false, false
		errs := hostErrors(ce)
		for _, e := range errs {
			// sslmode=prefer tries each host twice (TLS, then plain): one answer each.
			if a := hostAnswer(e, s.secret); !slices.Contains(answers, a) {
				answers = append(answers, a)
			}
			refused = refused && refusedAtStart(e)
			var pe *pgconn.PgError
			reached = reached || errors.As(e, &pe) || errors.Is(e, pgconn.ErrReadOnlyConnection)
			full = full || (pe != nil && pe.Code == pgerrcode.TooManyConnections)
		}
		if len(errs) == 0 {
			answers = []string{scrub(rootCause(err), s.secret)}
			refused = refusedAtStart(ce)
		}
		if refused {
			return &RefusedError{Addr: s.addr, Answers: answers}, true
		}
		return &UnavailableError{Addr: s.addr, Reached: reached, NoSlots: full, Answers: answers, Waited: waited, Bound: bound,
			FirstContact: firstContact, Err: errors.New(strings.Join(answers, "; "))}, true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && refusedForGood(pe) {
		return &RefusedError{Addr: s.addr, Answers: []string{hostAnswer(pe, s.secret)}}, true
	}
	neverConnected := errors.Is(err, context.DeadlineExceeded) && !s.connected()
	if failoverError(err) || neverConnected {
		what := scrub(rootCause(err), s.secret)
		if errors.As(err, &pe) {
			what = hostAnswer(pe, s.secret)
		}
		// A session that was lost or refused mid-way had reached a server.
		return &UnavailableError{Addr: s.addr, Reached: !neverConnected, Answers: []string{what}, Waited: waited, Bound: bound,
			Err: errors.New(what)}, true
	}
	return nil, false
}

// RefusedError: a server answered but refused the connection or the
// session for good (credentials, database, a startup parameter a pooler does
// not accept), or its certificate failed our verification: retrying cannot
// help. Answers carry the server's
// message, never the password.
type RefusedError struct {
	Addr    string
	Answers []string
}

func (e *RefusedError) Code() string { return CodeRefused }

// Is matches ErrRefused.
func (e *RefusedError) Is(target error) bool { return isCode(CodeRefused, target) }
func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s: the connection to the IPAM database at %s was refused: %s", CodeRefused, e.Addr, strings.Join(e.Answers, "; "))
}

// bounds are the per-transaction settings of a store's waits.
type bounds struct{ lock, statement time.Duration }

func newBounds(lock, statement time.Duration) bounds {
	if lock == 0 {
		lock = DefaultLockTimeout
	}
	if statement == 0 {
		statement = DefaultStatementTimeout
	}
	return bounds{max(lock, 0), max(statement, 0)}
}

// setLocal is the bounds as SET LOCAL statements (0: no bound).
func (b bounds) setLocal() string {
	return fmt.Sprintf(sqlTxBoundsFormat, b.lock.Milliseconds(), b.statement.Milliseconds(), TxSettings)
}

// lockSetting and statementSetting are the bounds as set_config values
// (milliseconds; 0: no bound).
func (b bounds) lockSetting() string      { return strconv.FormatInt(b.lock.Milliseconds(), 10) }
func (b bounds) statementSetting() string { return strconv.FormatInt(b.statement.Milliseconds(), 10) }

var urlSecret = regexp.MustCompile(`(://[^:/@\s]*:)[^@\s]*@|(password\s*=\s*)('[^']*'|\S+)`)

// scrub removes a password, and anything shaped like one, from text.
func scrub(text, secret string) string {
	if secret != "" {
		text = strings.ReplaceAll(text, secret, "xxxxx")
	}
	return urlSecret.ReplaceAllString(text, "${1}${2}xxxxx@")
}

func isConnError(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ce), errors.As(err, &ne):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	case errors.As(err, &pe):
		// 08: connection exception; 57P01..57P05: shutdown, crash, cannot connect now.
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P")
	case pgconn.SafeToRetry(err):
		return true
	}
	return strings.Contains(err.Error(), "conn closed")
}

// lockHolders names the sessions holding strong locks on the IPAM's tables
// (what an operator's LOCK TABLE or a long migration takes), for a busy
// error: "" when none is found or visible, or when no look answered before
// ctx ended. A look reads only the server's views, so the store's bounds do
// not apply to it (bounded like any statement, a look that took longer than
// the lock bound ended itself, and the busy caller waited out its statement
// bound and was told of a timeout); it runs in the simple protocol (nothing
// to prepare, through a pooler too), each look for at most lookBound
// (lookOnce), and asks again while it gets no answer.
func (s *conn) lockHolders(ctx context.Context) string {
	h, _ := s.lockHoldersSeen(ctx)
	return h
}

// lockHoldersSeen is lockHolders, and whether a look got an answer at all
// (false: the server, or a pooler's server connection, did not answer
// before ctx ended).
func (s *conn) lockHoldersSeen(ctx context.Context) (string, bool) {
	for {
		out, err := s.lookOnce(ctx)
		if err == nil {
			return out, true
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(lookBound / 20):
		}
	}
}

// lookOnce is one look for a lock's holders, shared with the calls that ask
// while it runs: it runs for at most lookBound whichever of them leaves.
func (s *conn) lookOnce(ctx context.Context) (string, error) {
	ch := s.looks.DoChan("", func() (any, error) {
		lctx, cancel := context.WithTimeout(context.Background(), lookBound)
		defer cancel()
		return s.look(lctx)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return "", r.Err
		}
		return r.Val.(string), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// look reads a lock's holders, aside from the calls it names.
func (s *conn) look(ctx context.Context) (string, error) {
	var out string
	err := s.aside(ctx, s.pool.get(), func(q querier) error {
		return q.QueryRow(ctx, sqlLockHolders, pgx.QueryExecModeSimpleProtocol).Scan(&out)
	})
	return out, err
}

// querier is what pgx.Tx, *pgx.Conn, *pgxpool.Pool and the store's pool
// have in common.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// aside runs fn on a connection that does not queue behind the calls in
// flight: onPool (the pool) while it has an idle connection or room for one
// more, else a connection of its own (one at a time: a client has at most one
// beyond its pool), closed after fn. It is for work about those calls that a
// connection of theirs cannot do: the look for the holders of a lock they
// wait on, the record of a failure that must outlive a caller's rollback.
// Every connection of the pool may be theirs, and only their ends give one
// back. Its own connection runs unnamed statements (nothing left behind on a
// pooler's server connection).
// errAsideBusy: the connection aside was another look's for as long as
// the look could wait (the server was not asked).
var errAsideBusy = errors.New("the connection aside is busy")

func (s *conn) aside(ctx context.Context, onPool querier, fn func(querier) error) error {
	p := s.pool.get()
	if st := p.Stat(); st.IdleConns() > 0 || st.TotalConns() < st.MaxConns() {
		return fn(onPool)
	}
	select {
	case s.asideSlot <- struct{}{}:
		defer func() { <-s.asideSlot }()
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errAsideBusy, ctx.Err())
	}
	// Made as the pool makes its connections: its hooks too (a caller's
	// pool may set the session up in them).
	pc := p.Config()
	cfg := pc.ConnConfig
	cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	if pc.BeforeConnect != nil {
		if err := pc.BeforeConnect(ctx, cfg); err != nil {
			return err
		}
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()
	if pc.AfterConnect != nil {
		if err := pc.AfterConnect(ctx, c); err != nil {
			return err
		}
	}
	return fn(c)
}

// lockHoldersNow is lockHolders for a failure already in hand (the server's
// lock_timeout, a take's bound): it asks for at most lookWindow.
func (s *conn) lockHoldersNow() string {
	h, _ := s.lockHoldersNowSeen()
	return h
}

// lockHoldersNowSeen is lockHoldersNow, and whether a look got an answer.
func (s *conn) lockHoldersNowSeen() (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), s.lookWindow())
	defer cancel()
	return s.lockHoldersSeen(ctx)
}

// lookWindow is how long a busy call asks for the lock's holders: what is
// left of its statement bound past the lock bound, as a statement outside a
// transaction asks (guard), and at least one look's bound. A statement in a
// transaction, bounded by lock_timeout, is told of the holders as surely.
func (s *conn) lookWindow() time.Duration {
	return max(s.bounds.statement-s.bounds.lock, lookBound)
}

// watchLocks reports, while a transaction of the client runs on backend
// pid (tryTx), each WaitReportInterval that it waits for a lock another
// session holds: how long, and who holds it up (sqlLockWait, read aside
// from the transaction's own connection), so that a lock wait is never
// silent until its bound is spent; and that the look aside had no answer
// either (Wait.Stalled: a stopped or overloaded server). Each statement waits up to the lock
// bound for each lock, so a call may wait several bounds in all. The
// returned watch stops it, and tells the holders it saw last, so that a
// call that then runs out of its lock bound names them (heldBy). Through a
// transaction pooler pid is the pooler's, no backend's: nothing is
// reported.
func (s *conn) watchLocks(ctx context.Context, pid uint32) *lockWatch {
	w := &lockWatch{}
	if s.onWait == nil || pid == 0 {
		return w
	}
	var mu sync.Mutex
	stopped := false
	start := time.Now()
	var t *time.Timer
	t = time.AfterFunc(s.firstLook(), func() {
		lctx, cancel := context.WithTimeout(ctx, lookBound)
		var waited float64
		var holders string
		err := s.aside(lctx, s.pool.get(), func(q querier) error {
			return q.QueryRow(lctx, sqlLockWait, pgx.QueryExecModeSimpleProtocol, int64(pid)).Scan(&waited, &holders)
		})
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		switch {
		case err == nil && waited >= 0:
			w.last.Store(&holders)
			s.onWait(ctx, Wait{Addr: s.addr, Waited: time.Duration(waited * float64(time.Second)), Bound: s.bounds.lock,
				Lock: true, Holders: holders})
		case ctx.Err() == nil && !errors.Is(err, errAsideBusy) && (pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded)):
			// No answer aside either, while the call waits for its own.
			s.onWait(ctx, Wait{Addr: s.addr, Waited: time.Since(start), Bound: s.bounds.statement, Stalled: true})
		}
		t.Reset(WaitReportInterval)
	})
	w.stop = func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
	return w
}

// firstLook is when a call that waits first looks for what holds it up:
// before a bound (the lock's, the statement's) is half spent, so that a
// call bounded by less than twice the interval still learns who held it up
// (heldBy); the next looks come every interval.
func (s *conn) firstLook() time.Duration {
	first := WaitReportInterval
	for _, b := range []time.Duration{s.bounds.lock, s.bounds.statement} {
		if b > 0 {
			first = min(first, b/2)
		}
	}
	return first
}

// lockWatch is watchLocks' watch of one call.
type lockWatch struct {
	stop func()
	last atomic.Pointer[string] // the holders of the last lock wait seen
}

// end stops the watch (again: it may be called more than once).
func (w *lockWatch) end() {
	if w.stop != nil {
		w.stop()
	}
}

// held is err, or, when a lock wait ended it (lock_timeout, or
// statement_timeout while it waited), err with the holders seen last
// (heldBy), which the busy or timeout error then names.
func (w *lockWatch) held(err error) error {
	var pe *pgconn.PgError
	if h := w.last.Load(); h != nil && *h != "" && errors.As(err, &pe) &&
		(pe.Code == pgerrcode.LockNotAvailable || pe.Code == pgerrcode.QueryCanceled) {
		return &heldBy{err: err, holders: *h}
	}
	return err
}

// heldBy is a lock wait's failure with the sessions that held the lock, as
// the call's last wait report saw them.
type heldBy struct {
	err     error
	holders string
}

func (e *heldBy) Error() string { return e.err.Error() }
func (e *heldBy) Unwrap() error { return e.err }

// lookBound bounds one look for a lock's holders.
const lookBound = 2 * time.Second

func (s *conn) connected() bool { return s.pool.Stat().TotalConns() > 0 }

// rootCause keeps the useful tail of a connection error ("connection refused").
func rootCause(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		tail := msg[i+2:]
		if len(tail) > 8 {
			return tail
		}
	}
	return msg
}
