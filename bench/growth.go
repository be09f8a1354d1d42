package bench

import (
	"context"
	"fmt"
	"math/bits"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// A preloaded pool: its database, and what a bench store needs to use it.
type loadedPool struct {
	level     int // rows preloaded
	cooled    int // of which reusable from the queue
	dbURL     string
	clusterID string
	pool      ipam.Pool
}

type growthDBs struct {
	levels []*loadedPool
}

// fillSpec says how to preload a pool: n rows on its first n usable
// ordinals; row k (1-based) gets a state by mode.
type fillSpec struct {
	n      int
	mode   string // "mixed": even k active, odd k cooling inside its cooldown; "queue": k <= cooled cooling and reusable, else active
	cooled int
	kind   string // owner kind
}

// The preloaded rows are what the allocator itself would have written: the
// pool layout gives ordinals and addresses (run by run, as table pools are
// filled), the owner and labels are set, cooling rows carry released_at and
// reusable_at, every row has its allocation event (and cooling rows their
// release event), the stripes are advanced past the highest ordinal used, so
// the next fresh allocation continues where these stop, and the usage
// counters hold the active rows.
const fillSQL = `INSERT INTO ipam_allocations (id, cluster_id, pool_id, address, ordinal, state, generation, owner_kind,
		owner_id, org_id, env_id, node_id, instance_id, actor, allocated_at, released_at, last_seen_at, reusable_at)
	SELECT gen_random_uuid(), $1, $2, $3::inet + (g - $4), g, st.state, 1, $7, 'pre-' || k,
		CASE WHEN $7 = 'instance' THEN 'acme' END, CASE WHEN $7 = 'instance' THEN 'env-' || (k % 1000) END,
		CASE WHEN $7 = 'node' THEN 'pre-' || k END, CASE WHEN $7 = 'instance' THEN 'pre-' || k END, 'bench',
		now() - interval '40 days', st.released, now() - interval '1 day', st.reusable
	FROM generate_series($4::bigint, $5::bigint) g
	CROSS JOIN LATERAL (SELECT $6::bigint + (g - $4) AS k) kk
	CROSS JOIN LATERAL (SELECT
		CASE WHEN $8 = 'mixed' AND k % 2 = 0 THEN 'active'
		     WHEN $8 = 'mixed' THEN 'cooling'
		     WHEN k <= $9 THEN 'cooling' ELSE 'active' END AS state,
		CASE WHEN $8 = 'mixed' AND k % 2 = 1 THEN now() - interval '1 hour'
		     WHEN $8 = 'queue' AND k <= $9 THEN now() - interval '31 days' + k * interval '1 ms' END AS released,
		CASE WHEN $8 = 'mixed' AND k % 2 = 1 THEN now() + interval '23 hours'
		     WHEN $8 = 'queue' AND k <= $9 THEN now() - interval '1 day' - ($9 - k) * interval '1 ms' END AS reusable) st`

const fillEventsSQL = `INSERT INTO ipam_events (id, at, type, cluster_id, pool_id, allocation_id, generation, address,
		owner_kind, owner_id, org_id, env_id, node_id, instance_id, actor)
	SELECT gen_random_uuid(), allocated_at, $2, cluster_id, pool_id, id, generation, address, owner_kind, owner_id,
		org_id, env_id, node_id, instance_id, actor
	FROM ipam_allocations WHERE pool_id = $1
	UNION ALL
	SELECT gen_random_uuid(), released_at, $3, cluster_id, pool_id, id, generation, address, owner_kind, owner_id,
		org_id, env_id, node_id, instance_id, actor
	FROM ipam_allocations WHERE pool_id = $1 AND state = 'cooling'`

func eventNames(kind string) (allocated, released string) {
	if kind == ipam.OwnerNode {
		return "node.enrolled", "node.released"
	}
	return kind + ".allocated", kind + ".released"
}

// fillPool preloads a counter pool as fillSpec says and advances its stripes.
func fillPool(ctx context.Context, dbURL string, p ipam.Pool, f fillSpec) error {
	if f.n == 0 {
		return nil
	}
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, `SET synchronous_commit = off; SET maintenance_work_mem = '256MB'`); err != nil {
		return err
	}
	l, err := ipam.NewLayout(p.CIDRs, p.Exclude, p.Gateway)
	if err != nil {
		return err
	}
	k, last := int64(1), int64(-1)
	for _, run := range l.Runs() {
		if k > int64(f.n) {
			break
		}
		end := min(run.Last, run.First+int64(f.n)-k)
		if _, err := c.Exec(ctx, fillSQL, p.ClusterID, p.ID, netip.PrefixFrom(run.Start, run.Start.BitLen()), run.First, end,
			k, f.kind, f.mode, f.cooled); err != nil {
			return fmt.Errorf("preloading %s: %w", p.ID, err)
		}
		k += end - run.First + 1
		last = end
	}
	if k <= int64(f.n) {
		return fmt.Errorf("pool %s holds only %d addresses, %d asked", p.ID, k-1, f.n)
	}
	alloc, rel := eventNames(f.kind)
	if _, err := c.Exec(ctx, fillEventsSQL, p.ID, alloc, rel); err != nil {
		return err
	}
	// Stripe s hands out ordinals = s (mod S): continue after the last one used.
	S := int64(p.Stripes)
	stripes := make([]int32, S)
	next := make([]int64, S)
	for s := int64(0); s < S; s++ {
		o := last + 1 + ((s-(last+1))%S+S)%S
		stripes[s], next[s] = int32(s), l.NextAllowed(o, S)
	}
	if _, err := c.Exec(ctx, `UPDATE ipam_pool_stripes ps SET next_ordinal = v.n
		FROM unnest($2::int[], $3::bigint[]) v(s, n) WHERE ps.pool_id = $1 AND ps.stripe = v.s AND ps.next_ordinal < v.n`,
		p.ID, stripes, next); err != nil {
		return err
	}
	// The rows bypass the statements that keep the active counts (the
	// cooling counts are kept by triggers): count them in, the way an
	// operator repairs drifted counters.
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: dbURL, MaxConnections: 1, Actor: "bench"})
	if err != nil {
		return err
	}
	_, err = operator.New(st).RecountUsage(ctx, p.ClusterID)
	st.Close()
	if err != nil {
		return err
	}
	_, err = c.Exec(ctx, `VACUUM (ANALYZE) ipam_allocations, ipam_events, ipam_pool_stripes, ipam_pool_counters, ipam_pool_cooling`)
	return err
}

// growthDB creates a database with one cluster whose instance pool holds n
// preloaded allocations (active and cooling mixed).
func (r *runner) growthDB(ctx context.Context, n int) (*loadedPool, error) {
	dbURL, err := r.createDB(ctx, fmt.Sprintf("growth%d", n))
	if err != nil {
		return nil, err
	}
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: dbURL, MaxConnections: 1, Actor: "bench"})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	cl, err := st.CreateCluster(ctx, ipam.Cluster{ID: "g1", Prefix: netip.MustParsePrefix("2001:db8:1::/48"),
		NodeCooldown: ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown})
	if err != nil {
		return nil, err
	}
	p, err := st.GetPool(ctx, ipam.InstancePool(cl.ID).ID())
	if err != nil {
		return nil, err
	}
	t := time.Now()
	if err := fillPool(ctx, dbURL, p, fillSpec{n: n, mode: "mixed", kind: ipam.OwnerInstance}); err != nil {
		return nil, err
	}
	if n > 0 {
		r.logf("growth: preloaded %s allocations in %s", num(float64(n)), time.Since(t).Round(100*time.Millisecond))
	}
	return &loadedPool{level: n, dbURL: dbURL, clusterID: cl.ID, pool: p}, nil
}

// interleaved allocates from several pools in turn (one store and
// connection each), so that every level sees the same moments of the run:
// noise from the machine falls on all alike. It returns the latencies per pool.
func (r *runner) interleaved(ctx context.Context, pools []*loadedPool, kind string, warm, samples int) ([][]time.Duration, error) {
	stores := make([]*ipam.Client, len(pools))
	for i, p := range pools {
		st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: p.dbURL, MaxConnections: 1, Actor: "bench"})
		if err != nil {
			return nil, err
		}
		defer st.Close()
		stores[i] = st
	}
	lat := make([][]time.Duration, len(pools))
	for i := 0; i < warm+samples; i++ {
		for j := range pools {
			// Rotate who goes first, so that no level always follows another.
			k := (i + j) % len(pools)
			id := fmt.Sprintf("new-%d", i)
			o := instanceOwner(id)
			if kind == ipam.OwnerNode {
				o = ipam.Owner{Kind: ipam.OwnerNode, ID: id, NodeID: id}
			}
			t := time.Now()
			if _, err := stores[k].Allocate(ctx, ipam.AllocateRequest{Pool: pools[k].pool.Ref(), Owner: o}); err != nil {
				return nil, fmt.Errorf("allocating from the pool with %d rows: %w", pools[k].level, err)
			}
			if i >= warm {
				lat[k] = append(lat[k], time.Since(t))
			}
		}
	}
	return lat, nil
}

// growthSection is section 2 (the EXPLAIN checks run after section 3).
func (r *runner) growthSection(ctx context.Context) error {
	g := &growthDBs{}
	for _, n := range r.sz.GrowthLevels {
		p, err := r.growthDB(ctx, n)
		if err != nil {
			return err
		}
		g.levels = append(g.levels, p)
	}
	r.growth = g
	r.srv.checkpoint(ctx)
	lat, err := r.interleaved(ctx, g.levels, ipam.OwnerInstance, 20, r.sz.GrowthSamples)
	if err != nil {
		return err
	}
	base := percentile(lat[0], 0.5)
	biggest := len(g.levels) - 1
	for i, p := range g.levels {
		p50, p99 := percentile(lat[i], 0.5), percentile(lat[i], 0.99)
		row := Row{Section: "2 growth", Name: fmt.Sprintf("instance allocation, %s existing", num(float64(p.level))),
			Value: fmt.Sprintf("p50 %s, p99 %s", ms(p50), ms(p99)), Status: "info"}
		if i > 0 && base > 0 {
			row.Reference = fmt.Sprintf("p50 at %s: %s", num(float64(g.levels[0].level)), ms(base))
			row.Ratio = fmt.Sprintf("%.2f", float64(p50)/float64(base))
			if i == biggest {
				row.Target = "<= 1.20"
				row.Status = metOr(float64(p50)/float64(base) <= 1.2)
			}
		}
		r.rep.add(row)
	}
	r.rep.note("Growth: method", []string{fmt.Sprintf(
		"One database per level, each with one cluster whose instance pool was preloaded set-wise (generate_series over the pool layout's runs: "+
			"even rows active, odd rows cooling inside their cooldown, an event per allocation and per release, stripes advanced past the last ordinal; "+
			"then VACUUM ANALYZE and CHECKPOINT). %d allocations per level after 20 warm-up ones, one client per level, "+
			"taken in turn across the levels (rotating order) so that machine noise falls on every level alike.", r.sz.GrowthSamples)})
	return nil
}

// queueDB creates a database with one cluster whose node pool (a small
// prefix) is full: every usable ordinal has a row, cooled rows (cooldown
// passed) first, the rest active, and every stripe is spent. Each allocation
// then comes from the cooled queue.
func (r *runner) queueDB(ctx context.Context, name string, cooled int) (*loadedPool, error) {
	// The smallest node prefix that holds cooled rows plus a few active ones.
	host := bits.Len64(uint64(cooled) + 16)
	if host < 4 {
		host = 4
	}
	dbURL, err := r.createDB(ctx, name)
	if err != nil {
		return nil, err
	}
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: dbURL, MaxConnections: 1, Actor: "bench"})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	cl, err := st.CreateCluster(ctx, ipam.Cluster{ID: "q1", Prefix: netip.MustParsePrefix("2001:db8:2::/48"),
		NodePrefix:     netip.PrefixFrom(netip.MustParseAddr("2001:db8:2::"), 128-host),
		InstancePrefix: netip.MustParsePrefix("2001:db8:2:1::/64"),
		NodeCooldown:   ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown})
	if err != nil {
		return nil, err
	}
	p, err := st.GetPool(ctx, ipam.NodePool(cl.ID).ID())
	if err != nil {
		return nil, err
	}
	t := time.Now()
	if err := fillPool(ctx, dbURL, p, fillSpec{n: int(p.Size), mode: "queue", cooled: cooled, kind: ipam.OwnerNode}); err != nil {
		return nil, err
	}
	r.logf("reuse: preloaded a full %s node pool (%s rows, %s cooled) in %s", p.CIDRs[0], num(float64(p.Size)), num(float64(cooled)),
		time.Since(t).Round(100*time.Millisecond))
	return &loadedPool{level: int(p.Size), cooled: cooled, dbURL: dbURL, clusterID: cl.ID, pool: p}, nil
}

// reuseSection is section 3, then the EXPLAIN checks of the hot statements.
func (r *runner) reuseSection(ctx context.Context) error {
	warm := 20
	small, err := r.queueDB(ctx, "reuse_small", warm+r.sz.ReuseSamples+10)
	if err != nil {
		return err
	}
	big, err := r.queueDB(ctx, "reuse_big", r.sz.ReuseCooled)
	if err != nil {
		return err
	}
	r.reuse = big
	r.srv.checkpoint(ctx)
	lat, err := r.interleaved(ctx, []*loadedPool{small, big}, ipam.OwnerNode, warm, r.sz.ReuseSamples)
	if err != nil {
		return err
	}
	base, p50, p99 := percentile(lat[0], 0.5), percentile(lat[1], 0.5), percentile(lat[1], 0.99)
	r.rep.add(Row{Section: "3 reuse", Name: fmt.Sprintf("node allocation from the cooled queue, %s cooled (pool %s full)",
		num(float64(small.cooled)), small.pool.CIDRs[0]),
		Value: fmt.Sprintf("p50 %s, p99 %s", ms(base), ms(percentile(lat[0], 0.99))), Status: "info"})
	ratio := float64(p50) / float64(base)
	r.rep.add(Row{Section: "3 reuse", Name: fmt.Sprintf("node allocation from the cooled queue, %s cooled (pool %s full)",
		num(float64(big.cooled)), big.pool.CIDRs[0]),
		Value: fmt.Sprintf("p50 %s, p99 %s", ms(p50), ms(p99)), Reference: fmt.Sprintf("p50 at %s cooled: %s", num(float64(small.cooled)), ms(base)),
		Ratio: fmt.Sprintf("%.2f", ratio), Target: "<= 1.20", Status: metOr(ratio <= 1.2)})
	r.rep.note("Reuse: method", []string{fmt.Sprintf(
		"Two databases, each with a cluster whose node prefix is small and full: every usable ordinal has a row, the first ones cooling with "+
			"their cooldown passed (oldest first), the rest active, every stripe spent. The baseline queue holds just the %d rows the run takes; "+
			"the big one %s. %d allocations each after %d warm-up ones, taken in turn.",
		small.cooled, num(float64(big.cooled)), r.sz.ReuseSamples, warm)})
	if err := r.reuseRoundTrips(ctx, big); err != nil {
		r.rep.warn("reuse round trips: %v", err)
	}
	return nil
}

// reuseRoundTrips counts the protocol traffic of an allocation from the
// queue of a full pool.
func (r *runner) reuseRoundTrips(ctx context.Context, p *loadedPool) error {
	target, err := targetOf(p.dbURL)
	if err != nil {
		return err
	}
	px, err := startProxy(target)
	if err != nil {
		return err
	}
	defer px.close()
	pu, err := viaProxy(p.dbURL, px)
	if err != nil {
		return err
	}
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: pu, MaxConnections: 1, Actor: "bench"})
	if err != nil {
		return err
	}
	defer st.Close()
	lines, err := countOps(ctx, px, []rtOp{{"Client.Allocate node (fresh space spent, from the cooled queue)", func(ctx context.Context, i int) error {
		id := fmt.Sprintf("rt-%d", i)
		_, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: p.pool.Ref(), Owner: ipam.Owner{Kind: ipam.OwnerNode, ID: id, NodeID: id}})
		return err
	}}}, 5, min(r.sz.RoundTripOps, 50))
	if err != nil {
		return err
	}
	r.rep.note("Round trips of an allocation from the cooled queue", lines)
	return nil
}
