package engine_test

import (
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

func TestCollectMetrics(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.alloc("c1/instance", instance("i1"))
	f.exec(`INSERT INTO ipam_allocation_failures (id, at, cluster_id, pool_id, reason)
		SELECT gen_random_uuid(), now() - interval '3 days', 'c1', 'c1/v4', 'ipam_exhausted' FROM generate_series(1, 3)`)
	snap, err := engine.OperatorOf(f.st).CollectMetrics(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Clusters) != 1 || len(snap.Clusters[0].Pools) != 3 {
		t.Fatalf("clusters %+v", snap.Clusters)
	}
	// Every pool has a series per known reason, at zero until a failure; the
	// counter counts every failure ever recorded, not just the last day's.
	got := map[string]int64{}
	for _, ft := range snap.Failures {
		got[ft.PoolID+" "+ft.Reason] = ft.Count
		if ft.ClusterID != "c1" || ft.Category == "" {
			t.Errorf("failure total %+v", ft)
		}
	}
	if len(got) != 6 || got["c1/v4 ipam_exhausted"] != 3 || got["c1/node ipam_unavailable"] != 0 {
		t.Fatalf("failure totals %v", got)
	}
	for _, c := range snap.Clusters[0].Categories {
		if c.Category == engine.CategoryIPv4 && len(c.Failures) != 0 {
			t.Errorf("failures older than a day counted in usage: %v", c.Failures)
		}
	}
}
