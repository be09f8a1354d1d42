package engine

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

var guardMarkerRe = regexp.MustCompile(`/\* guard ([a-z_]+) \*/ `)

// Every statement that hands out an address, or picks one for the full path
// to hand out, carries exactly the guards handOutStatements says, each
// taken from the registry (the marker followed by the registry's SQL for
// it): a guard left out of one statement, restated by hand, or added to a
// statement without saying so fails here.
func TestEveryHandOutStatementCarriesItsGuards(t *testing.T) {
	known := map[string]guard{}
	for _, g := range handOutGuards {
		if _, dup := known[g.name]; dup {
			t.Errorf("guard %s is in the registry twice", g.name)
		}
		known[g.name] = g
	}
	carried := map[string]int{}
	for _, h := range handOutStatements() {
		var got []string
		for _, m := range guardMarkerRe.FindAllStringSubmatch(h.sql, -1) {
			got = append(got, m[1])
			carried[m[1]]++
		}
		for _, g := range h.guards {
			if !slices.Contains(got, g.name) {
				t.Errorf("%s: lacks the guard %s (%s)", h.name, g.name, g.rule)
			}
		}
		for _, n := range got {
			if _, ok := known[n]; !ok {
				t.Errorf("%s: carries a guard %s that the registry does not define", h.name, n)
				continue
			}
			if !slices.ContainsFunc(h.guards, func(g guard) bool { return g.name == n }) {
				t.Errorf("%s: carries the guard %s, which handOutStatements does not list for it", h.name, n)
			}
		}
		// What follows each marker is the registry's SQL, not a copy edited
		// in place: every piece of the definition between the statement's
		// own expressions (written "?" here), in order, the first at once.
		for _, loc := range guardMarkerRe.FindAllStringSubmatchIndex(h.sql, -1) {
			g := known[h.sql[loc[2]:loc[3]]]
			if g.name == "" {
				continue
			}
			if !followsDefinition(h.sql[loc[1]:], g) {
				t.Errorf("%s: the guard %s reads %.80q, not the registry's definition", h.name, g.name, h.sql[loc[1]:])
			}
		}
	}
	for _, g := range handOutGuards {
		if carried[g.name] == 0 {
			t.Errorf("guard %s is carried by no hand-out statement", g.name)
		}
	}
}

// namedParam is a named parameter, which a compiled statement carries as $n.
var namedParam = regexp.MustCompile(`@[a-z_]+`)

// followsDefinition tells whether text starts with guard g's SQL as the
// registry defines it: every piece of the definition between the
// statement's own expressions (its rows named or not, its parameters named
// or numbered), in order, the first at once.
func followsDefinition(text string, g guard) bool {
	for _, rows := range []string{"?", ""} {
		want := g.in(guardAt{cluster: "?", kind: "?", owner: "?", org: "?", env: "?", avoid: "?", now: "?", rows: rows, hold: "?"})
		want = namedParam.ReplaceAllString(strings.TrimPrefix(want, guardMarker(g.name)), "?")
		rest, ok := text, true
		for i, piece := range strings.Split(want, "?") {
			at := strings.Index(rest, piece)
			if at < 0 || (i == 0 && at != 0) {
				ok = false
				break
			}
			rest = rest[at+len(piece):]
		}
		if ok {
			return true
		}
	}
	return false
}

// A guard's marker is written in one place, guardMarker: a statement
// elsewhere cannot claim a guard it does not take from the registry.
func TestGuardMarkersComeFromTheRegistry(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(string(src), "/* guard ")
		if name == "handout.go" {
			n-- // guardMarker itself
		}
		if n != 0 {
			t.Errorf("%s writes a guard's marker by hand %d times: take the guard from the registry (guard.in)", name, n)
		}
	}
}

// Every guard has a mutant (scripts/mutants.sh, named guard-NAME) that
// breaks its definition in the registry, and names the tests that must fail
// then: a guard no test depends on is a guard nothing checks.
func TestEveryGuardHasAMutant(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "scripts", "mutants.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range handOutGuards {
		name := "guard-" + strings.ReplaceAll(g.name, "_", "-")
		if !strings.Contains(string(src), `"`+name+`|ipam/internal/engine/handout.go|`) {
			t.Errorf("guard %s has no mutant %s of ipam/internal/engine/handout.go in scripts/mutants.sh", g.name, name)
		}
	}
}

// The compiler of named parameters numbers each name once, in order of first
// use, leaves string literals, quoted identifiers and comments alone, and
// refuses a positional parameter and a missing or unknown value.
func TestNamedStatements(t *testing.T) {
	st := named("t", `SELECT @b, '@x', "@y" -- @z's
		/* @w */ , @a::int, @b, a @> b, @y`)
	if want := `SELECT $1, '@x', "@y" -- @z's
		/* @w */ , $2::int, $1, a @> b, $3`; st.sql != want {
		t.Errorf("compiled to %q, want %q", st.sql, want)
	}
	if !slices.Equal(st.names, []string{"b", "a", "y"}) {
		t.Errorf("names %v, want [b a y]", st.names)
	}
	if got := st.args(map[string]any{"a": 1, "b": 2, "y": 3}); !slices.Equal(got, []any{2, 1, 3}) {
		t.Errorf("args %v, want [2 1 3]", got)
	}
	for what, f := range map[string]func(){
		"a positional parameter": func() { named("t", `SELECT $1`) },
		"a missing value":        func() { st.args(map[string]any{"a": 1, "b": 2}) },
		"an unknown value":       func() { st.args(map[string]any{"a": 1, "b": 2, "y": 3, "c": 4}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", what)
				}
			}()
			f()
		}()
	}
	// Given to pgx as params, the same mistakes are errors, not panics: pgx
	// calls RewriteQuery holding a connection of the pool, which a panic
	// would never give back (and the client's Close would wait for it). An
	// empty label goes as NULL, a duration as an interval, a UUID as bytes.
	for what, p := range map[string]params{
		"a missing value":  {"a": 1, "b": 2},
		"an unknown value": {"a": 1, "b": 2, "y": 3, "c": 4},
	} {
		if _, _, err := p.RewriteQuery(context.Background(), nil, st.sql, nil); err == nil {
			t.Errorf("params with %s: no error", what)
		}
	}
	if _, _, err := (params{"a": 1}).RewriteQuery(context.Background(), nil, "SELECT $1", nil); err == nil {
		t.Errorf("params for a statement named() did not compile: no error")
	}
	id := uuid.New()
	_, got, err := (params{"a": label(""), "b": time.Second, "y": id}).RewriteQuery(context.Background(), nil, st.sql, nil)
	if err != nil || got[1] != (*string)(nil) || got[0] != durationInterval(time.Second) || got[2] != [16]byte(id) {
		t.Errorf("params converted to %#v, %v", got, err)
	}
}
