package bench

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// readsSection is section 5: the usage read (what the usage data source,
// `ipamctl usage` and the metrics exporter call) on a pool holding the most
// allocations, next to the same read on a pool holding 1,000; then the other
// reads users make (otherReads), the same way.
func (r *runner) readsSection(ctx context.Context) error {
	levels := r.sz.GrowthLevels
	big, err := r.loadedLevel(ctx, levels[len(levels)-1])
	if err != nil {
		return err
	}
	small, err := r.loadedLevel(ctx, usageReferenceLevel)
	if err != nil {
		return err
	}
	lv, done, err := openReadLevels(ctx, big, small)
	defer done()
	if err != nil {
		return err
	}
	// The usage read, its counts of the loaded pool checked.
	var active, cooling int64
	if err := inTurn(lv, 3, r.sz.ReadSamples, func(l *readLevel) (int, error) {
		u, err := l.op.PoolUsage(ctx, l.p.clusterID)
		for _, pu := range u.Pools {
			if pu.PoolID == l.p.pool.ID && l.p == big {
				active, cooling = pu.Active, pu.Cooling
			}
		}
		return len(u.Pools), err
	}); err != nil {
		return err
	}
	if active+cooling < int64(big.level) {
		r.rep.warn("usage counted %d active + %d cooling in %s, fewer than the %d preloaded", active, cooling, big.pool.ID, big.level)
	}
	if err := r.usagePlan(ctx, big); err != nil {
		r.rep.warn("usage plan: %v", err)
	}
	bigP50, bigMax, smallP50 := percentile(lv[0].lat, 0.5), percentile(lv[0].lat, 1), percentile(lv[1].lat, 0.5)
	r.rep.add(Row{Section: "5 reads", Name: fmt.Sprintf("Store.PoolUsage of a cluster whose instance pool holds %s allocations (%s active, %s cooling)",
		num(float64(big.level)), num(float64(active)), num(float64(cooling))),
		Value: fmt.Sprintf("p50 %s, max %s (%d calls)", ms(bigP50), ms(bigMax), r.sz.ReadSamples), Target: "p50 < 5 ms", Status: metOr(bigP50 < 5*time.Millisecond)})
	ratio := float64(bigP50) / float64(smallP50)
	r.rep.add(Row{Section: "5 reads", Name: fmt.Sprintf("the same read: p50 at %s allocations against p50 at %s", num(float64(big.level)), num(float64(small.level))),
		Value: ms(bigP50), Reference: ms(smallP50), Ratio: fmt.Sprintf("%.2f", ratio), Target: "<= 1.50", Status: metOr(ratio <= 1.5)})
	return r.otherReads(ctx, lv)
}

// userRead is one of the other reads users make of a loaded pool's
// cluster, through the operator API that ipamctl, the exporter and the data
// sources call. An indexed read is one an index serves: it has targets (p50
// under 5 ms, and at most 1.5 times its p50 at 1,000 allocations); the
// others scan the cluster's rows, and the rows say what they cost.
type userRead struct {
	name    string
	what    string // what run counts: rows, clusters
	indexed bool
	// slow: a scan, timed over a few calls only (Check: once)
	slow, once bool
	run        func(ctx context.Context, op *operator.Client, p *loadedPool, pr readProbe) (int, error)
}

// readProbe names what a read asks for: an active row of the loaded pool
// (its address, instance and environment).
type readProbe struct {
	addr               netip.Addr
	instance, env      string
	ownerKind, ownerID string
}

var userReads = []userRead{
	{name: "lookup of an address (`ipamctl lookup`)", indexed: true,
		run: func(ctx context.Context, op *operator.Client, p *loadedPool, pr readProbe) (int, error) {
			v, err := op.LookupAddress(ctx, pr.addr, "")
			return len(v), err
		}},
	{name: "the newest 100 events of the cluster (`ipamctl events --limit 100`)", indexed: true,
		run: func(ctx context.Context, op *operator.Client, p *loadedPool, pr readProbe) (int, error) {
			v, err := op.ListEvents(ctx, operator.EventFilter{ClusterID: p.clusterID, Limit: 100})
			return len(v), err
		}},
	{name: "the metrics exporter's scrape (`ipamctl metrics`)", what: "cluster", indexed: true,
		run: func(ctx context.Context, op *operator.Client, p *loadedPool, pr readProbe) (int, error) {
			m, err := op.CollectMetrics(ctx)
			return len(m.Clusters), err
		}},
	{name: "an environment's addresses (`ipamctl list --org --env`, the `ipam_allocations` data source)",
		run: func(ctx context.Context, op *operator.Client, p *loadedPool, pr readProbe) (int, error) {
			v, err := op.ListAllocations(ctx, operator.ListFilter{ClusterID: p.clusterID, OrgID: "acme", EnvID: pr.env})
			return len(v), err
		}},
	{name: "an instance's addresses (`ipamctl list --instance`)", indexed: true,
		run: func(ctx context.Context, op *operator.Client, p *loadedPool, pr readProbe) (int, error) {
			v, err := op.ListAllocations(ctx, operator.ListFilter{ClusterID: p.clusterID, InstanceID: pr.instance})
			return len(v), err
		}},
	{name: "an owner's addresses (`ipamctl list --kind --owner`)", indexed: true,
		run: func(ctx context.Context, op *operator.Client, p *loadedPool, pr readProbe) (int, error) {
			v, err := op.ListAllocations(ctx, operator.ListFilter{ClusterID: p.clusterID, OwnerKind: pr.ownerKind, OwnerID: pr.ownerID})
			return len(v), err
		}},
	{name: "the first 100 node addresses no state holds (`terraform query` of `ipam_node_address`; `ipamctl list --kind node --state active --limit 100` without that condition)", indexed: true,
		run: func(ctx context.Context, op *operator.Client, p *loadedPool, pr readProbe) (int, error) {
			v, err := op.ListAllocations(ctx, operator.ListFilter{ClusterID: p.clusterID, OwnerKind: ipam.OwnerNode,
				State: ipam.StateActive, Unmanaged: true, Limit: 100})
			return len(v), err
		}},
	{name: "the first 100 of the cluster's allocations (`ipamctl list --limit 100`)", slow: true,
		run: func(ctx context.Context, op *operator.Client, p *loadedPool, pr readProbe) (int, error) {
			v, err := op.ListAllocations(ctx, operator.ListFilter{ClusterID: p.clusterID, Limit: 100})
			return len(v), err
		}},
	{name: "stale leaks, 30 days (`ipamctl leaks --stale-days 30`)", slow: true,
		run: func(ctx context.Context, op *operator.Client, p *loadedPool, pr readProbe) (int, error) {
			rep, err := op.FindStaleLeaks(ctx, p.clusterID, nil, 30)
			return len(rep.Leaks), err
		}},
	{name: "the invariants' check (`ipamctl check`)", what: "row checked", slow: true, once: true,
		run: func(ctx context.Context, op *operator.Client, p *loadedPool, pr readProbe) (int, error) {
			rep, err := op.Check(ctx, p.clusterID)
			if err == nil && len(rep.Violations) > 0 {
				err = fmt.Errorf("check found %d violations in the preloaded rows", len(rep.Violations))
			}
			return int(rep.Rows), err
		}},
}

// probeOf reads an active instance row of p's pool.
func probeOf(ctx context.Context, p *loadedPool) (readProbe, error) {
	var pr readProbe
	c, err := pgx.Connect(ctx, p.dbURL)
	if err != nil {
		return pr, err
	}
	defer c.Close(context.Background())
	var addr netip.Prefix
	if err := c.QueryRow(ctx, `SELECT address, instance_id, env_id, owner_kind, owner_id FROM ipam_allocations
		WHERE pool_id = $1 AND state = 'active' AND instance_id IS NOT NULL LIMIT 1`, p.pool.ID).Scan(&addr, &pr.instance, &pr.env, &pr.ownerKind, &pr.ownerID); err != nil {
		return pr, fmt.Errorf("an active instance row of %s: %w", p.pool.ID, err)
	}
	pr.addr = addr.Addr()
	return pr, nil
}

// slowReadSamples is how many calls time a read that scans (after one
// warm-up call).
const slowReadSamples = 3

// readLevel is a loaded pool as the reads see it: a client of its
// database, what the reads ask for, and the last timing's calls.
type readLevel struct {
	p   *loadedPool
	op  *operator.Client
	pr  readProbe
	lat []time.Duration
	n   int
}

// openReadLevels opens a client on each loaded pool's database; done
// closes those opened, also after an error.
func openReadLevels(ctx context.Context, ps ...*loadedPool) (lv []*readLevel, done func(), err error) {
	var clients []*ipam.Client
	done = func() {
		for _, c := range clients {
			c.Close()
		}
	}
	for _, p := range ps {
		st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: p.dbURL, MaxConnections: 2, Actor: "bench"})
		if err != nil {
			return nil, done, err
		}
		clients = append(clients, st)
		pr, err := probeOf(ctx, p)
		if err != nil {
			return nil, done, err
		}
		lv = append(lv, &readLevel{p: p, op: operator.New(st), pr: pr})
	}
	return lv, done, nil
}

// inTurn times run on every level, warm-up calls first, the levels' calls
// alternating (so that each level sees the machine as the others do): each
// level's lat holds its calls' times and n what its last call counted.
func inTurn(lv []*readLevel, warm, calls int, run func(l *readLevel) (int, error)) error {
	for _, l := range lv {
		l.lat = l.lat[:0]
	}
	for k := 0; k < warm+calls; k++ {
		for _, l := range lv {
			t := time.Now()
			n, err := run(l)
			if err != nil {
				return err
			}
			if k >= warm {
				l.lat = append(l.lat, time.Since(t))
			}
			l.n = n
		}
	}
	return nil
}

// otherReads times every userRead on the largest level (lv[0]) and on the
// reference (lv[1]), and adds a row for each.
func (r *runner) otherReads(ctx context.Context, lv []*readLevel) error {
	big, small := lv[0].p, lv[1].p
	count := func(u userRead, n int) string {
		what := u.what
		if what == "" {
			what = "row"
		}
		w := strings.Fields(what)
		w[0] += plural(n)
		return num(float64(n)) + " " + strings.Join(w, " ")
	}
	for _, u := range userReads {
		calls, warm := r.sz.ReadSamples, 3
		switch {
		case u.once:
			calls, warm = 1, 0
		case u.slow:
			calls, warm = slowReadSamples, 1
		}
		if err := inTurn(lv, warm, calls, func(l *readLevel) (int, error) { return u.run(ctx, l.op, l.p, l.pr) }); err != nil {
			return fmt.Errorf("%s: %w", u.name, err)
		}
		b, sm := percentile(lv[0].lat, 0.5), percentile(lv[1].lat, 0.5)
		ratio := float64(b) / float64(sm)
		row := Row{Section: "5 reads", Name: fmt.Sprintf("%s, a cluster of %s allocations", u.name, num(float64(big.level))),
			Value:     fmt.Sprintf("p50 %s (%s)", ms(b), count(u, lv[0].n)),
			Reference: fmt.Sprintf("at %s: %s (%s)", num(float64(small.level)), ms(sm), count(u, lv[1].n)),
			Ratio:     fmt.Sprintf("%.2f", ratio), Status: "info"}
		if u.indexed {
			row.Target, row.Status = "p50 < 5 ms, <= 1.50", metOr(b < 5*time.Millisecond && ratio <= 1.5)
		}
		r.rep.add(row)
	}
	return nil
}

// usageReferenceLevel is the pool size of the usage read's reference.
const usageReferenceLevel = 1000

// loadedLevel is the growth section's database of n preloaded allocations,
// or a new one when that section did not make it.
func (r *runner) loadedLevel(ctx context.Context, n int) (*loadedPool, error) {
	if r.growth != nil {
		for _, p := range r.growth.levels {
			if p.level == n {
				return p, nil
			}
		}
	}
	return r.growthDB(ctx, n)
}

// usagePlan records EXPLAIN (ANALYZE, BUFFERS) of the usage statement, read
// from the ipam package (the constant usagePoolsSQL, with the planner
// setting the core applies before it, if any), to show where the time goes.
func (r *runner) usagePlan(ctx context.Context, p *loadedPool) error {
	setting, sql := operator.UsageStatement()
	cc, err := pgx.ParseConfig(p.dbURL)
	if err != nil {
		return err
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	c, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	tx, err := c.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, setting); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "PREPARE ipambench_usage AS "+sql); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) EXECUTE ipambench_usage("+sqlLiteral(p.clusterID)+")")
	if err != nil {
		return err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	title := "Reads: EXPLAIN (ANALYZE, BUFFERS) of usagePoolsSQL (package ipam)"
	if setting != "" {
		title += ", after " + setting
	}
	r.rep.note(title, []string{"```\n" + strings.Join(lines, "\n") + "\n```"})
	return nil
}
