package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// readsSection is section 5: the usage read (what the usage data source and
// `ipamctl usage` call) on a pool holding the most allocations.
func (r *runner) readsSection(ctx context.Context) error {
	var p *loadedPool
	if r.growth != nil && len(r.growth.levels) > 0 {
		p = r.growth.levels[len(r.growth.levels)-1]
	} else {
		var err error
		levels := r.sz.GrowthLevels
		if p, err = r.growthDB(ctx, levels[len(levels)-1]); err != nil {
			return err
		}
	}
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: p.dbURL, MaxConnections: 1, Actor: "bench"})
	if err != nil {
		return err
	}
	defer st.Close()
	var lat []time.Duration
	var u ipam.ClusterUsage
	for i := 0; i < 3+r.sz.ReadSamples; i++ {
		t := time.Now()
		if u, err = st.PoolUsage(ctx, p.clusterID); err != nil {
			return err
		}
		if i >= 3 {
			lat = append(lat, time.Since(t))
		}
	}
	var active, cooling int64
	for _, pu := range u.Pools {
		if pu.PoolID == p.pool.ID {
			active, cooling = pu.Active, pu.Cooling
		}
	}
	if active+cooling < int64(p.level) {
		r.rep.warn("usage counted %d active + %d cooling in %s, fewer than the %d preloaded", active, cooling, p.pool.ID, p.level)
	}
	if err := r.usagePlan(ctx, p); err != nil {
		r.rep.warn("usage plan: %v", err)
	}
	p50, worst := percentile(lat, 0.5), percentile(lat, 1)
	r.rep.add(Row{Section: "5 reads", Name: fmt.Sprintf("Store.PoolUsage of a cluster whose instance pool holds %s allocations (%s active, %s cooling)",
		num(float64(p.level)), num(float64(active)), num(float64(cooling))),
		Value: fmt.Sprintf("p50 %s, max %s (%d calls)", ms(p50), ms(worst), len(lat)), Target: "p50 < 50 ms", Status: metOr(p50 < 50*time.Millisecond)})
	return nil
}

// usagePlan records EXPLAIN (ANALYZE, BUFFERS) of the usage statement, read
// from the ipam package (the constant usagePoolsSQL, with the planner
// setting the core applies before it, if any), to show where the time goes.
func (r *runner) usagePlan(ctx context.Context, p *loadedPool) error {
	setting, sql := ipam.UsageStatement()
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
