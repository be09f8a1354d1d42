package engine

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestMapErrNamesRefusedValues: the net under the edge's checks. A value
// the database or the driver refuses (produced here for real, by statements
// the edge would never send, and as the errors the schema's constraints
// raise) reaches the caller as invalid_input naming the column where the
// database names one, never raw; retryable conflicts that outlast the
// retries are conflict.
func TestMapErrNamesRefusedValues(t *testing.T) {
	t.Parallel()
	url := os.Getenv("IPAM_TEST_DATABASE_URL")
	ctx := context.Background()
	s, err := Open(ctx, Config{DatabaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	real := func(sql string, args ...any) error {
		var out any
		err := conn.QueryRow(ctx, sql, args...).Scan(&out)
		if err == nil {
			t.Fatalf("%s: no error", sql)
		}
		return err
	}
	sqlstate := func(err error, want string) error {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != want {
			t.Fatalf("%v: want SQLSTATE %s", err, want)
		}
		return err
	}
	cases := []struct {
		name  string
		err   error
		code  string
		field string
	}{
		{"NUL byte in text (22021)", sqlstate(real(`SELECT $1::text`, "c1\x00"), "22021"), CodeInvalid, "input"},
		{"host bits in a cidr (22P03)", sqlstate(real(`SELECT $1::cidr`, netip.MustParsePrefix("2001:DB8:200::1/48")), "22P03"), CodeInvalid, "input"},
		{"2^40 into an int4 (driver encode)", real(`SELECT $1::int4`, int64(1)<<40), CodeInvalid, "input"},
		{"division by zero (22012)", sqlstate(real(`SELECT 1 / $1::int`, 0), "22012"), CodeInvalid, "input"},
		{"NOT NULL (23502)", &pgconn.PgError{Code: "23502", Message: `null value in column "cidrs"`, ColumnName: "cidrs"}, CodeInvalid, "cidrs"},
		{"CHECK of a column (23514)", &pgconn.PgError{Code: "23514", Message: "new row violates check constraint", ConstraintName: "ipam_pools_mtu_check"}, CodeInvalid, "mtu"},
		{"CHECK of a row (23514)", &pgconn.PgError{Code: "23514", Message: "new row violates check constraint", ConstraintName: "ipam_clusters_check"}, CodeInvalid, "input"},
		{"index row too large (54000)", &pgconn.PgError{Code: "54000", Message: "index row size exceeds maximum"}, CodeInvalid, "input"},
		{"serialization failure past the retries", &pgconn.PgError{Code: "40001", Message: "could not serialize access"}, CodeConflict, ""},
		{"unique violation past the retries", &pgconn.PgError{Code: "23505", Message: "duplicate key value"}, CodeConflict, ""},
		{"an undefined table (42P01)", sqlstate(real(`SELECT count(*) FROM ipam_no_such_table`), "42P01"), CodeSchema, ""},
		{"an undefined column (42703)", sqlstate(real(`SELECT no_such_column FROM (SELECT 1 AS x) t`), "42703"), CodeSchema, ""},
		{"disk full (53100)", &pgconn.PgError{Code: "53100", Message: "could not extend file"}, CodeUnavailable, ""},
		{"shutting down (57P01)", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, CodeUnavailable, ""},
		{"internal error (XX000)", &pgconn.PgError{Code: "XX000", Message: "cache lookup failed"}, CodeUnavailable, ""},
		{"a trigger's refusal (P0001)", &pgconn.PgError{Code: "P0001", Message: "refused"}, CodeConflict, ""},
	}
	for _, c := range cases {
		got := s.mapErr(c.err)
		if Code(got) != c.code {
			t.Errorf("%s: %v maps to %v (code %q), want %s", c.name, c.err, got, Code(got), c.code)
			continue
		}
		var ie *InvalidError
		if c.code == CodeInvalid && (!errors.As(got, &ie) || ie.Field != c.field || !errors.Is(got, ErrInvalid)) {
			t.Errorf("%s: %v, want an InvalidError naming %q", c.name, got, c.field)
		}
		if c.code == CodeInvalid && !strings.Contains(got.Error(), "refused") && !strings.Contains(got.Error(), "does not fit") && !strings.Contains(got.Error(), "must be given") {
			t.Errorf("%s: %v does not say what happened", c.name, got)
		}
	}
}

// Every coded error matches, with errors.Is, the sentinel of its code, and
// every code has one: a caller tests any failure the way the Go API guide's
// table says.
func TestEveryCodeHasItsSentinel(t *testing.T) {
	typed := []interface {
		error
		Code() string
	}{
		&ExhaustedError{}, &UnavailableError{Err: errors.New("x")}, &OwnerConflictError{}, &AddressInUseError{},
		&AddressCoolingError{}, &InvalidError{}, &ConflictError{}, &SchemaError{}, &BusyError{}, &TimeoutError{},
		&ReadOnlyError{}, &DeniedError{}, &HoldLostError{}, &RefusedError{}, &ConfirmedError{},
	}
	for _, e := range typed {
		s, ok := sentinels[e.Code()]
		if !ok || !errors.Is(e, s) {
			t.Errorf("%T (code %s): errors.Is with its sentinel %v is false", e, e.Code(), s)
		}
		if Code(e) != e.Code() {
			t.Errorf("%T: Code gives %q, want %q", e, Code(e), e.Code())
		}
	}
	for _, c := range []string{CodeExhausted, CodeUnavailable, CodeOwnerConflict, CodeAddressInUse, CodeAddressCooling, CodeInvalid,
		CodeNotFound, CodeConflict, CodeSchema, CodeReadOnly, CodeDenied, CodeBusy, CodeTimeout, CodeRefused, CodeHoldLost} {
		if sentinels[c] == nil {
			t.Errorf("code %s has no sentinel", c)
		}
	}
}

// A wait that crossed a report's multiple of WaitReportInterval during an
// attempt (a slow connect on a busy machine), not during a pause, is still
// reported by the next pause, once: it was silent, and ipamctl's "waiting
// for the database" line went missing under load.
func TestAWaitCrossedDuringAnAttemptIsReported(t *testing.T) {
	var got []Wait
	s := &conn{addr: "db:5432", onWait: func(_ context.Context, w Wait) { got = append(got, w) }}
	first := time.Now().Add(-WaitReportInterval - 200*time.Millisecond) // 5.2 s ago: crossed before this pause
	reported := 0
	if !s.pause(context.Background(), 0, first, time.Minute, false, errors.New("refused"), &reported) {
		t.Fatal("the pause gave up inside its bound")
	}
	if len(got) != 1 || reported != 1 || got[0].Waited < WaitReportInterval {
		t.Fatalf("reports %+v (reported %d), want one of a wait past %s", got, reported, WaitReportInterval)
	}
	if s.pause(context.Background(), 0, first, time.Minute, false, errors.New("refused"), &reported); len(got) != 1 {
		t.Fatalf("the same multiple reported again: %+v", got)
	}
}

// A one-statement call that ran out of its own bound names that bound, not
// statement_timeout, and what it likely waited for (found by a trial as an
// outside reviewer: "a statement ran past 4s (statement_timeout)" with a
// statement_timeout of 10 s, behind a LOCK TABLE).
func TestATakesTimeoutNamesItsOwnBound(t *testing.T) {
	err := &TimeoutError{What: "the one-statement call (an allocation, a hold or a release) did not answer", Timeout: 4 * time.Second, Take: true}
	if msg := err.Error(); !strings.Contains(msg, "within 4s (lock_timeout and 2 s, the call's own bound)") ||
		strings.Contains(msg, "(statement_timeout)") || !strings.Contains(msg, "waited for a lock") || !errors.Is(err, ErrTimeout) {
		t.Fatalf("%s", msg)
	}
}

// A wait's report gives its bound, or says that there is none (a bound set
// to 0 or below is off), never "of 0 s".
func TestWaitReportWithoutABound(t *testing.T) {
	for _, tc := range []struct {
		w    Wait
		want string
	}{
		{Wait{Addr: "db:5432", Lock: true, Waited: 12 * time.Second, Bound: 30 * time.Second}, "12 s of 30 s (lock_timeout)"},
		{Wait{Addr: "db:5432", Lock: true, Waited: 12 * time.Second, Bound: 0}, "12 s, no bound (lock_timeout)"},
		{Wait{Addr: "db:5432", Stalled: true, Waited: 7 * time.Second, Bound: -1}, "7 s, no bound (statement_timeout)"},
	} {
		if got := tc.w.String(); !strings.Contains(got, tc.want) {
			t.Errorf("%+v: %q, want %q in it", tc.w, got, tc.want)
		}
	}
}
