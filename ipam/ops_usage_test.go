package ipam_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

func TestPoolUsage(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	for _, n := range []string{"n1", "n2", "n3"} {
		f.alloc("c1/node", node(n))
	}
	f.release(node("n3"))
	for _, i := range []string{"i1", "i2", "i3", "i4"} {
		f.alloc("c1/instance", instance(i))
	}
	f.release(instance("i3"))
	age(t, f.raw, "c1/instance", 25*time.Hour) // i3 has cooled down: free again
	f.release(instance("i4"))
	for _, e := range []string{"e1", "e2", "e3", "e4"} {
		f.alloc("c1/v4", env(e))
	}
	// Two plan-time holds on the last free rows: one live, one expired (free).
	f.exec(`UPDATE ipam_allocations SET state = 'reserved', owner_kind = 'env_ipv4', owner_id = 'r1', reusable_at = now() + interval '10 minutes'
		WHERE id = (SELECT id FROM ipam_allocations WHERE pool_id = 'c1/v4' AND state = 'free' ORDER BY ordinal LIMIT 1)`)
	f.exec(`UPDATE ipam_allocations SET state = 'reserved', owner_kind = 'env_ipv4', owner_id = 'r2', reusable_at = now() - interval '1 minute'
		WHERE id = (SELECT id FROM ipam_allocations WHERE pool_id = 'c1/v4' AND state = 'free' ORDER BY ordinal LIMIT 1)`)
	// The expired hold is free: e5 takes it; then the pool is full.
	f.alloc("c1/v4", env("e5"))
	if _, err := f.st.Allocate(f.ctx, ipam.AllocateRequest{Pool: ipam.OperatorPool("c1", "v4"), Owner: env("e6")}); ipam.Code(err) != ipam.CodeExhausted {
		t.Fatalf("e6: %v, want ipam_exhausted", err)
	}
	// A failure older than the window is not counted.
	f.exec(`INSERT INTO ipam_allocation_failures (id, at, cluster_id, pool_id, reason) VALUES (gen_random_uuid(), now() - interval '25 hours', 'c1', 'c1/v4', 'ipam_exhausted')`)
	if _, err := f.st.CreatePool(f.ctx, ipam.Pool{ClusterID: "c1", Name: "v6", Cooldown: time.Hour, CIDRs: prefixes("2001:db8:0:ff::/120")}); err != nil {
		t.Fatal(err)
	}
	f.alloc("c1/v6", instance("i9"))

	u, err := f.st.PoolUsage(f.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	nodePool, _ := f.st.GetPool(f.ctx, "c1/node")
	var cats []string
	for _, c := range u.Categories {
		cats = append(cats, c.Category)
	}
	if strings.Join(cats, ",") != "node,instance,ipv4,ipv6" || len(u.Pools) != 4 {
		t.Fatalf("categories %v, %d pools", cats, len(u.Pools))
	}
	byCat := map[string]ipam.CategoryUsage{}
	for _, c := range u.Categories {
		byCat[c.Category] = c
	}
	check := func(name string, got ipam.UsageCounts, size, active, reserved, cooling, free int64, alert bool) {
		t.Helper()
		if got.Size != size || got.Active != active || got.Reserved != reserved || got.Cooling != cooling || got.Free != free || got.Alert != alert {
			t.Errorf("%s: got size %d active %d reserved %d cooling %d free %d alert %v; want %d %d %d %d %d %v", name,
				got.Size, got.Active, got.Reserved, got.Cooling, got.Free, got.Alert, size, active, reserved, cooling, free, alert)
		}
		if got.CooldownQueue.Count != cooling || (cooling > 0) != (got.CooldownQueue.NextReusableAt != nil) {
			t.Errorf("%s: cooldown queue %+v", name, got.CooldownQueue)
		}
		want := float64(active+reserved+cooling) / float64(size)
		if math.Abs(got.Utilization-want) > 1e-9 {
			t.Errorf("%s: utilization %v, want %v", name, got.Utilization, want)
		}
	}
	check("node", byCat["node"].UsageCounts, nodePool.Size, 2, 0, 1, nodePool.Size-3, false)
	check("instance", byCat["instance"].UsageCounts, nodePool.Size, 2, 0, 1, nodePool.Size-3, false)
	check("ipv4", byCat["ipv4"].UsageCounts, 6, 5, 1, 0, 0, true)
	check("ipv6", byCat["ipv6"].UsageCounts, 255, 1, 0, 0, 254, false)
	if got := byCat["ipv4"].Failures; len(got) != 1 || got[ipam.CodeExhausted] != 1 {
		t.Errorf("ipv4 failures %v, want one ipam_exhausted in the last 24h", got)
	}
	if next := byCat["instance"].CooldownQueue.NextReusableAt; next == nil || next.Sub(u.At) < 23*time.Hour || next.Sub(u.At) > 25*time.Hour {
		t.Errorf("instance queue next reusable %v (now %v), want about 24h ahead", next, u.At)
	}
	if next := byCat["node"].CooldownQueue.NextReusableAt; next == nil || next.Sub(u.At) < 29*24*time.Hour {
		t.Errorf("node queue next reusable %v, want about 30 days ahead", next)
	}
	for _, p := range u.Pools {
		if p.PoolID == "c1/v4" && (p.Name != "v4" || p.Family != 4 || p.Kind != "table" || !p.Alert || p.Failures[ipam.CodeExhausted] != 1) {
			t.Errorf("pool v4: %+v", p)
		}
	}

	// Every cluster at once, and the errors.
	f.mkSecondCluster()
	all, err := f.st.AllUsage(f.ctx)
	if err != nil || len(all) != 2 || all[0].ClusterID != "c1" || all[1].ClusterID != "c2" || len(all[1].Categories) != 3 {
		t.Fatalf("AllUsage: %d clusters, %v", len(all), err)
	}
	if _, err := f.st.PoolUsage(f.ctx, "nope"); !errors.Is(err, ipam.ErrNotFound) {
		t.Errorf("unknown cluster: %v", err)
	}
	if _, err := f.st.PoolUsage(f.ctx, "bad id!"); ipam.Code(err) != ipam.CodeInvalid {
		t.Errorf("bad id: %v", err)
	}
}

func (f *opsFixture) mkSecondCluster() {
	f.t.Helper()
	mkCluster(f.t, f.st, "c2", "2001:db9::/48", "", "")
}

// fillPool inserts n rows into a counter pool of cluster c1 with
// generate_series, 80% active, 10% cooling and 10% long cooled, recounts the
// pool's usage counters (the rows bypass the statements that keep them), then
// runs VACUUM ANALYZE as autovacuum would.
func fillPool(tb testing.TB, st *ipam.Client, raw *pgx.Conn, pool, base string, n int) {
	tb.Helper()
	ctx := context.Background()
	if _, err := raw.Exec(ctx, fmt.Sprintf(`INSERT INTO ipam_allocations (id, cluster_id, pool_id, address, ordinal, state, generation,
			owner_kind, owner_id, instance_id, actor, allocated_at, last_seen_at, released_at, reusable_at)
		SELECT gen_random_uuid(), 'c1', $1, $2::inet + g, g,
			CASE g %% 10 WHEN 0 THEN 'cooling' WHEN 1 THEN 'cooling' ELSE 'active' END, 1,
			'instance', 'bulk-' || g, 'bulk-' || g, 'bench', now(), now(),
			CASE WHEN g %% 10 < 2 THEN now() END,
			CASE g %% 10 WHEN 0 THEN now() + interval '1 day' WHEN 1 THEN now() - interval '1 day' END
		FROM generate_series(1, %d) g`, n), pool, base); err != nil {
		tb.Fatal(err)
	}
	if fixed, err := st.RecountUsage(ctx, "c1"); err != nil || len(fixed) != 1 || fixed[0].PoolID != pool || fixed[0].Active != int64(n)*8/10 {
		tb.Fatalf("RecountUsage after loading %d rows into %s: %+v, %v", n, pool, fixed, err)
	}
	if _, err := raw.Exec(ctx, `VACUUM ANALYZE ipam_allocations`); err != nil {
		tb.Fatal(err)
	}
}

// The usage query reads each pool's counters and its cooldown window through
// the indexes, never a count of the pool's rows: on a table big enough for a
// sequential scan to be tempting, the plan has none.
func TestPoolUsagePlanHasNoSeqScan(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.mkSecondCluster()
	fillPool(t, f.st, f.raw, "c1/instance", "2001:db8:0:1::", 50000)
	explain := func(setting string) string {
		t.Helper()
		tx, err := f.raw.Begin(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(f.ctx) }()
		if setting != "" {
			if _, err := tx.Exec(f.ctx, setting); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := tx.Query(f.ctx, "EXPLAIN "+ipam.UsagePoolsSQL, "c1")
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	// The query as the store runs it, and the planner's own choice without
	// the setting: neither reads ipam_allocations sequentially.
	for _, setting := range []string{ipam.UsagePlannerSetting, ""} {
		plan := explain(setting)
		t.Logf("usage plan (%q):\n%s", setting, plan)
		if strings.Contains(plan, "Seq Scan on ipam_allocations") {
			t.Fatalf("the usage query scans ipam_allocations sequentially (%q):\n%s", setting, plan)
		}
		indexes := []string{"ipam_allocations_pool_state", "ipam_allocations_reuse"}
		if setting != "" { // without it a tiny counters table may be read whole
			indexes = append(indexes, "ipam_pool_counters_pkey")
		}
		for _, index := range indexes {
			if !strings.Contains(plan, " on "+index) && !strings.Contains(plan, "using "+index) {
				t.Errorf("the usage query does not use %s (%q):\n%s", index, setting, plan)
			}
		}
		if strings.Contains(plan, "Index Only Scan using ipam_allocations_pool_state") {
			t.Errorf("the usage query counts the pool's active rows (%q):\n%s", setting, plan)
		}
	}
	u, err := f.st.PoolUsage(f.ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range u.Categories {
		if c.Category == "instance" && (c.Active != 40000 || c.Cooling != 5000) {
			t.Fatalf("instance usage %+v", c.UsageCounts)
		}
	}
}

// BenchmarkPoolUsageMillion measures PoolUsage on a pool of one million
// allocations (800k active, 100k cooling, 100k long cooled). Run it with
//
//	go test -run '^$' -bench PoolUsageMillion ./ipam/
func BenchmarkPoolUsageMillion(b *testing.B) {
	ctx := context.Background()
	url := testdb.New(b)
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	raw, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close(ctx)
	if _, err := st.CreateCluster(ctx, ipam.Cluster{ID: "c1", Prefix: netip.MustParsePrefix("2001:db8::/48"),
		NodeCooldown: ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown}); err != nil {
		b.Fatal(err)
	}
	fillPool(b, st, raw, "c1/instance", "2001:db8:0:1::", 1000000)
	for b.Loop() {
		u, err := st.PoolUsage(ctx, "c1")
		if err != nil {
			b.Fatal(err)
		}
		if u.Categories[1].Active != 800000 || u.Categories[1].Cooling != 100000 {
			b.Fatalf("instance usage %+v", u.Categories[1].UsageCounts)
		}
	}
}
