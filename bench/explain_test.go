package bench

import (
	"encoding/json"
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
