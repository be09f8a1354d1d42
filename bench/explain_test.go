package bench

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// The EXPLAIN gate lets through one Sort: the stripe pick's, of one pool's
// stripes read by the primary key. A Sort of anything else, or of the stripes
// read another way, is a problem.
func TestExplainGateSorts(t *testing.T) {
	stripesByKey := `{"Node Type": "Bitmap Heap Scan", "Relation Name": "ipam_pool_stripes", "Plans": [
		{"Node Type": "Bitmap Index Scan", "Index Name": "ipam_pool_stripes_pkey", "Index Cond": "(pool_id = $1)"}]}`
	for _, c := range []struct {
		name, input string
		ok          bool
	}{
		{"a pool's stripes by the key", stripesByKey, true},
		{"a pool's stripes by an index scan of the key", `{"Node Type": "Index Scan", "Relation Name": "ipam_pool_stripes",
			"Index Name": "ipam_pool_stripes_pkey", "Index Cond": "(pool_id = $1)"}`, true},
		{"every stripe, walked", `{"Node Type": "Index Scan", "Relation Name": "ipam_pool_stripes",
			"Index Name": "ipam_pool_stripes_pkey", "Index Cond": ""}`, false},
		{"the stripes by a sequential scan", `{"Node Type": "Seq Scan", "Relation Name": "ipam_pool_stripes"}`, false},
		{"the stripes by another index", `{"Node Type": "Index Scan", "Relation Name": "ipam_pool_stripes",
			"Index Name": "ipam_pool_stripes_fresh", "Index Cond": "(pool_id = $1)"}`, false},
		{"allocations by their pool", `{"Node Type": "Index Scan", "Relation Name": "ipam_allocations",
			"Index Name": "ipam_allocations_pool_state", "Index Cond": "(pool_id = $1)"}`, false},
		{"the stripes joined to allocations", `{"Node Type": "Nested Loop", "Plans": [` + stripesByKey + `,
			{"Node Type": "Index Scan", "Relation Name": "ipam_allocations", "Index Name": "ipam_allocations_pool_state", "Index Cond": "(pool_id = $1)"}]}`, false},
		{"nothing read", `{"Node Type": "Result"}`, false},
	} {
		var in planNode
		if err := json.Unmarshal([]byte(c.input), &in); err != nil {
			t.Fatal(c.name, err)
		}
		sort := planNode{NodeType: "Sort", Plans: []planNode{in}}
		if got := len(sort.problems()) == 0; got != c.ok {
			t.Errorf("a Sort of %s: passes = %v, want %v (problems %q)", c.name, got, c.ok, sort.problems())
		}
	}
}

// Every hot statement's entry gives a value to each of its parameters, and
// to nothing else: a named statement's (operator.Statement.Params) by name, a
// positional one's as many as its highest $n. EXPLAIN would otherwise plan
// with NULL where a value is missing (a note, not a failure).
func TestExplainValuesNameEveryParameter(t *testing.T) {
	hot := hotSQL()
	dollar := regexp.MustCompile(`\$([0-9]+)`)
	f := &planFixture{}
	for _, h := range hotStatements {
		st, ok := hot[h.name]
		if !ok {
			t.Errorf("%s: the core names no such hot statement", h.name)
			continue
		}
		if len(st.Params) > 0 {
			if h.named == nil {
				t.Errorf("%s: its parameters are named (%v): give its values by name (named)", h.name, st.Params)
				continue
			}
			v := h.named(f)
			for _, p := range st.Params {
				if _, ok := v[p]; !ok {
					t.Errorf("%s: no value for @%s", h.name, p)
				}
			}
			for p := range v {
				if !slices.Contains(st.Params, p) {
					t.Errorf("%s: a value for @%s, which it does not use", h.name, p)
				}
			}
			continue
		}
		if h.params == nil {
			t.Errorf("%s: its parameters are positional: give its values in order (params)", h.name)
			continue
		}
		n := 0
		for _, m := range dollar.FindAllStringSubmatch(st.SQL, -1) {
			k, _ := strconv.Atoi(m[1])
			n = max(n, k)
		}
		if got := len(h.params(f)); got != n {
			t.Errorf("%s: %d values for parameters up to $%d", h.name, got, n)
		}
	}
}

// A jsonb value goes to EXECUTE as its JSON text: the conditional write's
// @data once went as Go's "map[]", and its EXPLAIN failed in every make
// bench ("invalid input syntax for type json").
func TestSQLLiteralOfJSON(t *testing.T) {
	for v, want := range map[string]string{
		sqlLiteral(map[string]any{}):                 `'{}'`,
		sqlLiteral(map[string]any{"reason": "it's"}): `'{"reason":"it''s"}'`,
	} {
		if v != want {
			t.Errorf("got %s, want %s", v, want)
		}
	}
}
