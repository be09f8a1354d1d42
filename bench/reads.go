package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// readsSection is section 5: the usage read (what the usage data source,
// `ipamctl usage` and the metrics exporter call) on a pool holding the most
// allocations, next to the same read on a pool holding 1,000.
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
	bigP50, bigMax, active, cooling, err := r.usageLatency(ctx, big)
	if err != nil {
		return err
	}
	smallP50, _, _, _, err := r.usageLatency(ctx, small)
	if err != nil {
		return err
	}
	if err := r.usagePlan(ctx, big); err != nil {
		r.rep.warn("usage plan: %v", err)
	}
	r.rep.add(Row{Section: "5 reads", Name: fmt.Sprintf("Store.PoolUsage of a cluster whose instance pool holds %s allocations (%s active, %s cooling)",
		num(float64(big.level)), num(float64(active)), num(float64(cooling))),
		Value: fmt.Sprintf("p50 %s, max %s (%d calls)", ms(bigP50), ms(bigMax), r.sz.ReadSamples), Target: "p50 < 5 ms", Status: metOr(bigP50 < 5*time.Millisecond)})
	ratio := float64(bigP50) / float64(smallP50)
	r.rep.add(Row{Section: "5 reads", Name: fmt.Sprintf("the same read: p50 at %s allocations against p50 at %s", num(float64(big.level)), num(float64(small.level))),
		Value: ms(bigP50), Reference: ms(smallP50), Ratio: fmt.Sprintf("%.2f", ratio), Target: "<= 1.50", Status: metOr(ratio <= 1.5)})
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

// usageLatency times ReadSamples usage reads of p's cluster (after three
// warm-up reads) and checks that they counted the preloaded rows.
func (r *runner) usageLatency(ctx context.Context, p *loadedPool) (p50, worst time.Duration, active, cooling int64, err error) {
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: p.dbURL, MaxConnections: 1, Actor: "bench"})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer st.Close()
	var lat []time.Duration
	var u operator.ClusterUsage
	for i := 0; i < 3+r.sz.ReadSamples; i++ {
		t := time.Now()
		if u, err = operator.New(st).PoolUsage(ctx, p.clusterID); err != nil {
			return 0, 0, 0, 0, err
		}
		if i >= 3 {
			lat = append(lat, time.Since(t))
		}
	}
	for _, pu := range u.Pools {
		if pu.PoolID == p.pool.ID {
			active, cooling = pu.Active, pu.Cooling
		}
	}
	if active+cooling < int64(p.level) {
		r.rep.warn("usage counted %d active + %d cooling in %s, fewer than the %d preloaded", active, cooling, p.pool.ID, p.level)
	}
	return percentile(lat, 0.5), percentile(lat, 1), active, cooling, nil
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
