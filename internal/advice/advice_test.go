package advice

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// TestEveryCodeHasItsOwnTitleAndAdvice: each error class is named for what
// it is and says what to do about that, not about another class.
func TestEveryCodeHasItsOwnTitleAndAdvice(t *testing.T) {
	cases := []struct {
		err error
		// want and not are phrases the advice must and must not hold.
		want, not []string
		conn      bool
	}{
		{&ipam.RefusedError{Addr: "db:5432", Answers: []string{"db:5432 rejected the credentials"}},
			[]string{"credentials", "database name", "TLS", "sslmode", "will not help"}, []string{"running and reachable", "firewall"}, true},
		{&ipam.UnavailableError{Addr: "db:5432", Waited: 31 * time.Second, Bound: 30 * time.Second, Err: errors.New("refused")},
			[]string{"db:5432", "host and port", "waited 31s", "failover_timeout 30s"}, []string{"credentials", "password"}, true},
		{&ipam.UnavailableError{Addr: "db:5432", Waited: 5 * time.Second, Bound: 30 * time.Second, FirstContact: true, Err: errors.New("refused")},
			[]string{"db:5432", "host and port", "wrong host or port", "after 5s", "failover_timeout's 30s", "explicitly"},
			[]string{"credentials", "needs a larger failover_timeout"}, true},
		{&ipam.UnavailableError{Addr: "db:5432", Reached: true, Err: errors.New("read-only")},
			[]string{"db:5432", "target_session_attrs=read-write", "did not wait"}, []string{"credentials"}, true},
		{&ipam.BusyError{What: "canceling statement due to lock timeout; held: pid 4242 (psql, user ops) holds AccessExclusiveLock on ipam_allocations", Timeout: 30 * time.Second},
			[]string{"pid 4242 (psql, user ops) holds AccessExclusiveLock", "pg_stat_activity", "lock_timeout"}, []string{"credentials", "host and port"}, true},
		{&ipam.TimeoutError{What: "x", Timeout: time.Minute}, []string{"statement_timeout", "overloaded"}, []string{"credentials", "lock"}, true},
		{&ipam.TimeoutError{What: "x", Timeout: 3 * time.Second, Holders: "pid 474 (operator-maintenance, idle in transaction)"},
			[]string{"waited for a lock", "pg_locks", "lock_timeout below statement_timeout"}, []string{"credentials", "overloaded"}, true},
		{&ipam.TimeoutError{What: "x", Timeout: 4 * time.Second, Take: true}, []string{"lock_timeout and 2 s", "LOCK TABLE", "pg_locks"},
			[]string{"credentials", "raise statement_timeout"}, true},
		{&ipam.UnavailableError{Addr: "db:5432", Reached: true, NoSlots: true, Answers: []string{`db:5432 has no connection slot left (too many connections for role "ipam")`},
			Err: errors.New("slots")}, []string{"CONNECTION LIMIT", "max_connections", "PgBouncer"}, []string{"target_session_attrs", "credentials"}, true},
		{&ipam.ReadOnlyError{Msg: "x"}, []string{"read-only", "primary", "target_session_attrs=read-write"}, []string{"credentials", "grants"}, true},
		{&ipam.DeniedError{Msg: "x"}, []string{"grants of the database setup guide", "SELECT", "ipamctl migrate up"}, []string{"credentials", "standby"}, true},
		{&ipam.SchemaError{Msg: "x"}, []string{"ipamctl migrate up", "migrate status"}, nil, true},
		{&ipam.ExhaustedError{PoolID: "p"}, []string{"Nothing was allocated", "Add blocks"}, []string{"reachable"}, false},
		{&ipam.OwnerConflictError{OwnerKind: "node"}, []string{"import it", "ipamctl release", "one address in a cluster, whatever the actor", "keep it in one of them"},
			[]string{"reachable", "its own actor"}, false},
		{&ipam.AddressInUseError{Address: "10.0.0.1"}, []string{"ipamctl lookup", "another address"}, nil, false},
		{&ipam.AddressInUseError{Address: "10.0.0.1", State: ipam.StateReserved}, []string{"plan-time hold", "ipamctl expire-hold ADDRESS"},
			[]string{"ipamctl release"}, false},
		{&ipam.OwnerConflictError{OwnerKind: "node", Held: true}, []string{"Apply that plan", "ipamctl expire-hold"},
			[]string{"import it", "ipamctl release"}, false},
		{&ipam.AddressCoolingError{Address: "10.0.0.1"}, []string{"cooldown", "wait"}, nil, false},
		{&ipam.InvalidError{Field: "f", Msg: "bad"}, []string{"Correct the input"}, nil, false},
		{ipam.ErrNotFound, []string{"does not exist"}, nil, false},
		{&ipam.ConflictError{Msg: "x"}, []string{"try again", "depends"}, nil, false},
		{&ipam.ConflictError{Msg: "x", ExistingKind: "pool", ExistingID: "c1/a"}, []string{"pool c1/a already exists", "import it"}, []string{"try again"}, false},
		{&ipam.ConfirmedError{}, []string{"Nothing was released", "--force"}, []string{"try again"}, false},
		{&ipam.HoldLostError{}, []string{"run the plan again"}, nil, false},
	}
	titles := map[string]string{}
	seen := map[string]bool{}
	for _, c := range cases {
		e := For(c.err)
		t.Run(e.Code, func(t *testing.T) {
			if e.Code == "" || e.Title == "" || e.Advice == "" {
				t.Fatalf("For(%T) = %+v: want a code, a title and advice", c.err, e)
			}
			if other, ok := titles[e.Title]; ok && other != e.Code {
				t.Errorf("title %q is shared by %s and %s", e.Title, other, e.Code)
			}
			titles[e.Title] = e.Code
			for _, w := range c.want {
				if !strings.Contains(e.Advice, w) {
					t.Errorf("advice for %s lacks %q: %s", e.Code, w, e.Advice)
				}
			}
			for _, n := range c.not {
				if strings.Contains(e.Advice, n) {
					t.Errorf("advice for %s says %q, which is another class's advice: %s", e.Code, n, e.Advice)
				}
			}
			if e.Connection != c.conn {
				t.Errorf("%s: Connection = %v, want %v", e.Code, e.Connection, c.conn)
			}
		})
		seen[e.Code] = true
	}
	for _, code := range Codes {
		if !seen[code] {
			t.Errorf("code %s is listed in Codes but has no case here", code)
		}
	}
	// Every code package ipam declares is explained: a new one without
	// advice fails here.
	src, err := os.ReadFile("../../ipam/internal/engine/errors.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s+Code\w+\s+= "(\w+)"`).FindAllStringSubmatch(string(src), -1) {
		if !slices.Contains(Codes, m[1]) {
			t.Errorf("ipam declares code %s, which advice.Codes does not list", m[1])
		}
		if e := For(codeOnly(m[1])); e.Title == "IPAM Error" {
			t.Errorf("code %s has no advice of its own", m[1])
		}
	}
	if e := For(errors.New("boom")); e.Code != "" || e.Title != "IPAM Error" {
		t.Errorf("an uncoded error: %+v", e)
	}
}

type codeOnly string

func (c codeOnly) Error() string { return string(c) }
func (c codeOnly) Code() string  { return string(c) }

// The guide's table of errors lists every code there is advice for.
func TestErrorTableListsEveryCode(t *testing.T) {
	src, err := os.ReadFile("../../templates/guides/production-database.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range Codes {
		if !regexp.MustCompile("(?m)^\\| [^|]*`" + code + "`").Match(src) {
			t.Errorf("the error table of the production-database guide has no row for %s", code)
		}
	}
}
