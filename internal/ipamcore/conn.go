package ipamcore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultFailoverTimeout is how long a call rides out a database without a
// usable primary (a switchover, a failover, a restart) before it fails with
// ipam_unavailable.
const DefaultFailoverTimeout = 30 * time.Second

// dbPool is the store's pgx pool. Every call first makes sure the pool can
// hand out a connection to a writable server, riding out a failover up to the
// store's bound (see ready); the call itself then runs on that connection,
// which the pool hands straight back.
type dbPool struct {
	*pgxpool.Pool
	s *Store
}

// ready acquires a connection, retrying while no server is usable (see
// retryConn), and puts it back for the call that follows.
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

func (p dbPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := p.ready(ctx); err != nil {
		return errRow{err}
	}
	return p.Pool.QueryRow(ctx, sql, args...)
}

func (p dbPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	return p.Pool.Query(ctx, sql, args...)
}

func (p dbPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := p.ready(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return p.Pool.Exec(ctx, sql, args...)
}

func (p dbPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := p.ready(ctx); err != nil {
		return errBatch{err}
	}
	return p.Pool.SendBatch(ctx, b)
}

func (p dbPool) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	return p.Pool.BeginTx(ctx, opts)
}

func (p dbPool) Ping(ctx context.Context) error {
	if err := p.ready(ctx); err != nil {
		return err
	}
	return p.Pool.Ping(ctx)
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
func (s *Store) retryConn(ctx context.Context, fn func() error) error {
	var first time.Time
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || s.failover <= 0 || !failoverError(err) {
			return err
		}
		if first.IsZero() {
			first = time.Now()
		}
		waited := time.Since(first)
		if waited >= s.failover {
			return &waitedError{err: err, waited: waited}
		}
		d := min(50*time.Millisecond<<min(attempt, 5), time.Second)
		d = d/2 + rand.N(d)
		d = min(d, s.failover-waited)
		select {
		case <-ctx.Done():
			return &waitedError{err: errors.Join(ctx.Err(), err), waited: time.Since(first)}
		case <-time.After(d):
		}
	}
}

// waitedError is a failure that persisted for the failover bound.
type waitedError struct {
	err    error
	waited time.Duration
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
			return !refusedForGood(ce)
		}
		for _, a := range answers {
			if refusedForGood(a) {
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
			return false
		case strings.HasPrefix(pe.Code, "08"):
			return true
		}
		return false
	}
	return isConnError(err)
}

// refusal reports whether a server answered and refused us for good: bad
// credentials, a database or role that does not exist, a protocol the front
// end does not speak (a pooler rejecting a startup parameter), a TLS setup
// that cannot work. Retrying cannot help.
func refusedForGood(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "28"), pe.Code == pgerrcode.InvalidCatalogName,
			pe.Code == pgerrcode.ProtocolViolation, pe.Code == pgerrcode.FeatureNotSupported:
			return true
		}
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "tls error") || strings.Contains(msg, "server refused TLS") ||
		strings.Contains(msg, "require_auth") || strings.Contains(msg, "channel binding")
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
	case errors.Is(err, pgconn.ErrReadOnlyConnection):
		return host + "is read-only (a standby or a demoted primary; target_session_attrs=read-write skips it)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return host + "refused the connection (nothing listens there)"
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
func (s *Store) connFailure(err error) (error, bool) {
	var waited time.Duration
	var we *waitedError
	if errors.As(err, &we) {
		waited = we.waited
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		var answers []string
		refused := true
		errs := hostErrors(ce)
		for _, e := range errs {
			// sslmode=prefer tries each host twice (TLS, then plain): one answer each.
			if a := hostAnswer(e, s.secret); !slices.Contains(answers, a) {
				answers = append(answers, a)
			}
			refused = refused && refusedForGood(e)
		}
		if len(errs) == 0 {
			answers = []string{scrub(rootCause(err), s.secret)}
			refused = refusedForGood(ce)
		}
		if refused {
			return &RefusedError{Addr: s.addr, Answers: answers}, true
		}
		return &UnavailableError{Addr: s.addr, Answers: answers, Waited: waited, Err: errors.New(strings.Join(answers, "; "))}, true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && refusedForGood(pe) {
		return &RefusedError{Addr: s.addr, Answers: []string{hostAnswer(pe, s.secret)}}, true
	}
	if failoverError(err) || (errors.Is(err, context.DeadlineExceeded) && !s.connected()) {
		what := scrub(rootCause(err), s.secret)
		if errors.As(err, &pe) {
			what = hostAnswer(pe, s.secret)
		}
		return &UnavailableError{Addr: s.addr, Answers: []string{what}, Waited: waited, Err: errors.New(what)}, true
	}
	return nil, false
}

// RefusedError: a server answered but refused the connection or the
// session for good (credentials, database, a startup parameter a pooler does
// not accept, TLS): retrying cannot help. Answers carry the server's
// message, never the password.
type RefusedError struct {
	Addr    string
	Answers []string
}

func (e *RefusedError) Code() string { return CodeRefused }
func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s: the IPAM database at %s refused us: %s", CodeRefused, e.Addr, strings.Join(e.Answers, "; "))
}
