package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// namedStatement is a statement written with named parameters (@cluster,
// @pool) and compiled, once, into what the server runs: the same text with
// each name turned into its position ($1, $2, in order of first use). A
// reader sees the statement whole, every parameter by its name, and no
// fragment carries a number that another fragment must agree with; the
// server gets a positional statement, prepared once per connection like any
// other (pgx.NamedArgs would rewrite the text again at every call).
type namedStatement struct {
	name  string   // what HotStatements and errors call it
	sql   string   // the positional text
	names []string // the parameters, by position
}

// named compiles a statement with named parameters. A name is @ followed by
// a letter and letters, digits or underscores; '@' inside a string literal,
// a quoted identifier or a comment is left alone. It panics on a statement
// without parameters' names where it needs one (a stray $n), so that a
// mistake fails at package initialisation, in every test.
func named(name, sql string) namedStatement {
	var b strings.Builder
	st := namedStatement{name: name}
	pos := map[string]int{}
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(sql) && sql[j] != c {
				j++
			}
			b.WriteString(sql[i:min(j+1, len(sql))])
			i = j + 1
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				j = len(sql) - i
			}
			b.WriteString(sql[i : i+j])
			i += j
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			j := strings.Index(sql[i+2:], "*/")
			if j < 0 {
				panic(fmt.Sprintf("statement %s: an unterminated comment", name))
			}
			b.WriteString(sql[i : i+2+j+2])
			i += 2 + j + 2
		case c == '$' && i+1 < len(sql) && sql[i+1] >= '0' && sql[i+1] <= '9':
			panic(fmt.Sprintf("statement %s: a positional parameter in a named statement (name it @...)", name))
		case c == '@' && i+1 < len(sql) && isNameStart(sql[i+1]):
			j := i + 1
			for j < len(sql) && isNamePart(sql[j]) {
				j++
			}
			n := sql[i+1 : j]
			k, ok := pos[n]
			if !ok {
				st.names = append(st.names, n)
				k = len(st.names)
				pos[n] = k
			}
			b.WriteString("$" + strconv.Itoa(k))
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	st.sql = b.String()
	compiled.Store(st.sql, st)
	return st
}

// compiled holds every named statement by its positional text, for params.
var compiled sync.Map

// params are the values of a named statement's parameters, by name, given
// as the query's one argument: tx.QueryRow(ctx, st.sql, params{"id": id}).
// pgx hands them to RewriteQuery (a pgx.QueryRewriter, as pgx.NamedArgs is),
// which puts them in the order of the positions the statement was compiled
// to, found by its text. A label is sent as NULL when it is empty, a
// time.Duration as an interval.
type params map[string]any

// label is an optional text parameter (an owner's org, env, node, instance
// or set, an event's cluster or pool): NULL when empty.
type label string

// RewriteQuery orders the values for the statement sql (pgx.QueryRewriter).
// A UUID goes as its 16 bytes, which the statement's described parameter
// type (uuid) takes as they are (checkExecMode refuses the modes that do
// not describe): pgx encodes a uuid.UUID through its database/sql Valuer,
// as text parsed back, at about fifteen times the cost (a fast take's ids,
// and arrays of them, at every call).
func (p params) RewriteQuery(_ context.Context, _ *pgx.Conn, sql string, _ []any) (string, []any, error) {
	st, ok := compiled.Load(sql)
	if !ok {
		return "", nil, fmt.Errorf("ipam: named parameters for a statement that named() did not compile: %.60q", sql)
	}
	args, err := st.(namedStatement).values(p)
	if err != nil {
		return "", nil, err
	}
	for i, v := range args {
		switch v := v.(type) {
		case uuid.UUID:
			args[i] = [16]byte(v)
		case []uuid.UUID:
			out := make([][16]byte, len(v))
			for j, u := range v {
				out[j] = u
			}
			args[i] = out
		case label:
			args[i] = nullable(string(v))
		case time.Duration:
			args[i] = durationInterval(v)
		case []label:
			out := make([]*string, len(v))
			for j, l := range v {
				out[j] = nullable(string(l))
			}
			args[i] = out
		}
	}
	return sql, args, nil
}

func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isNamePart(c byte) bool  { return isNameStart(c) || c >= '0' && c <= '9' }

// values orders the values of the statement's parameters by position.
// Every parameter must have a value, and every value a parameter: a misspelt
// or forgotten name is an error (a programming error, which every test of
// the statement finds), never a run with NULL.
func (st namedStatement) values(v map[string]any) ([]any, error) {
	out := make([]any, len(st.names))
	for i, n := range st.names {
		x, ok := v[n]
		if !ok {
			return nil, fmt.Errorf("ipam: statement %s: no value for @%s", st.name, n)
		}
		out[i] = x
	}
	if len(v) != len(st.names) {
		for n := range v {
			if !slices.Contains(st.names, n) {
				return nil, fmt.Errorf("ipam: statement %s: a value for @%s, which it does not use", st.name, n)
			}
		}
	}
	return out, nil
}

// args is values for a caller that holds no connection (the tests, the
// bench's EXPLAIN): a mistake panics. RewriteQuery, which pgx calls with a
// connection taken from the pool, returns the error instead: a panic there
// would never give the connection back, and a Close would wait for it.
func (st namedStatement) args(v map[string]any) []any {
	out, err := st.values(v)
	if err != nil {
		panic(err.Error())
	}
	return out
}

// nullable is s as an SQL argument: NULL when empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// intervalDuration and durationInterval convert between a Go duration and
// PostgreSQL's interval (a month counted as 30 days).
func intervalDuration(i pgtype.Interval) time.Duration {
	return time.Duration(i.Microseconds)*time.Microsecond +
		time.Duration(i.Days)*24*time.Hour + time.Duration(i.Months)*30*24*time.Hour
}

func durationInterval(d time.Duration) pgtype.Interval {
	return pgtype.Interval{Microseconds: d.Microseconds(), Valid: true}
}
