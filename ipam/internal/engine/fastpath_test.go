package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// The fast path serves the common allocation and hands everything else to
// the full path; both give the same answer.
func TestFastPathServesOnlyTheCommonCase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: testdb.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateCluster(ctx, engine.Cluster{ID: "c1", Prefix: netip.MustParsePrefix("2001:db8::/48"),
		NodeCooldown: engine.DefaultNodeCooldown, InstanceCooldown: engine.DefaultInstanceCooldown}); err != nil {
		t.Fatal(err)
	}
	n := func(id string) engine.Owner { return engine.Owner{Kind: engine.OwnerNode, ID: id, NodeID: id} }
	a, ok := st.FastAllocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: n("a")})
	if !ok || a.Address != netip.MustParseAddr("2001:db8::1") || a.Block.String() != "2001:db8::/64" || a.Generation < 1 {
		t.Fatalf("fresh owner: %+v %v", a, ok)
	}
	// The owner already holds an address: the full path adopts it.
	if _, ok := st.FastAllocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: n("a")}); ok {
		t.Fatal("the fast path allocated a second address for an owner")
	}
	// A cooling address of the owner comes back through the full path.
	if _, err := st.Release(ctx, "c1", n("a"), 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.FastAllocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: n("a")}); ok {
		t.Fatal("the fast path ignored the owner's cooling address")
	}
	if r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: n("a")}); err != nil || r.Address != a.Address {
		t.Fatalf("full path: %v %v", r.Address, err)
	}
	// An exact claim ahead of the counter: the fast path steps aside, the full path steps over it.
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: n("x"), Address: netip.MustParseAddr("2001:db8::2")}); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.FastAllocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: n("b")}); ok {
		t.Fatal("the fast path handed out a claimed address")
	}
	if r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: n("b")}); err != nil || r.Address != netip.MustParseAddr("2001:db8::3") {
		t.Fatalf("after the claim: %v %v", r.Address, err)
	}
	// A pool with exclusions never takes the fast path.
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v6", CIDRs: []netip.Prefix{netip.MustParsePrefix("2001:db8:0:9::/64")},
		Exclude: []netip.Prefix{netip.MustParsePrefix("2001:db8:0:9::1/128")}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.FastAllocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v6"), Owner: n("c")}); ok {
		t.Fatal("the fast path served a pool with exclusions")
	}
	if r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v6"), Owner: n("c")}); err != nil || r.Address != netip.MustParseAddr("2001:db8:0:9::2") {
		t.Fatalf("pool with exclusions: %v %v", r.Address, err)
	}

	// An IPv4 table pool: the fast path takes the oldest free row, never the
	// owner's second one, never a row inside its cooldown.
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/30")}}); err != nil {
		t.Fatal(err)
	}
	v4 := engine.OperatorPool("c1", "v4")
	env := func(id string) engine.Owner { return engine.Owner{Kind: engine.OwnerEnvIPv4, ID: id, EnvID: id} }
	first, ok := st.FastAllocate(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e1")})
	if !ok || first.Block.String() != "10.0.0.0/30" || first.State != engine.StateActive {
		t.Fatalf("IPv4 fast path: %+v %v", first, ok)
	}
	if _, ok := st.FastAllocate(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e1")}); ok {
		t.Fatal("the fast path gave an environment a second IPv4 address")
	}
	if _, err := st.Release(ctx, "c1", env("e1"), 0); err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Addr]bool{}
	for i := 2; ; i++ {
		a, ok := st.FastAllocate(ctx, engine.AllocateRequest{Pool: v4, Owner: env(fmt.Sprintf("e%d", i))})
		if !ok {
			break
		}
		if a.Address == first.Address || seen[a.Address] {
			t.Fatalf("the fast path handed out %s again (cooling or active)", a.Address)
		}
		seen[a.Address] = true
	}
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: env("last")}); !errors.Is(err, engine.ErrExhausted) {
		t.Fatalf("with every other row active and one cooling, the full path says %v, want exhausted", err)
	}
	if u, err := engine.OperatorOf(st).PoolUsage(ctx, "c1"); err != nil {
		t.Fatal(err)
	} else {
		for _, p := range u.Pools {
			if p.PoolID == v4.ID() && (p.Active != int64(len(seen)) || p.Cooling != 1) {
				t.Fatalf("usage of the IPv4 pool after the fast path: %+v (want %d active, 1 cooling)", p.UsageCounts, len(seen))
			}
		}
	}
}

// Neither one-statement allocation walks a whole index of the allocations,
// whatever the planner believes about the table: here its statistics say no
// row is cooling (analyzed while every row was active, as after an apply,
// before a destroy), the plans are the generic ones, and the owners asking
// have a cooling row each. A join that such estimates turn around walked the
// whole reuse queue, cooling rows of every pool included, for every
// allocation.
func TestFastStatementsReadNoIndexWhole(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}); err != nil {
		t.Fatal(err)
	}
	env := func(id string) engine.Owner { return engine.Owner{Kind: engine.OwnerEnvIPv4, ID: id, EnvID: id} }
	type owned struct {
		pool  engine.PoolRef
		owner engine.Owner
	}
	var all []owned
	for i := range 200 {
		all = append(all, owned{engine.InstancePool("c1"), instance(fmt.Sprintf("i-%d", i))})
		if i < 100 {
			all = append(all, owned{engine.OperatorPool("c1", "v4"), env(fmt.Sprintf("e-%d", i))})
		}
	}
	for _, o := range all {
		if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: o.pool, Owner: o.owner}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.Exec(ctx, `ANALYZE ipam_allocations`); err != nil {
		t.Fatal(err)
	}
	for _, o := range all {
		if ok, err := st.Release(ctx, "c1", o.owner, 0); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	for _, q := range []string{`SET plan_cache_mode = force_generic_plan`, strings.ReplaceAll(engine.TxSettings, "SET LOCAL", "SET")} {
		if _, err := raw.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	// The values of the take statements' parameters, by name, as EXECUTE's
	// literals: one owner each, holding a cooling row.
	args := map[string]map[string]string{
		"fresh": {"cluster": `'c1'`, "pool": `'c1/instance'`, "kind": `'instance'`, "owner": `'i-7'`,
			"org": `'acme'`, "env": `'prod'`, "node": `NULL`, "instance": `'i-7'`, "actor": `'test'`,
			"hold": `'1 hour'`, "set_owner": `NULL`, "event": `gen_random_uuid()`, "event_type": `'allocation.reserved'`,
			"avoid": `NULL`, "row": `gen_random_uuid()`},
		"reused": {"cluster": `'c1'`, "pool": `'c1/v4'`, "kind": `'env_ipv4'`, "owner": `'e-7'`,
			"org": `NULL`, "env": `'e-7'`, "node": `NULL`, "instance": `NULL`, "actor": `'test'`,
			"hold": `'1 hour'`, "set_owner": `NULL`, "event": `gen_random_uuid()`, "event_type": `'allocation.reserved'`},
	}
	checked := 0
	for _, hs := range engine.HotStatements() {
		kind, _, ok := strings.Cut(strings.TrimPrefix(hs.Name, "fast path: a "), " allocation in one statement")
		if !ok || args[kind] == nil {
			continue
		}
		checked++
		name := "fast_" + kind
		if _, err := raw.Exec(ctx, `PREPARE `+name+` AS `+hs.SQL); err != nil {
			t.Fatal(err)
		}
		var lits []string
		for _, p := range hs.Params {
			v, ok := args[kind][p]
			if !ok {
				t.Fatalf("%s: no value for its parameter @%s", hs.Name, p)
			}
			lits = append(lits, v)
		}
		var js string
		if err := raw.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE `+name+`(`+strings.Join(lits, ", ")+`)`).Scan(&js); err != nil {
			t.Fatal(err)
		}
		for _, n := range planNodes(t, js) {
			if n.Relation == "ipam_allocations" && (n.Type == "Seq Scan" || (strings.HasPrefix(n.Type, "Index") && n.IndexCond == "")) {
				t.Errorf("%s: %s on ipam_allocations %s with no index condition:\n%s", hs.Name, n.Type, n.Index, js)
			}
		}
	}
	if checked != len(args) {
		t.Fatalf("checked %d fast statements of engine.HotStatements, want %d (renamed?)", checked, len(args))
	}
}

// A hold's own statements (the confirm of an apply's create, the extend of
// a re-plan, the drop) find the hold by its key, whatever the planner
// believes: here its statistics date from before any hold (every row active,
// so that the pool's held rows look like none), the plans are the generic
// ones, and 300 holds wait in the pool, as after the plan of 300 new
// addresses. Found by its state, each confirm walked all of them.
func TestHoldStatementsFindTheHoldByItsKey(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "test")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	for i := range 50 {
		if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance(fmt.Sprintf("i-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.Exec(ctx, `ANALYZE ipam_allocations`); err != nil {
		t.Fatal(err)
	}
	var held engine.Hold
	for i := range 300 {
		h, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance(fmt.Sprintf("h-%d", i))}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if i == 150 {
			held = h
		}
	}
	for _, q := range []string{`SET plan_cache_mode = force_generic_plan`, strings.ReplaceAll(engine.TxSettings, "SET LOCAL", "SET")} {
		if _, err := raw.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	i := slices.IndexFunc(engine.HotStatements(), func(s engine.Statement) bool {
		return s.Name == "fast path: apply of a planned hold in one statement"
	})
	if i < 0 {
		t.Fatal("no confirm of a hold in engine.HotStatements (renamed?)")
	}
	confirm, o := engine.HotStatements()[i], held.Owner
	for _, s := range []struct {
		st   engine.Statement
		args []any
	}{
		{confirm, engine.StatementArgs(confirm, map[string]any{"cluster": "c1", "kind": o.Kind, "owner": o.ID,
			"address": netip.PrefixFrom(held.Address, 128), "org": o.OrgID, "env": o.EnvID, "node": nil, "instance": o.InstanceID,
			"set_owner": nil, "actor": "test", "pool": nil, "event": uuid.New(), "event_type": "instance.allocated"})},
		{engine.SQLExtendHold, []any{held.ID, held.Generation, time.Hour}},
		{engine.SQLDropHold, engine.StatementArgs(engine.SQLDropHold, map[string]any{"id": held.ID, "generation": held.Generation,
			"actor": "test", "event": uuid.New(), "lost_event": uuid.New(), "data": "{}", "lost": false})},
	} {
		tx, err := raw.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var js string
		err = tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+s.st.SQL, s.args...).Scan(&js)
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatal(s.st.Name, err)
		}
		written := 0
		for _, n := range planNodes(t, js) {
			if n.Relation != "ipam_allocations" {
				continue
			}
			if n.Type == "ModifyTable" {
				written += int(n.Rows)
			} else if n.IndexCond == "" || n.Removed > 0 {
				t.Errorf("%s: %s on %s (%s) read %.0f rows besides the hold's:\n%s", s.st.Name, n.Type, n.Index, n.IndexCond, n.Removed, js)
			}
		}
		if written != 1 {
			t.Errorf("%s wrote %d rows, want the hold's:\n%s", s.st.Name, written, js)
		}
	}
}

// planNode is a node of an EXPLAIN (FORMAT JSON) plan.
type planNode struct {
	Type      string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	Index     string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Rows      float64    `json:"Actual Rows"`
	Loops     float64    `json:"Actual Loops"`
	Removed   float64    `json:"Rows Removed by Filter"`
	Hit       int        `json:"Shared Hit Blocks"`
	Read      int        `json:"Shared Read Blocks"`
	Parent    string     `json:"Parent Relationship"`
	Subplan   string     `json:"Subplan Name"`
	Plans     []planNode `json:"Plans"`
}

// planNodes are every node of an EXPLAIN (FORMAT JSON) plan.
func planNodes(t *testing.T, js string) []planNode {
	t.Helper()
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	var out []planNode
	for _, d := range doc {
		out = append(out, d.Plan.all()...)
	}
	return out
}

// all is n and every node under it.
func (n planNode) all() []planNode {
	out := []planNode{n}
	for _, c := range n.Plans {
		out = append(out, c.all()...)
	}
	return out
}

// A table pool's fast take starts its pick at the pool's reuse mark, so it
// does not step over the index entries of the rows taken before it (dead
// until a vacuum): with 3,000 rows taken, the pick reads the reuse index's
// first pages only, and the takes stay in address order. A take rolled back
// behind the mark loses nothing: its row is handed out once nothing past the
// mark is left, and every address of the pool ends up held exactly once.
func TestReuseMarkSkipsTakenRows(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	for name, cidr := range map[string]string{"big": "10.0.0.0/20", "small": "10.1.0.0/29"} {
		if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: name, Cooldown: time.Hour,
			CIDRs: []netip.Prefix{netip.MustParsePrefix(cidr)}}); err != nil {
			t.Fatal(err)
		}
	}
	take := func(tx pgx.Tx, pool, env string) (netip.Addr, error) {
		a, err := st.AllocateEnvIPv4(ctx, tx, engine.EnvIPv4Request{ClusterID: "c1", Pool: pool, OrgID: "o1", EnvID: env})
		return a.Address, err
	}
	const taken = 3000
	for i := range taken {
		if _, err := take(nil, "big", fmt.Sprintf("e-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var n, low, top, lowest int64
	if err := raw.QueryRow(ctx, `SELECT count(*), min(ordinal), max(ordinal), (SELECT min(ordinal) FROM ipam_allocations WHERE pool_id = 'c1/big')
		FROM ipam_allocations WHERE pool_id = 'c1/big' AND state = 'active'`).Scan(&n, &low, &top, &lowest); err != nil {
		t.Fatal(err)
	}
	if n != taken || low != lowest || top-low != taken-1 {
		t.Fatalf("%d takes hold %d rows, ordinals %d to %d (the pool's first: %d), want the first %d in order", taken, n, low, top, lowest, taken)
	}
	for _, q := range []string{`SET plan_cache_mode = force_generic_plan`, strings.ReplaceAll(engine.TxSettings, "SET LOCAL", "SET"), `BEGIN`} {
		if _, err := raw.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	var reuse *engine.Statement
	for _, hs := range engine.HotStatements() {
		if strings.HasPrefix(hs.Name, "fast path: a reused") {
			reuse = &hs
		}
	}
	if reuse == nil {
		t.Fatal("no reused fast statement in engine.HotStatements (renamed?)")
	}
	var js string
	if err := raw.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+reuse.SQL, engine.StatementArgs(*reuse, reuseTakeArgs("c1", "c1/big", "e-x"))...).Scan(&js); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	// The pick's own pages: those its index scan read, less the InitPlans
	// of the CTE it is in (the clock and the mark, evaluated as the scan
	// starts and counted in it). 3,000 dead entries fill about 15 leaf
	// pages; 4 is the descent and the row's own page.
	picks := 0
	for _, cte := range planNodes(t, js) {
		if cte.Subplan != "CTE picked" {
			continue
		}
		inits := 0
		for _, c := range cte.Plans {
			if c.Parent == "InitPlan" {
				inits += c.Hit + c.Read
			}
		}
		for _, nd := range cte.all() {
			if nd.Index != "ipam_allocations_reuse" {
				continue
			}
			picks++
			if own := nd.Hit + nd.Read - inits; own > 4 {
				t.Errorf("the pick read %d pages of the reuse index and its rows after %d takes, want at most 4:\n%s", own, taken, js)
			}
		}
	}
	if picks != 1 {
		t.Fatalf("%d picks on ipam_allocations_reuse in the reused fast statement's plan, want 1:\n%s", picks, js)
	}

	// The small pool's 6 addresses: the first take rolls back after a later
	// one has committed past it.
	tx, err := raw.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	first, err := take(tx, "small", "s-rolled-back")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := take(nil, "small", "s-0"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[netip.Addr]bool{}
	for i := 1; i < 6; i++ {
		a, err := take(nil, "small", fmt.Sprintf("s-%d", i))
		if err != nil {
			t.Fatalf("take %d of the pool's 6 addresses: %v", i+1, err)
		}
		got[a] = true
	}
	if !got[first] {
		t.Errorf("the rolled-back take's address %s was not handed out again (got %v)", first, got)
	}
	if err := raw.QueryRow(ctx, `SELECT count(DISTINCT address) FROM ipam_allocations WHERE pool_id = 'c1/small' AND state = 'active'`).Scan(&n); err != nil || n != 6 {
		t.Errorf("the small pool holds %d active addresses, want all 6 (%v)", n, err)
	}
}

// Every look-up of an owner names its cluster and the owner, and the owner
// indexes serve it. No other index may serve it by the cluster alone: that
// reads every live allocation of the cluster, and the planner takes such an
// index whenever the costs tie, as they do on a table with no statistics yet
// (the labels index did, until it left out rows with no label). So, with the
// owner indexes dropped (in a transaction rolled back) and sequential scans
// discouraged, no hot statement that looks up an owner may find an index
// whose condition names the cluster but neither the owner nor an address.
func TestOwnerLookupsHaveOnlyTheOwnerIndexes(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "test")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}); err != nil {
		t.Fatal(err)
	}
	// Rows of every kind, labelled and not.
	for i := range 20 {
		for _, r := range []engine.AllocateRequest{
			{Pool: engine.NodePool("c1"), Owner: engine.Owner{Kind: engine.OwnerNode, ID: fmt.Sprintf("n-%d", i), NodeID: fmt.Sprintf("n-%d", i)}},
			{Pool: engine.InstancePool("c1"), Owner: instance(fmt.Sprintf("i-%d", i))},
			{Pool: engine.OperatorPool("c1", "v4"), Owner: engine.Owner{Kind: engine.OwnerEnvIPv4, ID: fmt.Sprintf("e-%d", i), OrgID: "acme", EnvID: fmt.Sprintf("e-%d", i)}},
		} {
			if _, err := st.Allocate(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{`DROP INDEX ipam_allocations_owner_active, ipam_allocations_owner_cooling`, `SET LOCAL enable_seqscan = off`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	id := uuid.New()
	args := map[string][]any{
		"owner probe":  {"c1", "instance", "i-7", "acme", "prod"},
		"refresh read": {"c1", "instance", "i-7"},
	}
	// The statements with named parameters (engine.Statement.Params).
	named := map[string]map[string]any{
		"release": {"cluster": "c1", "kind": "instance", "owner": "i-7", "generation": int64(0), "actor": "test",
			"event": id, "event_type": "instance.released"},
		"hold look (a plan's first read)": {"cluster": "c1", "kind": "instance", "owner": "i-7", "actor": "test",
			"fresh_for": 5 * time.Minute, "origin": "/work/test"},
		"fast path: a fresh allocation in one statement (a counter pool)": {"cluster": "c1", "pool": "c1/instance", "kind": "instance",
			"owner": "i-99", "org": "acme", "env": "prod", "node": nil, "instance": "i-99", "actor": "test",
			"hold": time.Duration(0), "set_owner": nil, "event": id, "event_type": "instance.allocated", "avoid": nil,
			"row": id},
		"fast path: a reused allocation in one statement (an IPv4 table pool)": reuseTakeArgs("c1", "c1/v4", "e-99"),
		"fast path: apply of a planned hold in one statement": {"cluster": "c1", "kind": "instance", "owner": "i-7",
			"address": netip.MustParsePrefix("2001:db8::7/128"), "org": "acme", "env": "prod", "node": nil, "instance": "i-7",
			"set_owner": nil, "actor": "test", "pool": nil, "event": id, "event_type": "instance.allocated"},
	}
	checked := 0
	for _, hs := range engine.HotStatements() {
		a, ok := args[hs.Name]
		if v, isNamed := named[hs.Name]; isNamed {
			a, ok = engine.StatementArgs(hs, v), true
		}
		if !ok {
			continue
		}
		checked++
		var js string
		if err := tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+hs.SQL, a...).Scan(&js); err != nil {
			t.Fatal(hs.Name, err)
		}
		for _, n := range planNodes(t, js) {
			if strings.HasPrefix(n.Index, "ipam_allocations") && strings.Contains(n.IndexCond, "cluster_id") &&
				!strings.Contains(n.IndexCond, "owner_id") && !strings.Contains(n.IndexCond, "address") {
				t.Errorf("%s: %s using %s finds an owner by the cluster alone (%s)", hs.Name, n.Type, n.Index, n.IndexCond)
			}
		}
	}
	if checked != len(args)+len(named) {
		t.Fatalf("checked %d statements of engine.HotStatements, want %d (renamed?)", checked, len(args)+len(named))
	}
}

// No index of ipam_pool_stripes names a column a stripe advance changes, and
// the schema bounds a pool to 64 stripes. Every fresh allocation advances a
// stripe (its next ordinal, its active count); that is a HOT update, with no
// new index entry and no dead one for the next pick to step over, only while
// no index names those columns. The pick sorts a pool's stripes instead,
// which the bound keeps small.
func TestStripeAdvancesCanBeHOT(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	rows, _ := raw.Query(ctx, `SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'ipam_pool_stripes'::regclass`)
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(defs) == 0 {
		t.Fatalf("the indexes of ipam_pool_stripes: %q, %v", defs, err)
	}
	for _, def := range defs {
		for _, col := range []string{"next_ordinal", "active"} {
			if strings.Contains(def, col) {
				t.Errorf("an index names %s, which every allocation changes, so no stripe advance is HOT: %s", col, def)
			}
		}
	}
	_, err = raw.Exec(ctx, `UPDATE ipam_pools SET stripes = 65 WHERE id = 'c1/instance'`)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.ConstraintName != "ipam_pools_stripes_bounded" {
		t.Fatalf("a pool of 65 stripes: got %v, want a violation of ipam_pools_stripes_bounded", err)
	}
}

// The one-statement allocations run their generic plan from the first call,
// on the client's own connections and in a caller's transaction, and a
// caller's transaction keeps its own plan_cache_mode afterwards. Left to
// choose, PostgreSQL planned the fresh statement again at every call on some
// connections, which cost twice what running it did.
func TestFastStatementsUseTheirGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: url, MaxConnections: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	// plans counts the executions of the fresh statement prepared on q's
	// connection, by kind of plan.
	plans := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) (generic, custom int64) {
		t.Helper()
		if err := q.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
			FROM pg_prepared_statements WHERE statement LIKE '%guard owner_free%' AND statement LIKE '%next_ordinal%'`).Scan(&generic, &custom); err != nil {
			t.Fatal(err)
		}
		return generic, custom
	}
	for i := range 8 {
		if _, err := st.AllocateNode(ctx, nil, engine.NodeRequest{ClusterID: "c1", NodeID: fmt.Sprintf("n%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if g, c := plans(st.RawPool()); g < 8 || c != 0 {
		t.Errorf("the client's connection ran the fresh statement with %d generic and %d custom plans, want 8 or more and 0", g, c)
	}

	raw, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close(context.Background()) })
	// What autovacuum does soon: the planner learns that the pools and the
	// clusters fit in a page.
	if _, err := raw.Exec(ctx, `ANALYZE ipam_pools, ipam_clusters`); err != nil {
		t.Fatal(err)
	}
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The caller's own planning: the server's defaults for sequential scans
	// and JIT (the test databases turn JIT off), a plan_cache_mode of its own.
	if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_custom_plan; SET LOCAL enable_seqscan = on; SET LOCAL jit = on`); err != nil {
		t.Fatal(err)
	}
	// seqScans counts this transaction's sequential scans of the IPAM's
	// tables so far.
	seqScans := func() (n int64) {
		t.Helper()
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_xact_user_tables WHERE relname LIKE 'ipam\_%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	scans := seqScans()
	for i := range 8 {
		if _, err := st.AllocateInstance(ctx, tx, engine.InstanceRequest{ClusterID: "c1", InstanceID: fmt.Sprintf("i%d", i), OrgID: "o1", EnvID: "e1"}); err != nil {
			t.Fatal(err)
		}
	}
	if g, c := plans(tx); g < 8 || c != 0 {
		t.Errorf("the caller's transaction ran the fresh statement with %d generic and %d custom plans, want 8 or more and 0", g, c)
	}
	// Planned with the caller's enable_seqscan, the statement scanned every
	// pool twice and every cluster once per allocation.
	if n := seqScans() - scans; n != 0 {
		t.Errorf("8 allocations in the caller's transaction scanned the IPAM's tables sequentially %d times, want 0 (planned with the caller's enable_seqscan?)", n)
	}
	var mode, seqscan, jit string
	if err := tx.QueryRow(ctx, `SELECT current_setting('plan_cache_mode'), current_setting('enable_seqscan'), current_setting('jit')`).Scan(&mode, &seqscan, &jit); err != nil {
		t.Fatal(err)
	}
	if mode != "force_custom_plan" || seqscan != "on" || jit != "on" {
		t.Errorf("after the allocations the caller's transaction has plan_cache_mode %q, enable_seqscan %q and jit %q, want its own force_custom_plan, on and on", mode, seqscan, jit)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// reuseTakeArgs are the values of the reuse take's parameters for one
// environment's IPv4 address.
func reuseTakeArgs(cluster, pool, env string) map[string]any {
	return map[string]any{"cluster": cluster, "pool": pool, "kind": "env_ipv4", "owner": env,
		"org": "acme", "env": env, "node": nil, "instance": nil, "actor": "test", "hold": time.Duration(0),
		"set_owner": nil, "event": uuid.New(), "event_type": "env.ipv4_addon_enabled"}
}

// The apply of a planned address in a pool of several blocks answers the
// block that holds it, from the confirming statement itself: in a caller's
// transaction a second read would need a connection of the pool besides the
// caller's.
func TestConfirmedHoldAnswersItsBlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: testdb.New(t), Actor: "terraform"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4",
		CIDRs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/30"), netip.MustParsePrefix("198.51.100.0/30")}}); err != nil {
		t.Fatal(err)
	}
	req := engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: engine.Owner{Kind: engine.OwnerEnvIPv4, ID: "e1", EnvID: "e1"},
		Address: netip.MustParseAddr("198.51.100.2")}
	if _, err := st.Reserve(ctx, req, time.Hour); err != nil {
		t.Fatal(err)
	}
	a, ok := st.FastAllocate(ctx, req)
	if !ok || a.State != engine.StateActive || a.Address != req.Address || a.Block.String() != "198.51.100.0/30" {
		t.Fatalf("the apply of the hold on %s: %+v (fast path %v), want it active in block 198.51.100.0/30", req.Address, a, ok)
	}
}
