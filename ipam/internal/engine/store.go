package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"
)

// Client is the IPAM over one pgx pool. It is safe for concurrent use.
type Client struct {
	// conn: the pool and how calls reach the database; shared with the
	// views InTx and Peek make.
	*conn
	actor string
	// planRun: Config.PlanRun.
	planRun string
	// origin: Config.Origin. originSetting is the statement that gives it
	// to the database for each transaction (ipam.origin, which the row
	// trigger records with every allocation it sees become active: the
	// manager is written by the statement that allocates), "" when none.
	origin        string
	originSetting string
	// borrowed: the pool is the caller's (New), and Close leaves it open.
	borrowed bool
	// outer, when set, is the caller's transaction: writes run inside it
	// (see InTx) and commit or roll back with it.
	outer pgx.Tx
	// outerErr is why outer cannot carry the core's statements (its
	// connection's query mode: checkExecMode), returned by each call in it.
	outerErr error
	// peek: reads record no refresh (see Peek).
	peek bool
	// shared gathers concurrent allocations of one pool into one
	// statement (shareTake); shared with InTx's copies.
	shared *coalescer
	// paths counts the allocations and holds that ran the full path, and
	// can turn the fast paths off; shared with InTx's copies.
	paths *pathStats
}

// pathStats is what the path-conformance tests see of the hand-out paths:
// how many calls ran the full path (the fast statement handed nothing out,
// or failed), and a switch that sends every call there. A fast statement
// that lacks a guard hands over to the full path (the database refuses
// what it would have handed out), so the full path's count is how a test
// tells a missing guard from a served call.
type pathStats struct {
	full    atomic.Int64
	fastOff atomic.Bool
}

// New makes a client over the caller's pool; Close does not close it. It
// takes the same Config as Open, whose connection fields (DatabaseURL,
// MaxConnections, ConnectTimeout) must then be left unset: the pool is the
// caller's, made as the caller chose. In a caller's transaction (InTx) the
// caller's own settings bound its waits, and a lost connection ends that
// transaction: the call fails at once and the caller retries the whole
// transaction.
func New(pool *pgxpool.Pool, cfg Config) (*Client, error) {
	if pool == nil {
		return nil, &InvalidError{Field: "pool", Msg: "a pgx pool is required"}
	}
	switch {
	case cfg.DatabaseURL != "":
		return nil, invalid("database_url", "New uses the pool it is given: leave DatabaseURL unset (Open makes a pool from it)")
	case cfg.MaxConnections != 0:
		return nil, invalid("max_connections", "New uses the pool it is given: leave MaxConnections unset and size the pool you pass")
	case cfg.ConnectTimeout != 0:
		return nil, invalid("connect_timeout", "New uses the pool it is given: leave ConnectTimeout unset and set it on the pool you pass")
	}
	if err := checkFilterIDs("actor", cfg.Actor); err != nil {
		return nil, err
	}
	if err := ValidateOrigin(cfg.Origin); err != nil {
		return nil, err
	}
	cc := pool.Config().ConnConfig
	if err := checkExecMode("pool", cc.DefaultQueryExecMode); err != nil {
		return nil, err
	}
	if ambiguousUserinfo(pool.Config()) {
		return nil, &InvalidError{Field: "pool", Msg: "the password (or user) of its connection string " + unescapedAt}
	}
	c := newClient(pool, nil, net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))), cc.Password, cfg)
	c.borrowed = true
	return c, nil
}

// newClient makes a client over pool. switchable, when not nil, is the pool's
// configuration, from which the store may make a pool with unnamed
// statements (see dbPool).
func newClient(pool *pgxpool.Pool, switchable *pgxpool.Config, addr, secret string, cfg Config) *Client {
	if cfg.Actor == "" {
		cfg.Actor = DefaultActor
	}
	failover := cfg.FailoverTimeout
	if failover == 0 {
		failover = DefaultFailoverTimeout
	}
	c := &conn{addr: addr, secret: secret, bounds: newBounds(cfg.LockTimeout, cfg.StatementTimeout), failover: max(failover, 0),
		onWait: cfg.OnWait, cutFirstContact: cfg.FailoverTimeout == 0, asideSlot: make(chan struct{}, 1)}
	c.pool = newDBPool(c, pool, switchable)
	return &Client{conn: c, actor: cfg.Actor, planRun: cfg.PlanRun, origin: cfg.Origin, originSetting: originSetting(cfg.Origin),
		shared: &coalescer{pools: map[string]*poolQueue{}}, paths: &pathStats{}}
}

// originSetting is the SET LOCAL of ipam.origin sent with each BEGIN (""
// for no origin). The origin is quoted as a string literal that reads the
// same whatever standard_conforming_strings is: quotes doubled, and with a
// backslash, an escape string whose backslashes are doubled.
func originSetting(origin string) string {
	if origin == "" {
		return ""
	}
	lit := "'" + strings.ReplaceAll(origin, "'", "''") + "'"
	if strings.Contains(origin, `\`) {
		lit = "E'" + strings.ReplaceAll(strings.ReplaceAll(origin, `\`, `\\`), "'", "''") + "'"
	}
	return "; SET LOCAL ipam.origin = " + lit
}

// begin opens a transaction of the store's own: the one place that does, so
// that every transaction carries the bounds on its waits (SET LOCAL, sent
// with the BEGIN in one round trip). iso "" is the server's default.
func (s *Client) begin(ctx context.Context, iso pgx.TxIsoLevel, readOnly bool) (pgx.Tx, error) {
	q := "BEGIN"
	if iso != "" {
		q += " ISOLATION LEVEL " + strings.ToUpper(string(iso))
	}
	if readOnly {
		q += " READ ONLY"
	}
	return s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: q + "; " + s.bounds.setLocal() + s.originSetting})
}

// InTx is a view of the store whose writes (allocations, releases, their
// events) run inside the caller's transaction tx, each in a savepoint, and so
// commit or roll back with the caller's own rows. The transaction must be READ
// COMMITTED, the allocator's isolation, on a connection whose query mode has
// the server describe statements (checkExecMode: not exec or
// simple_protocol; each call in a view of such a transaction refuses it). A
// nil tx gives the store itself.
// Failures are recorded outside tx (they outlive its rollback); reads that
// need no lock read committed data outside it.
func (s *Client) InTx(tx pgx.Tx) *Client {
	if tx == nil {
		return s
	}
	c := *s
	c.outer = tx
	if s.pool.isClosed() {
		c.outerErr = s.mapErr(puddle.ErrClosedPool)
		return &c
	}
	if v := reflect.ValueOf(tx); v.Kind() == reflect.Pointer && v.IsNil() {
		// A typed nil (a *pgxpool.Tx never begun, say): not "no
		// transaction", which the caller would take its call for.
		c.outerErr = &InvalidError{Field: "tx", Msg: fmt.Sprintf("is a nil %T: pass a transaction begun with BeginTx, or nil itself for a transaction of the client's own", tx)}
		return &c
	}
	if conn := tx.Conn(); conn != nil {
		c.outerErr = checkExecMode("tx", conn.Config().DefaultQueryExecMode)
	}
	return &c
}

// Peek is a view of the store whose reads record nothing: GetActive,
// GetSet and ConfirmNodeBlocks do not mark what they read as held by a
// Terraform state. It is for reads that no state keeps (a `terraform query`
// listing, a look before an import), which must not make another manager's
// allocation look managed by a state.
func (s *Client) Peek() *Client {
	c := *s
	c.peek = true
	return &c
}

// Open makes a client with a pool of its own: it parses the configuration
// and creates the pool. It does not connect:
// call Ping or Migrate to find out whether the database answers.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if err := checkFilterIDs("actor", cfg.Actor); err != nil {
		return nil, err
	}
	if err := ValidateOrigin(cfg.Origin); err != nil {
		return nil, err
	}
	switch {
	case cfg.MaxConnections < 0:
		return nil, invalid("max_connections", "%d is negative: give at least 1, or 0 for the default (4)", cfg.MaxConnections)
	case cfg.ConnectTimeout < 0:
		return nil, invalid("connect_timeout", "%s is negative: give a positive duration, or 0 for the default (10s)", cfg.ConnectTimeout)
	}
	pc, err := parsePoolConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	pc.MaxConns = cfg.MaxConnections
	pc.MinConns = 0
	pc.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	// Fallbacks repeat each host once per TLS mode tried (sslmode=prefer): list each once.
	addrs := []string{net.JoinHostPort(pc.ConnConfig.Host, strconv.Itoa(int(pc.ConnConfig.Port)))}
	for _, f := range pc.ConnConfig.Fallbacks {
		if a := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, &InvalidError{Field: "database_url", Msg: scrub(err.Error(), pc.ConnConfig.Password)}
	}
	var switchable *pgxpool.Config
	if !strings.Contains(cfg.DatabaseURL, "default_query_exec_mode") {
		switchable = pc
	}
	return newClient(pool, switchable, strings.Join(addrs, ","), pc.ConnConfig.Password, cfg), nil
}

// parsePoolConfig parses a connection string into a pool configuration with
// the IPAM's connection default: application_name terraform-provider-ipam,
// the one startup parameter sent besides user and database, which every
// pooler accepts. Parameters the string sets win.
func parsePoolConfig(databaseURL string) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, &InvalidError{Field: "database_url", Msg: "cannot be parsed as a PostgreSQL connection string: " + parseReason(err) +
			" (expected a URL such as postgres://user@host:5432/dbname?sslmode=verify-full, or key=value pairs such as host=db.internal dbname=ipam)"}
	}
	if ambiguousUserinfo(pc) {
		return nil, &InvalidError{Field: "database_url", Msg: "its password (or user) " + unescapedAt}
	}
	if pc.ConnConfig.RuntimeParams == nil {
		pc.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, ok := pc.ConnConfig.RuntimeParams["application_name"]; !ok {
		pc.ConnConfig.RuntimeParams["application_name"] = "terraform-provider-ipam"
	}
	if err := checkExecMode("database_url", pc.ConnConfig.DefaultQueryExecMode); err != nil {
		return nil, err
	}
	return pc, nil
}

// StatementMode is how the store sends statements now: "cache_statement"
// (named prepared statements, prepared once per connection: pgx's default),
// or "cache_describe" (unnamed statements with cached descriptions, which
// work through a transaction pooler), or describe_exec when the connection
// string chose it (exec and simple_protocol are refused: checkExecMode). A store that opened its own pool starts with cache_statement and
// moves to cache_describe for good the first time a named statement fails
// as only a transaction pooler makes it fail; the call runs again.
func (s *Client) StatementMode() string {
	return execModeName(s.pool.get().Config().ConnConfig.DefaultQueryExecMode)
}

// execModeName is a statement mode as default_query_exec_mode spells it.
func execModeName(m pgx.QueryExecMode) string {
	return strings.ReplaceAll(m.String(), " ", "_")
}

// describes: the mode sends each statement's parameter types from its
// description (a prepared statement, or one described first).
func describes(m pgx.QueryExecMode) bool {
	return m == pgx.QueryExecModeCacheStatement || m == pgx.QueryExecModeCacheDescribe || m == pgx.QueryExecModeDescribeExec
}

// checkExecMode refuses a statement mode the IPAM cannot run in: its
// statements take their parameters' types from the server's description of
// them (a jsonb document given as a Go map, a UUID sent as its bytes), which
// exec and simple_protocol never ask for.
func checkExecMode(field string, m pgx.QueryExecMode) error {
	if describes(m) {
		return nil
	}
	return invalid(field, "default_query_exec_mode=%s is not supported: the IPAM needs the server to describe each statement's parameters; "+
		"leave the setting out (the IPAM then uses cache_statement, and switches to cache_describe by itself when it finds a transaction pooler), "+
		"or set cache_describe or describe_exec",
		execModeName(m))
}

// Close releases the client's own pool (Open); a pool given to New stays
// open.
func (s *Client) Close() {
	if s.borrowed {
		s.pool.markClosed()
		return
	}
	s.pool.Close()
}

// Actor is the actor this store records.
func (s *Client) Actor() string { return s.actor }

// Origin is the configuration this client manages allocations for
// (Config.Origin; empty: none).
func (s *Client) Origin() string { return s.origin }

// Addr is the database's host:port list (no credentials), for messages.
func (s *Client) Addr() string { return s.addr }

// Ping checks that the database answers.
func (s *Client) Ping(ctx context.Context) error {
	return s.mapErr(s.pool.Ping(ctx))
}

var quoted = regexp.MustCompile("\"[^\"]*\"|'[^']*'|`[^`]*`")

// unescapedAt is the refusal of a connection string that ambiguousUserinfo
// finds, after what holds the '@'.
const unescapedAt = "holds an '@' that is not percent-encoded: read as it is, the part of the password after it would be taken " +
	"for the host name (the string itself is not shown, as it holds a password); write the '@' as %40, or give the password in PGPASSWORD"

// ambiguousUserinfo reports whether pgx read a host name holding an '@':
// a URL whose password (or user) holds an unescaped '@', which pgx ends at
// the first '@', taking the rest of the password for the host name that
// every error and log then shows.
func ambiguousUserinfo(pc *pgxpool.Config) bool {
	if strings.Contains(pc.ConnConfig.Host, "@") {
		return true
	}
	for _, f := range pc.ConnConfig.Fallbacks {
		if strings.Contains(f.Host, "@") {
			return true
		}
	}
	return false
}

// parseReason says why a connection string could not be parsed without
// quoting any of it: pgconn's redaction of a malformed string is best effort
// (an unescaped '@' or a space after "password=" defeats it), so the string
// itself, and anything quoted from it, is left out.
func parseReason(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+3:]
	}
	msg = quoted.ReplaceAllString(msg, "(...)")
	if strings.ContainsAny(msg, "@=") {
		return "malformed; check its syntax (the string itself is not shown, as it may hold a password)"
	}
	return msg
}

// errRetry asks withTx to run the transaction again: a conditional write found
// its row changed under it.
var errRetry = errors.New("concurrent change, retry")

const maxTxAttempts = 10

// withTx runs fn in a READ COMMITTED transaction and retries it, a bounded
// number of times with jittered backoff, on serialization failures,
// deadlocks, unique violations on keys chosen after reading and zero-row
// conditional writes; while no usable server answers (a lost connection, a
// read-only or restarting server) it runs it again up to the failover bound
// (retryConn). Every write of the core goes through here, and each is safe
// to repeat after a commit whose answer was lost: an allocation is
// idempotent per owner, a release is guarded by the generation.
func (s *Client) withTx(ctx context.Context, fn func(pgx.Tx) error) error {
	if s.outer != nil {
		return s.inOuterTx(ctx, fn)
	}
	return s.mapCtx(ctx, s.retryConn(ctx, func() error {
		var err error
		start := time.Now()
		for attempt := 0; ; attempt++ {
			if attempt > 0 {
				base := time.Millisecond << min(attempt, 8)
				d := base/2 + rand.N(base)
				select {
				case <-ctx.Done():
					return errors.Join(ctx.Err(), err)
				case <-time.After(d):
				}
			}
			err = s.tryTx(ctx, fn)
			if err == nil || !retryable(err) || failoverError(err) {
				break
			}
			if attempt+1 >= maxTxAttempts && (!lockConflict(err) || time.Since(start) >= s.lockConflictBudget()) {
				break
			}
		}
		return err
	}))
}

// readTx runs fn in a read-only transaction, so that the figures of several
// statements come from one connection and fn can never write; snapshot asks
// for REPEATABLE READ, one snapshot for every statement. It is withTx's
// counterpart for reads, and with withTx the only way the core opens a
// transaction (beside the migration lock's). BEGIN rides out a failover like
// every call; a read that fails later is not run again: a caller may simply
// ask again. In the caller's transaction (InTx) fn runs there.
func (s *Client) readTx(ctx context.Context, snapshot bool, fn func(pgx.Tx) error) error {
	if s.outer != nil {
		if s.outerErr != nil {
			return s.outerErr
		}
		return s.mapCtx(ctx, fn(s.outer))
	}
	iso := pgx.TxIsoLevel("")
	if snapshot {
		iso = pgx.RepeatableRead
	}
	tx, err := s.begin(ctx, iso, true)
	if err != nil {
		return s.mapCtx(ctx, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// A read waits for an operator's strong lock on a table it reads
	// (LOCK TABLE, VACUUM FULL): told while it waits, as a write is.
	watch := s.watchLocks(ctx, tx.Conn().PgConn().PID())
	defer watch.end()
	if err := fn(tx); err != nil {
		return s.mapCtx(ctx, watch.held(err))
	}
	return s.mapCtx(ctx, tx.Commit(ctx))
}

// lockConflict reports a deadlock or a serialization failure: PostgreSQL
// aborted this transaction so that another could go on.
func lockConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == pgerrcode.DeadlockDetected || pe.Code == pgerrcode.SerializationFailure)
}

// lockConflictBudget is how long withTx keeps running a transaction again
// that PostgreSQL keeps aborting for a deadlock or a serialization failure,
// past its usual attempts: the lock bound, as a wait for those locks would
// be (30s when unbounded). Long transactions that meet (node blocks scaled
// and released at once) may abort each other several times in a row before
// their backoffs part them.
func (s *Client) lockConflictBudget() time.Duration {
	if s.bounds.lock > 0 {
		return s.bounds.lock
	}
	return DefaultLockTimeout
}

// inOuterTx runs fn in a savepoint of the caller's transaction, retrying
// what the allocator retries (a deadlock, a lost race) by rolling back to the
// savepoint. A broken connection ends the caller's transaction: no retry.
func (s *Client) inOuterTx(ctx context.Context, fn func(pgx.Tx) error) error {
	if s.outerErr != nil {
		return s.outerErr
	}
	var iso string
	var origin string
	var callersReadOnly bool
	if err := s.outer.QueryRow(ctx, sqlTxIsolation, s.origin).Scan(&iso, &origin, &callersReadOnly); err != nil {
		return s.mapErr(err)
	}
	if iso != "read committed" {
		return &InvalidError{Field: "tx", Msg: fmt.Sprintf("the transaction is %s; the allocator needs READ COMMITTED (begin it with pgx.TxOptions{IsoLevel: pgx.ReadCommitted})", iso)}
	}
	if callersReadOnly {
		return &InvalidError{Field: "tx", Msg: "the transaction is READ ONLY, and the allocator writes (begin it with pgx.TxOptions{AccessMode: pgx.ReadWrite})"}
	}
	// The client's bounds for its statements, the caller's set back after
	// (on a transaction still usable: a failed restore changes nothing).
	if _, err := s.outer.Exec(ctx, sqlCallersBounds, s.bounds.lockSetting(), s.bounds.statementSetting()); err != nil {
		return s.mapErr(err)
	}
	defer func() { _, _ = s.outer.Exec(context.WithoutCancel(ctx), sqlCallersBoundsBack) }()
	var err error
	for attempt := 0; attempt < maxTxAttempts; attempt++ {
		if attempt > 0 {
			base := time.Millisecond << min(attempt, 8)
			select {
			case <-ctx.Done():
				return s.mapErr(errors.Join(ctx.Err(), err))
			case <-time.After(base/2 + rand.N(base)):
			}
		}
		var sp pgx.Tx
		if sp, err = s.outer.Begin(ctx); err != nil {
			break
		}
		if err = fn(sp); err == nil {
			err = sp.Commit(ctx)
			break
		}
		if rerr := sp.Rollback(context.WithoutCancel(ctx)); rerr != nil || !retryable(err) || isConnError(err) {
			break
		}
	}
	return s.mapErr(err)
}

func (s *Client) tryTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.begin(ctx, pgx.ReadCommitted, false)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	watch := s.watchLocks(ctx, tx.Conn().PgConn().PID())
	defer watch.end()
	err = fn(tx)
	if err == nil {
		err = tx.Commit(ctx)
	}
	err = watch.held(err)
	if failoverError(err) && s.readOnlyRefusal(ctx, err) == nil {
		// A server that is read-only now (demoted) or going away: drop the
		// connection, so that the pool does not hand it out again. A write
		// the caller can do without, refused by a read-only server, keeps
		// it: a plan against a standby would connect again for each hold.
		_ = tx.Conn().Close(context.WithoutCancel(ctx))
	}
	return err
}

// constraintInPool names the row trigger that keeps every active or held
// allocation inside its pool (migration 12).
const constraintInPool = "ipam_allocations_in_pool"

// constraintKeepLiveRows names the pool trigger that refuses a change or
// delete of a pool leaving an active or held allocation out (migration 12),
// and constraintKeepCooldown the row trigger that refuses to delete a row
// active, held or inside its cooldown (migration 15), and
// constraintNotBuried the row trigger that refuses to hand out an address a
// destroyed pool left cooling (migration 16). Their messages name the
// address and its state.
const (
	constraintKeepLiveRows = "ipam_pools_keep_live_rows"
	constraintKeepCooldown = "ipam_allocations_keep_cooldown"
	constraintNotBuried    = "ipam_allocations_not_buried"
)

func retryable(err error) bool {
	if errors.Is(err, errRetry) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case pgerrcode.SerializationFailure, pgerrcode.DeadlockDetected, pgerrcode.UniqueViolation:
			return true
		case pgerrcode.CheckViolation:
			// The pool changed under a statement that had not taken its
			// lock first (the row trigger of migration 12): the next
			// attempt takes it, and refuses with the reason.
			return pe.ConstraintName == constraintInPool
		}
	}
	return isConnError(err)
}

// mapErr turns low-level errors into the core's typed errors, with secrets scrubbed.
func (s *Client) mapErr(err error) error {
	if err == nil {
		return nil
	}
	var coded interface{ Code() string }
	if errors.As(err, &coded) || errors.Is(err, ErrNotFound) {
		return err
	}
	if errors.Is(err, pgx.ErrTxClosed) {
		return &InvalidError{Field: "tx", Msg: "the transaction is closed (committed or rolled back): begin a new one for the call",
			Err: pgx.ErrTxClosed}
	}
	if errors.Is(err, puddle.ErrClosedPool) {
		return &InvalidError{Field: "client", Msg: "the client is closed (Close was called, or the pool given to New was closed): open a new one for the call",
			Err: ErrClosed}
	}
	if errors.Is(err, errRetry) {
		return &ConflictError{Msg: fmt.Sprintf("concurrent changes kept this from completing in %d attempts; try again", maxTxAttempts)}
	}
	if ge := s.gaveUp(err); ge != nil {
		return ge
	}
	if cf, ok := s.connFailure(err); ok {
		return cf
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case pgerrcode.InFailedSQLTransaction:
			return &InvalidError{Field: "tx", Msg: "the transaction has already failed (a statement before this call was refused), so it runs nothing more; roll it back and begin again"}
		case pgerrcode.DuplicatePreparedStatement, pgerrcode.InvalidSQLStatementName:
			// describeStatements switches a pool whose mode it may pick;
			// one whose mode the connection string (or the caller's pool)
			// fixes meets the pooler every time.
			fix := "the connection string fixes, collide there; leave the setting out (the IPAM then switches to cache_describe by itself) or set cache_describe"
			if s.borrowed {
				fix = "the pool given to New uses (pgx's default), collide there; configure that pool with " +
					"default_query_exec_mode=cache_describe (only a client that makes its own pool, Open, switches by itself)"
			}
			return &RefusedError{Addr: s.addr, Answers: []string{scrub(pe.Message, s.secret) + " (SQLSTATE " + pe.Code + "): " +
				"a transaction pooler (PgBouncer in transaction mode) shares server connections between sessions, so the named " +
				"prepared statements of default_query_exec_mode=cache_statement, which " + fix}}
		case pgerrcode.InsufficientPrivilege:
			return &DeniedError{Msg: fmt.Sprintf("the database role lacks a grant this needs (%s); see the database setup guide for the grants it needs", scrub(pe.Message, s.secret)), err: err}
		case pgerrcode.CheckViolation:
			switch pe.ConstraintName {
			case constraintInPool:
				return &ConflictError{Msg: "the pool changed or was deleted meanwhile, and the address is no longer inside it (" + constraintInPool + "); try again"}
			case constraintKeepLiveRows, constraintKeepCooldown, constraintNotBuried:
				return &ConflictError{Msg: scrub(pe.Message, s.secret)}
			}
		case pgerrcode.ForeignKeyViolation:
			return &ConflictError{Msg: "the cluster or pool this refers to was deleted meanwhile (" + scrub(pe.ConstraintName, s.secret) + ")"}
		case pgerrcode.LockNotAvailable:
			what := pe.Message
			var hb *heldBy
			if errors.As(err, &hb) {
				what += "; held by " + hb.holders + " (when last seen)"
			}
			if h := s.lockHoldersNow(); h != "" {
				what += "; held: " + h
			}
			return &BusyError{What: scrub(what, s.secret), Timeout: s.bounds.lock}
		case pgerrcode.QueryCanceled:
			if strings.Contains(pe.Message, "statement timeout") {
				te := &TimeoutError{What: scrub(pe.Message, s.secret), Timeout: s.bounds.statement}
				var hb *heldBy
				if errors.As(err, &hb) {
					te.Holders = scrub(hb.holders, s.secret)
				}
				return te
			}
		case pgerrcode.SerializationFailure, pgerrcode.DeadlockDetected, pgerrcode.UniqueViolation:
			// Retried by withTx up to its bound; still failing past it.
			return &ConflictError{Msg: fmt.Sprintf("concurrent changes kept this from completing (%s); try again", scrub(pe.Message, s.secret))}
		}
	}
	if ie := s.refusedValue(err); ie != nil {
		return ie
	}
	if ce := s.serverClass(err); ce != nil {
		return ce
	}
	return errors.New(scrub(err.Error(), s.secret))
}

// gaveUp names a context's end that is the caller's, not the store's: the
// store's own bounds end with their own cause (takeErr, waitGuard), a wait
// for a server carries what it waited (waitedError), a connection attempt is
// a connect error, and a deadline that passed before any server ever
// answered is the database's absence (connFailure). Nil for anything else.
func (s *Client) gaveUp(err error) error {
	var we *waitedError
	var ce *pgconn.ConnectError
	switch {
	case errors.As(err, &we), errors.As(err, &ce):
		return nil
	case errors.Is(err, context.Canceled):
		return &gaveUpError{context.Canceled, s.outer != nil}
	case errors.Is(err, context.DeadlineExceeded) && s.connected():
		return &gaveUpError{context.DeadlineExceeded, s.outer != nil}
	}
	return nil
}

// mapCtx is mapErr for a call made with ctx: a connection the caller's
// deadline closed is the caller giving up (givenUp), whichever call it was.
func (s *Client) mapCtx(ctx context.Context, err error) error {
	return s.givenUp(ctx, s.mapErr(err))
}

// givenUp is err, unless the caller's context ended while the call ran and
// err says that no usable server answered: pgx closes a connection whose
// statement the caller's deadline interrupted ("conn closed"), and that is
// the caller giving the call up (gaveUpError), not the database's absence.
// A client that no server has answered yet keeps the database's absence.
func (s *Client) givenUp(ctx context.Context, err error) error {
	if err == nil || Code(err) != CodeUnavailable {
		return err
	}
	if ctx.Err() != nil && s.connected() {
		return &gaveUpError{ctx.Err(), s.outer != nil}
	}
	var ue *UnavailableError
	if s.outer != nil && errors.As(err, &ue) && !ue.CallersTx {
		in := *ue
		in.CallersTx = true
		return &in
	}
	return err
}

// serverClass codes what is left of the server's refusals by their SQLSTATE
// class: the schema is not what this binary expects (class 42: an undefined
// table, column or function), the server cannot serve now (53 insufficient
// resources, 57 operator intervention, 58 system error, XX internal error),
// or a trigger refused the change (P0001). Nil for an error that is not the
// server's.
func (s *Client) serverClass(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return nil
	}
	msg := fmt.Sprintf("%s (SQLSTATE %s)", scrub(pe.Message, s.secret), pe.Code)
	switch {
	case strings.HasPrefix(pe.Code, "42"):
		return &SchemaError{Msg: "the database does not have what this version expects: " + msg +
			"; apply the migrations (ipamctl migrate up, or auto_migrate) or use the version the schema was made for"}
	case strings.HasPrefix(pe.Code, "53"), strings.HasPrefix(pe.Code, "57"), strings.HasPrefix(pe.Code, "58"),
		strings.HasPrefix(pe.Code, "XX"):
		return &UnavailableError{Addr: s.addr, Reached: true, Answers: []string{msg}, Err: errors.New(msg)}
	case pe.Code == "P0001":
		return &ConflictError{Msg: msg}
	}
	return nil
}

// refusedValue maps a value the database or the driver refused (a data
// exception of class 22, such as a NUL byte in text or host bits in a cidr;
// a NOT NULL or CHECK violation; a program limit such as an index row too
// large; a number the driver cannot encode into its column's type) to
// invalid_input, naming the column when the database names one. The checks
// at the package edge refuse such input before any statement runs: this is
// the net under them, so that no such error reaches a caller raw. Nil when
// err is none of these.
func (s *Client) refusedValue(err error) *InvalidError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		field := pe.ColumnName
		if field == "" {
			field = constraintField(pe.ConstraintName)
		}
		msg := fmt.Sprintf("the database refused a value: %s (SQLSTATE %s)", scrub(pe.Message, s.secret), pe.Code)
		switch {
		case pe.Code == pgerrcode.NotNullViolation:
			return &InvalidError{Field: field, Msg: "must be given (the database refused an empty value)"}
		case pe.Code == pgerrcode.CheckViolation, strings.HasPrefix(pe.Code, "22"), strings.HasPrefix(pe.Code, "54"):
			return &InvalidError{Field: field, Msg: msg}
		}
		return nil
	}
	if m := err.Error(); strings.Contains(m, "failed to encode args[") || strings.Contains(m, "unable to encode") {
		return &InvalidError{Field: "input", Msg: "a value does not fit the type the database stores it as: " + scrub(rootCause(err), s.secret)}
	}
	return nil
}

// constraintField names the column a CHECK constraint guards, from
// PostgreSQL's default name "<table>_<column>_check" ("input" when it cannot
// be told).
func constraintField(constraint string) string {
	name, ok := strings.CutSuffix(constraint, "_check")
	if !ok {
		return "input"
	}
	for _, table := range []string{"ipam_clusters_", "ipam_pools_", "ipam_allocations_", "ipam_node_block_settings_", "ipam_events_"} {
		if col, found := strings.CutPrefix(name, table); found && col != "" {
			return col
		}
	}
	return "input"
}

// CurrentDatabase names the database the store is connected to.
func (s *Client) CurrentDatabase(ctx context.Context) (string, error) {
	var db string
	err := s.pool.QueryRow(ctx, sqlCurrentDatabase).Scan(&db)
	return db, s.mapErr(err)
}

// insertEvent appends an event in the caller's transaction, stamped with
// the client's actor: the one place a Go-written event gets it (the
// one-statement paths' events take the row's, which the same actor wrote).
func (s *Client) insertEvent(ctx context.Context, tx pgx.Tx, e Event) error {
	e.Actor = s.actor
	var addr *netip.Prefix
	if e.Address.IsValid() {
		a := netip.PrefixFrom(e.Address, e.Address.BitLen())
		addr = &a
	}
	var alloc *uuid.UUID
	if e.AllocationID != uuid.Nil {
		alloc = &e.AllocationID
	}
	if e.Data == nil {
		e.Data = map[string]any{}
	}
	_, err := tx.Exec(ctx, sqlInsertEvent.sql, params{
		"event": newID(), "event_type": e.Type, "cluster": label(e.ClusterID), "pool": label(e.PoolID),
		"allocation": alloc, "generation": e.Generation, "address": addr, "kind": label(e.Owner.Kind),
		"owner": label(e.Owner.ID), "org": label(e.Owner.OrgID), "env": label(e.Owner.EnvID),
		"node": label(e.Owner.NodeID), "instance": label(e.Owner.InstanceID), "actor": e.Actor, "data": e.Data,
	})
	return err
}

// failureRecordTimeout bounds recording a failure.
const failureRecordTimeout = 5 * time.Second

// recordFailure notes a failed allocation outside the failed transaction (a
// caller's transaction included: it outlives the rollback), so usage and
// metrics see it, with a "<kind>.allocation_failed" event (the spec's
// instance.allocation_failed) carrying the reason. Best effort: a failure to
// record is not reported over the allocation error itself.
func (s *Client) recordFailure(ctx context.Context, clusterID, poolID, reason string, o Owner, detail string) {
	// Aside from the calls in flight, bounded: the callers' transactions may
	// hold every connection of a shared pool until this call returns.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failureRecordTimeout)
	defer cancel()
	// In a batch after the store's settings, so that its transaction carries
	// the client's origin, which the event's column default records.
	b := &pgx.Batch{}
	s.queueBounds(b)
	b.Queue(sqlRecordFailure.sql, params{
		"failure": newID(), "cluster": label(clusterID), "pool": label(poolID), "reason": reason,
		"kind": label(o.Kind), "owner": label(o.ID), "actor": s.actor, "detail": scrub(detail, s.secret),
		"event": newID(), "event_type": failureEventType(o.Kind), "org": label(o.OrgID), "env": label(o.EnvID),
		"node": label(o.NodeID), "instance": label(o.InstanceID),
	})
	_ = s.aside(rctx, s.pool, func(q querier) error { return q.SendBatch(rctx, b).Close() })
}

// ownOrigin reports whether a row is this client's configuration's, or no
// configuration's (ownOriginSQL in Go).
func (s *Client) ownOrigin(a Allocation) bool {
	return a.Origin == "" || a.Origin == s.origin
}

// manager names this client as a manager of allocations: its actor, and
// its origin when it has one.
func (s *Client) manager() string {
	if s.origin == "" {
		return fmt.Sprintf("actor %q", s.actor)
	}
	return fmt.Sprintf("actor %q in %q", s.actor, s.origin)
}

// queueBounds queues the store's bounds and planner settings for the rest of
// the batch's transaction (sqlFastBounds).
func (s *Client) queueBounds(b *pgx.Batch) {
	b.Queue(sqlFastBounds, s.bounds.lockSetting(), s.bounds.statementSetting(), s.origin)
}
