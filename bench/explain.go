package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// The hot statements are the core's named statements (operator.HotStatements),
// not copies: each entry below names one and gives the parameters to EXPLAIN
// it with. A statement the core no longer names fails the run, and a named
// statement with no entry here fails it too, so the two lists stay in step.

// hotStatement is one statement of the allocation path.
type hotStatement struct {
	name   string // its name in operator.HotStatements
	db     string // "growth" (the 1M instance pool) or "reuse" (the full pool with 1M cooled rows)
	params func(f *planFixture) []any
	// named: the values of a statement with named parameters
	// (operator.Statement.Params), by name.
	named func(f *planFixture) map[string]any
}

// values are h's parameter values in the statement's order.
func (h hotStatement) values(f *planFixture, st operator.Statement) []any {
	if h.named == nil {
		return h.params(f)
	}
	v := h.named(f)
	out := make([]any, len(st.Params))
	for i, n := range st.Params {
		out[i] = v[n]
	}
	return out
}

// freshTake and reuseTake are the values of the take statements for the
// owners given (one owner: the one-owner statement's scalars; several: one
// array per field), as EXECUTE's literals.
func freshTake(f *planFixture, owners ...string) map[string]any {
	v := takeValues(f.clusterID, f.poolID, "instance", "instance.allocated", owners)
	blocks := make([]string, len(owners))
	for i := range owners {
		blocks[i] = f.clusterID + "/blocks/n" + strconv.Itoa(i+1)
	}
	if len(owners) == 1 {
		v["avoid"], v["row"], v["node"] = blocks[0], uuid.NewString(), "n1"
		return v
	}
	v["avoid"], v["rows"] = pgArray(blocks), pgArray(newIDs(len(owners)))
	v["nodes"] = v["avoid"]
	return v
}

func reuseTake(f *planFixture, owners ...string) map[string]any {
	v := takeValues(f.qClusterID, f.qPoolID, "env_ipv4", "env.ipv4_addon_enabled", owners)
	if len(owners) == 1 {
		v["env"] = owners[0]
	} else {
		v["envs"] = pgArray(owners)
	}
	return v
}

func takeValues(cluster, pool, kind, eventType string, owners []string) map[string]any {
	v := map[string]any{"cluster": cluster, "pool": pool, "kind": kind, "actor": "bench", "event_type": eventType,
		"hold": time.Duration(0), "set_owner": nil}
	if len(owners) == 1 {
		v["owner"], v["org"], v["env"], v["node"], v["instance"], v["event"] = owners[0], "acme", "acme", nil, owners[0], uuid.NewString()
		return v
	}
	nulls, orgs := make([]string, len(owners)), make([]string, len(owners))
	for i := range owners {
		nulls[i], orgs[i] = "NULL", "acme"
	}
	v["owners"], v["orgs"], v["envs"], v["nodes"], v["instances"], v["events"] = pgArray(owners), pgArray(orgs),
		pgArray(orgs), pgArray(nulls), pgArray(owners), pgArray(newIDs(len(owners)))
	return v
}

// pgArray writes an array as PostgreSQL reads it.
func pgArray(xs []string) string { return "{" + strings.Join(xs, ",") + "}" }

func newIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	return ids
}

// planFixture holds realistic parameter values from the preloaded databases.
type planFixture struct {
	clusterID, poolID   string // the instance pool with the most rows
	qClusterID, qPoolID string // the full node pool with the cooled queue
	cooledID            uuid.UUID
	addr                netip.Prefix
}

var hotStatements = []hotStatement{
	{name: "pool lookup", db: "growth",
		params: func(f *planFixture) []any { return []any{f.poolID} }},
	{name: "owner probe", db: "growth",
		params: func(f *planFixture) []any { return []any{f.clusterID, "instance", "pre-2", "acme", "prod"} }},
	{name: "stripe pick (SKIP LOCKED)", db: "growth",
		params: func(f *planFixture) []any { return []any{f.poolID, 32} }},
	{name: "stripe pick (waiting, no SKIP LOCKED)", db: "growth",
		params: func(f *planFixture) []any { return []any{f.poolID, 32} }},
	{name: "fresh space left? (after a waiting pick found none)", db: "reuse",
		params: func(f *planFixture) []any { return []any{f.qPoolID} }},
	{name: "insert allocation + event (CTE)", db: "growth",
		named: func(f *planFixture) map[string]any {
			return map[string]any{"id": uuid.New(), "cluster": f.clusterID, "pool": f.poolID, "address": f.addr,
				"ordinal": int64(2_000_001), "kind": "instance", "owner": "x-1", "org": "acme", "env": "prod", "node": nil,
				"instance": "x-1", "actor": "bench", "event": uuid.New(), "event_type": "instance.allocated",
				"hold": time.Duration(0), "set_owner": nil, "data": "{}"}
		}},
	{name: "event insert", db: "growth",
		named: func(f *planFixture) map[string]any {
			return map[string]any{"event": uuid.New(), "event_type": "instance.released", "cluster": f.clusterID,
				"pool": f.poolID, "allocation": uuid.New(), "generation": int64(2), "address": f.addr, "kind": "instance",
				"owner": "pre-2", "org": "acme", "env": "env-2", "node": nil, "instance": "pre-2", "actor": "bench", "data": "{}"}
		}},
	{name: "reuse pick (cooled queue, SKIP LOCKED)", db: "reuse",
		params: func(f *planFixture) []any { return []any{f.qPoolID} }},
	{name: "reuse take (conditional write)", db: "reuse",
		named: func(f *planFixture) map[string]any {
			return map[string]any{"id": f.cooledID, "generation": int64(1), "kind": "node", "owner": "x-1", "org": nil,
				"env": nil, "node": "x-1", "instance": nil, "actor": "bench", "hold": time.Duration(0), "set_owner": nil,
				"lost_event": uuid.New(), "event": uuid.New(), "event_type": "node.enrolled", "data": map[string]any{}}
		}},
	{name: "exact claim probe", db: "growth",
		params: func(f *planFixture) []any { return []any{f.clusterID, f.addr} }},
	{name: "release", db: "growth",
		named: func(f *planFixture) map[string]any {
			return map[string]any{"cluster": f.clusterID, "kind": "instance", "owner": "pre-2", "generation": int64(0), "actor": "bench",
				"event": uuid.New(), "event_type": "instance.released"}
		}},
	{name: "fast path: a fresh allocation in one statement (a counter pool)", db: "growth",
		named: func(f *planFixture) map[string]any { return freshTake(f, "x-2") }},
	{name: "fast path: a fresh allocation in a caller's transaction, in one statement (a counter pool)", db: "growth",
		named: func(f *planFixture) map[string]any { return freshTake(f, "x-2") }},
	{name: "fast path: fresh allocations of several owners in one statement (a counter pool)", db: "growth",
		named: func(f *planFixture) map[string]any { return freshTake(f, "x-3", "x-4") }},
	// The reuse database's pool is a counter pool with a long cooled
	// queue: the plan is what the statement would run on a table pool of
	// that size (its guard stops it here).
	{name: "fast path: a reused allocation in one statement (an IPv4 table pool)", db: "reuse",
		named: func(f *planFixture) map[string]any { return reuseTake(f, "e-2") }},
	{name: "fast path: reused allocations of several owners in one statement (an IPv4 table pool)", db: "reuse",
		named: func(f *planFixture) map[string]any { return reuseTake(f, "e-3", "e-4") }},
	{name: "fast path: apply of a planned hold in one statement", db: "growth",
		named: func(f *planFixture) map[string]any {
			return map[string]any{"cluster": f.clusterID, "kind": "instance", "owner": "pre-2", "address": f.addr,
				"org": "acme", "env": "prod", "node": "n1", "instance": "pre-2", "set_owner": nil, "actor": "bench",
				"pool": nil, "event": uuid.New(), "event_type": "instance.allocated"}
		}},
	{name: "refresh read", db: "growth",
		params: func(f *planFixture) []any { return []any{f.clusterID, "instance", "pre-2"} }},
	{name: "hold look (a plan's first read)", db: "growth",
		named: func(f *planFixture) map[string]any {
			return map[string]any{"cluster": f.clusterID, "kind": "instance", "owner": "pre-2", "actor": "bench",
				"fresh_for": 5 * time.Minute, "origin": "/work/bench"}
		}},
}

// watchedTables may never be read by a sequential scan, nor by an index scan
// with no index condition, on the hot path.
var watchedTables = map[string]bool{"ipam_allocations": true, "ipam_pool_stripes": true, "ipam_pools": true, "ipam_clusters": true}

// PlanResult is the EXPLAIN of one hot statement.
type PlanResult struct {
	Name     string
	Source   string // file:line of the statement
	DB       string
	Mode     string // "custom" (the parameters' values) or "generic" (what a prepared statement may switch to)
	SQL      string
	Plan     string
	Problems []string
}

// hotSQL maps the core's named hot statements to their SQL.
func hotSQL() map[string]operator.Statement {
	m := map[string]operator.Statement{}
	for _, st := range operator.HotStatements() {
		m[st.Name] = st
	}
	return m
}

// sqlLiteral renders a parameter value for EXECUTE.
func sqlLiteral(v any) string {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return q(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case time.Duration:
		return q(fmt.Sprintf("%d microseconds", v.Microseconds()))
	case uuid.UUID:
		return q(v.String())
	case netip.Prefix:
		return q(v.String())
	case map[string]any: // a jsonb value, as the core passes it
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return q(string(b))
	default:
		return q(fmt.Sprint(v))
	}
}

// explainSection EXPLAINs every hot statement on the biggest preloaded
// databases, with a custom plan (the parameters' values) and a generic plan
// (what a prepared statement may switch to after five executions), and fails
// the run on a sequential scan of the watched tables or a sort.
func (r *runner) explainSection(ctx context.Context) error {
	named := hotSQL()
	for _, h := range hotStatements {
		if _, ok := named[h.name]; !ok {
			r.rep.fail("EXPLAIN %s: the core names no such hot statement (renamed?): update hotStatements in bench/explain.go", h.name)
		}
		delete(named, h.name)
	}
	for name := range named {
		r.rep.fail("EXPLAIN: the core's hot statement %q has no entry in bench/explain.go", name)
	}
	named = hotSQL()
	dbs := map[string]string{}
	f := &planFixture{}
	if r.growth != nil && len(r.growth.levels) > 0 {
		g := r.growth.levels[len(r.growth.levels)-1]
		dbs["growth"] = g.dbURL
		f.clusterID, f.poolID = g.clusterID, g.pool.ID
		f.addr = netip.PrefixFrom(g.pool.CIDRs[0].Addr().Next().Next(), 128)
	}
	if r.reuse != nil {
		dbs["reuse"] = r.reuse.dbURL
		f.qClusterID, f.qPoolID = r.reuse.clusterID, r.reuse.pool.ID
		c, err := pgx.Connect(ctx, r.reuse.dbURL)
		if err != nil {
			return err
		}
		err = c.QueryRow(ctx, `SELECT id FROM ipam_allocations WHERE pool_id = $1 AND state = 'cooling' ORDER BY reusable_at DESC LIMIT 1`,
			f.qPoolID).Scan(&f.cooledID)
		c.Close(ctx)
		if err != nil {
			return err
		}
	}
	if dbs["growth"] == "" {
		dbs["growth"] = dbs["reuse"]
		f.clusterID, f.poolID = f.qClusterID, f.qPoolID
	}
	if dbs["reuse"] == "" {
		dbs["reuse"] = dbs["growth"]
		f.qClusterID, f.qPoolID = f.clusterID, f.poolID
	}
	if dbs["growth"] == "" {
		return fmt.Errorf("no preloaded database to EXPLAIN on (run the growth or reuse section)")
	}
	conns := map[string]*pgx.Conn{}
	defer func() {
		for _, c := range conns {
			c.Close(context.Background())
		}
	}()
	for _, h := range hotStatements {
		st, ok := named[h.name]
		if !ok {
			continue
		}
		where := "operator.HotStatements: " + h.name
		c := conns[h.db]
		if c == nil {
			cc, err := pgx.ParseConfig(dbs[h.db])
			if err != nil {
				return err
			}
			// Plain text statements only: PREPARE/EXECUTE by name, no
			// statement cache of pgx's own in the way.
			cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
			if c, err = pgx.ConnectConfig(ctx, cc); err != nil {
				return err
			}
			conns[h.db] = c
		}
		for _, mode := range []string{"custom", "generic"} {
			pr, err := explainOne(ctx, c, h, st, mode, f)
			pr.Source, pr.DB = where, h.db
			if err != nil {
				pr.Problems = append(pr.Problems, "EXPLAIN failed: "+err.Error())
			}
			for _, p := range pr.Problems {
				switch {
				case strings.HasPrefix(p, "note:"):
					r.rep.warn("EXPLAIN %s (%s): %s", h.name, mode, p)
				case r.cfg.Smoke:
					// Plans on the smoke sizes' small tables are not the
					// plans of a big database: report, do not fail.
					r.rep.warn("EXPLAIN %s (%s plan, smoke sizes): %s", h.name, mode, p)
				default:
					r.rep.fail("EXPLAIN %s (%s plan): %s", h.name, mode, p)
				}
			}
			r.rep.Plans = append(r.rep.Plans, pr)
			fmt.Fprintf(r.log, "\n-- %s [%s plan, %s, on %s]\n%s\n", h.name, mode, where, h.db, pr.Plan)
		}
	}
	bad := 0
	for _, p := range r.rep.Plans {
		for _, pb := range p.Problems {
			if !strings.HasPrefix(pb, "note:") {
				bad++
			}
		}
	}
	st := "met"
	val := fmt.Sprintf("%d plans of %d statements: no Seq Scan or index walk without an Index Cond on ipam_allocations, ipam_pool_stripes, ipam_pools or ipam_clusters, no Sort but of one pool's stripes", len(r.rep.Plans), len(hotStatements))
	if bad > 0 {
		st, val = "FAIL", fmt.Sprintf("%d problems in %d plans (see the plans)", bad, len(r.rep.Plans))
		if r.cfg.Smoke {
			st = "warn"
		}
	}
	r.rep.add(Row{Section: "2 growth", Name: "EXPLAIN of every hot statement (custom and generic plans, at the largest sizes)",
		Value: val, Target: "no seq scan, no sort", Status: st})
	return nil
}

func explainOne(ctx context.Context, c *pgx.Conn, h hotStatement, st operator.Statement, mode string, f *planFixture) (PlanResult, error) {
	sql := st.SQL
	pr := PlanResult{Name: h.name, Mode: mode, SQL: sql}
	if _, err := c.Exec(ctx, "SET plan_cache_mode = force_"+mode+"_plan"); err != nil {
		return pr, err
	}
	// The planner settings every transaction of the core starts with
	// (operator.TxSettings, sent with BEGIN), here for the session.
	if _, err := c.Exec(ctx, strings.ReplaceAll(operator.TxSettings, "SET LOCAL", "SET")); err != nil {
		return pr, err
	}
	if _, err := c.Exec(ctx, "PREPARE ipambench_q AS "+sql); err != nil {
		return pr, err
	}
	defer func() { _, _ = c.Exec(context.Background(), "DEALLOCATE ipambench_q") }()
	var nparams int
	if err := c.QueryRow(ctx, `SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'ipambench_q'`).Scan(&nparams); err != nil {
		return pr, err
	}
	vals := h.values(f, st)
	if len(vals) != nparams {
		pr.Problems = append(pr.Problems, fmt.Sprintf("note: the statement now has %d parameters, the bench knows %d: update its values in bench/explain.go (missing ones are NULL)", nparams, len(vals)))
		for len(vals) < nparams {
			vals = append(vals, nil)
		}
		vals = vals[:nparams]
	}
	lits := make([]string, len(vals))
	for i, v := range vals {
		lits[i] = sqlLiteral(v)
	}
	exec := "EXECUTE ipambench_q"
	if len(lits) > 0 {
		exec += "(" + strings.Join(lits, ", ") + ")"
	}
	rows, err := c.Query(ctx, "EXPLAIN (COSTS OFF) "+exec)
	if err != nil {
		return pr, err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return pr, err
	}
	pr.Plan = strings.Join(lines, "\n")
	var js string
	if err := c.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+exec).Scan(&js); err != nil {
		return pr, err
	}
	var doc []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		return pr, err
	}
	for _, d := range doc {
		for _, p := range d.Plan.problems() {
			if rel, ok := strings.CutPrefix(p, "Seq Scan on "); ok {
				// Say how big the table is: the planner scans a table of a
				// page or two rather than use an index.
				var pages, tuples, dead int64
				if c.QueryRow(ctx, `SELECT c.relpages, c.reltuples::bigint, coalesce(s.n_dead_tup, 0)
					FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = $1::regclass`, rel).Scan(&pages, &tuples, &dead) == nil {
					p += fmt.Sprintf(" (the table has %d pages, ~%d rows, %d dead)", pages, tuples, dead)
				}
			}
			pr.Problems = append(pr.Problems, p)
		}
	}
	return pr, nil
}

type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	Index     string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Plans     []planNode `json:"Plans"`
}

// readsOnePoolsStripes says whether every row under n comes from
// ipam_pool_stripes through its primary key by the pool: the stripe pick
// sorts those by next ordinal (an index on next_ordinal would make every
// stripe advance a non-HOT update), and they are at most 64 rows, which the
// constraint ipam_pools_stripes_bounded keeps so. Any other sort grows with
// what it reads.
func (n planNode) readsOnePoolsStripes() bool {
	probes := 0
	var walk func(m planNode) bool
	walk = func(m planNode) bool {
		if m.Relation != "" && m.Relation != "ipam_pool_stripes" {
			return false
		}
		if m.Index != "" {
			if m.Index != "ipam_pool_stripes_pkey" || !strings.Contains(m.IndexCond, "(pool_id = ") {
				return false
			}
			probes++
		} else if strings.HasSuffix(m.NodeType, "Scan") && m.NodeType != "Bitmap Heap Scan" && m.NodeType != "CTE Scan" {
			return false // a scan of no index (a CTE's own plan is checked where it is)
		}
		for _, c := range m.Plans {
			if !walk(c) {
				return false
			}
		}
		return true
	}
	return walk(n) && probes > 0
}

func (n planNode) problems() []string {
	var out []string
	switch {
	case n.NodeType == "Seq Scan" && watchedTables[n.Relation]:
		out = append(out, "Seq Scan on "+n.Relation)
	case (n.NodeType == "Index Scan" || n.NodeType == "Index Only Scan") && watchedTables[n.Relation] && n.IndexCond == "":
		// A walk over a whole index, filtered row by row: as slow as a
		// sequential scan on a big table.
		out = append(out, "Index Scan with no Index Cond on "+n.Relation+" ("+n.Index+")")
	case (n.NodeType == "Sort" || n.NodeType == "Incremental Sort") && !n.readsOnePoolsStripes():
		out = append(out, n.NodeType)
	}
	for _, c := range n.Plans {
		out = append(out, c.problems()...)
	}
	sort.Strings(out)
	return out
}
