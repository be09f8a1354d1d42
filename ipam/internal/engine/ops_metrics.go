package engine

import (
	"context"
	"sort"

	"github.com/jackc/pgx/v5"
)

// FailureReasons are the reasons the allocator records failures with. Metrics
// report them for every pool, at zero until one happens, so that a first
// failure is an increase a Prometheus alert can see.
var FailureReasons = []string{CodeExhausted, CodeUnavailable}

// FailureTotal counts every failed allocation ever recorded for one pool and reason.
type FailureTotal struct {
	ClusterID string
	PoolID    string
	Category  string
	Reason    string
	Count     int64
}

// MetricsSnapshot is what the Prometheus exporter reports on one scrape.
type MetricsSnapshot struct {
	Clusters []ClusterUsage
	Failures []FailureTotal
}

// CollectMetrics reads the usage of every cluster and the failure totals.
func (o *Operator) CollectMetrics(ctx context.Context) (MetricsSnapshot, error) {
	s := o.c
	var snap MetricsSnapshot
	var err error
	if snap.Clusters, err = o.AllUsage(ctx); err != nil {
		return snap, err
	}
	type key struct{ cluster, pool, category, reason string }
	totals := map[key]int64{}
	for _, c := range snap.Clusters {
		for _, p := range c.Pools {
			for _, r := range FailureReasons {
				totals[key{p.ClusterID, p.PoolID, p.Category, r}] = 0
			}
		}
	}
	err = s.readTx(ctx, false, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlMetricsFailures)
		if err != nil {
			return err
		}
		var k key
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&k.cluster, &k.pool, &k.category, &k.reason, &n}, func() error {
			totals[k] += n
			return nil
		})
		return err
	})
	if err != nil {
		return snap, err
	}
	for k, n := range totals {
		snap.Failures = append(snap.Failures, FailureTotal{ClusterID: k.cluster, PoolID: k.pool, Category: k.category, Reason: k.reason, Count: n})
	}
	sort.Slice(snap.Failures, func(i, j int) bool {
		a, b := snap.Failures[i], snap.Failures[j]
		if a.ClusterID != b.ClusterID {
			return a.ClusterID < b.ClusterID
		}
		if a.PoolID != b.PoolID {
			return a.PoolID < b.PoolID
		}
		return a.Reason < b.Reason
	})
	return snap, nil
}
