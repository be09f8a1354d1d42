package engine_test

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
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
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
	f.exec(`UPDATE ipam_allocations SET state = 'reserved', owner_kind = 'env_ipv4', owner_id = 'r1', reusable_at = now() + interval '10 minutes',
			reserved_until = now() + interval '10 minutes'
		WHERE id = (SELECT id FROM ipam_allocations WHERE pool_id = 'c1/v4' AND state = 'free' ORDER BY ordinal LIMIT 1)`)
	f.exec(`UPDATE ipam_allocations SET state = 'reserved', owner_kind = 'env_ipv4', owner_id = 'r2', reusable_at = now() - interval '1 minute',
			reserved_until = now() - interval '1 minute'
		WHERE id = (SELECT id FROM ipam_allocations WHERE pool_id = 'c1/v4' AND state = 'free' ORDER BY ordinal LIMIT 1)`)
	// The expired hold is free: e5 takes it; then the pool is full.
	f.alloc("c1/v4", env("e5"))
	if _, err := f.st.Allocate(f.ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: env("e6")}); engine.Code(err) != engine.CodeExhausted {
		t.Fatalf("e6: %v, want ipam_exhausted", err)
	}
	// A failure older than the window is not counted.
	f.exec(`INSERT INTO ipam_allocation_failures (id, at, cluster_id, pool_id, reason) VALUES (gen_random_uuid(), now() - interval '25 hours', 'c1', 'c1/v4', 'ipam_exhausted')`)
	if _, err := f.st.CreatePool(f.ctx, engine.Pool{ClusterID: "c1", Name: "v6", Cooldown: time.Hour, CIDRs: prefixes("2001:db8:0:ff::/120")}); err != nil {
		t.Fatal(err)
	}
	f.alloc("c1/v6", instance("i9"))

	u, err := engine.OperatorOf(f.st).PoolUsage(f.ctx, "c1")
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
	byCat := map[string]engine.CategoryUsage{}
	for _, c := range u.Categories {
		byCat[c.Category] = c
	}
	check := func(name string, got engine.UsageCounts, size, active, reserved, cooling, free int64, alert bool) {
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
	if got := byCat["ipv4"].Failures; len(got) != 1 || got[engine.CodeExhausted] != 1 {
		t.Errorf("ipv4 failures %v, want one ipam_exhausted in the last 24h", got)
	}
	if next := byCat["instance"].CooldownQueue.NextReusableAt; next == nil || next.Sub(u.At) < 23*time.Hour || next.Sub(u.At) > 25*time.Hour {
		t.Errorf("instance queue next reusable %v (now %v), want about 24h ahead", next, u.At)
	}
	if next := byCat["node"].CooldownQueue.NextReusableAt; next == nil || next.Sub(u.At) < 29*24*time.Hour {
		t.Errorf("node queue next reusable %v, want about 30 days ahead", next)
	}
	for _, p := range u.Pools {
		if p.PoolID == "c1/v4" && (p.Name != "v4" || p.Family != 4 || p.Kind != "table" || !p.Alert || p.Failures[engine.CodeExhausted] != 1) {
			t.Errorf("pool v4: %+v", p)
		}
	}

	// Every cluster at once, and the errors.
	f.mkSecondCluster()
	all, err := engine.OperatorOf(f.st).AllUsage(f.ctx)
	if err != nil || len(all) != 2 || all[0].ClusterID != "c1" || all[1].ClusterID != "c2" || len(all[1].Categories) != 3 {
		t.Fatalf("AllUsage: %d clusters, %v", len(all), err)
	}
	if _, err := engine.OperatorOf(f.st).PoolUsage(f.ctx, "nope"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("unknown cluster: %v", err)
	}
	if _, err := engine.OperatorOf(f.st).PoolUsage(f.ctx, "bad id!"); engine.Code(err) != engine.CodeInvalid {
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
func fillPool(tb testing.TB, st *engine.Client, raw *pgx.Conn, pool, base string, n int) {
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
	if fixed, err := engine.OperatorOf(st).RecountUsage(ctx, "c1"); err != nil || len(fixed) != 1 || fixed[0].PoolID != pool || fixed[0].Active != int64(n)*8/10 {
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
		rows, err := tx.Query(f.ctx, "EXPLAIN "+engine.UsagePoolsSQL, "c1")
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
	for _, setting := range []string{engine.UsagePlannerSetting, ""} {
		plan := explain(setting)
		t.Logf("usage plan (%q):\n%s", setting, plan)
		if strings.Contains(plan, "Seq Scan on ipam_allocations") {
			t.Fatalf("the usage query scans ipam_allocations sequentially (%q):\n%s", setting, plan)
		}
		indexes := []string{"ipam_allocations_pool_state"}
		if setting != "" { // without it a tiny counters table may be read whole
			indexes = append(indexes, "ipam_pool_counters_pkey")
		}
		for _, index := range indexes {
			if !strings.Contains(plan, " on "+index) && !strings.Contains(plan, "using "+index) {
				t.Errorf("the usage query does not use %s (%q):\n%s", index, setting, plan)
			}
		}
		if strings.Contains(plan, "state = 'active'") {
			t.Errorf("the usage query counts the pool's active rows (%q):\n%s", setting, plan)
		}
	}
	if c := f.instanceUsage(); c.Active != 40000 || c.Cooling != 5000 {
		t.Fatalf("instance usage %+v", c)
	}
}

// Usage reads a pool's holds and cooling rows through the indexes that keep
// them in order, whatever the planner believes about the table: here its
// statistics date from before a mass release (every row active: autovacuum
// analyzes a large table only once a tenth of it has changed), so that
// every index of the rows that are not active looks empty. The releases
// spread over ten minutes, 30 a minute: no read may take more than one
// minute's. Usage counted the pool's holds by walking its whole reuse
// queue, and the rows before the cooling buckets by walking every cooling
// row of the table.
func TestPoolUsageAfterAMassRelease(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	owners := make([]engine.Owner, 400)
	for i := range owners {
		owners[i] = instance(fmt.Sprintf("i-%d", i))
		f.alloc("c1/instance", owners[i])
	}
	f.exec(`ANALYZE ipam_allocations`)
	for i, o := range owners[:300] {
		seamClock(t, f.raw, time.Duration(i/30)*time.Minute)
		f.release(o)
	}
	tx, err := f.raw.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(f.ctx) }()
	if _, err := tx.Exec(f.ctx, engine.UsagePlannerSetting); err != nil {
		t.Fatal(err)
	}
	var js string
	if err := tx.QueryRow(f.ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+engine.UsagePoolsSQL, "c1").Scan(&js); err != nil {
		t.Fatal(err)
	}
	for _, n := range planNodes(t, js) {
		if n.Relation == "ipam_allocations" && (n.Rows+n.Removed)*n.Loops > 31 {
			t.Errorf("%s on ipam_allocations using %s (%s) read %.0f rows for usage, more than a minute's releases:\n%s",
				n.Type, n.Index, n.IndexCond, (n.Rows+n.Removed)*n.Loops, js)
		}
	}
	// The next to leave the cooldown is the first released, read from the
	// first counted minute that holds any (all are past the next two).
	var first time.Time
	if err := f.raw.QueryRow(f.ctx, `SELECT min(reusable_at) FROM ipam_allocations
		WHERE pool_id = 'c1/instance' AND state = 'cooling'`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	c := f.instanceUsage()
	if c.Active != 100 || c.Cooling != 300 {
		t.Errorf("instance usage %+v, want 100 active and 300 cooling", c)
	}
	if next := c.CooldownQueue.NextReusableAt; next == nil || !next.Equal(first) {
		t.Errorf("the next address leaves the cooldown at %v, want %v (the first released)", next, first)
	}
}

// instanceUsage is what PoolUsage reports for the instance category of c1.
func (f *opsFixture) instanceUsage() engine.UsageCounts {
	f.t.Helper()
	u, err := engine.OperatorOf(f.st).PoolUsage(f.ctx, "c1")
	if err != nil {
		f.t.Fatal(err)
	}
	for _, c := range u.Categories {
		if c.Category == "instance" {
			return c.UsageCounts
		}
	}
	f.t.Fatal("c1's usage has no instance category")
	return engine.UsageCounts{}
}

// BenchmarkPoolUsageMillion measures PoolUsage on a pool of one million
// allocations (800k active, 100k cooling, 100k long cooled). Run it with
//
//	go test -run '^$' -bench PoolUsageMillion ./ipam/
func BenchmarkPoolUsageMillion(b *testing.B) {
	ctx := context.Background()
	url := testdb.New(b)
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: url})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	raw, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close(ctx)
	if _, err := st.CreateCluster(ctx, engine.Cluster{ID: "c1", Prefix: netip.MustParsePrefix("2001:db8::/48"),
		NodeCooldown: engine.DefaultNodeCooldown, InstanceCooldown: engine.DefaultInstanceCooldown}); err != nil {
		b.Fatal(err)
	}
	fillPool(b, st, raw, "c1/instance", "2001:db8:0:1::", 1000000)
	for b.Loop() {
		u, err := engine.OperatorOf(st).PoolUsage(ctx, "c1")
		if err != nil {
			b.Fatal(err)
		}
		if u.Categories[1].Active != 800000 || u.Categories[1].Cooling != 100000 {
			b.Fatalf("instance usage %+v", u.Categories[1].UsageCounts)
		}
	}
}

// The cooling count usage reports comes from per-minute counts kept by
// triggers (ipam_pool_cooling), with the rows of the next two minutes counted
// on the index. Every way a row enters or leaves its cooldown keeps the
// count; time passing moves rows out of it without a write; Check finds a
// count that drifted and RecountUsage repairs it.
func TestCoolingCounts(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	cooling := func(t *testing.T, category string) int64 {
		t.Helper()
		u, err := engine.OperatorOf(f.st).PoolUsage(f.ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range u.Categories {
			if c.Category == category {
				if c.CooldownQueue.Count != c.Cooling {
					t.Fatalf("%s: cooldown queue %d, cooling %d", category, c.CooldownQueue.Count, c.Cooling)
				}
				return c.Cooling
			}
		}
		t.Fatalf("no category %s", category)
		return 0
	}
	counted := func(t *testing.T, pool string) int64 {
		t.Helper()
		return seamCount(t, f.raw, `SELECT count(*) FROM ipam_allocations WHERE pool_id = $1 AND state = 'cooling' AND reusable_at > ipam_now()`, pool)
	}
	checkOK := func(t *testing.T) {
		t.Helper()
		rep, err := engine.OperatorOf(f.st).Check(f.ctx, "c1")
		if err != nil || len(rep.Violations) > 0 {
			t.Fatalf("check: %v %+v", err, rep.Violations)
		}
	}

	t.Run("releases, concurrent ones included, are counted", func(t *testing.T) {
		const n = 24
		for i := range n {
			f.alloc("c1/instance", instance(fmt.Sprintf("i%d", i)))
		}
		errs := make(chan error, n)
		for i := range n {
			go func() {
				_, err := f.st.Release(f.ctx, "c1", instance(fmt.Sprintf("i%d", i)), 0)
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := cooling(t, "instance"); got != n || counted(t, "c1/instance") != n {
			t.Fatalf("cooling %d, want %d", got, n)
		}
		if rows := seamCount(t, f.raw, `SELECT count(*) FROM ipam_pool_cooling WHERE pool_id = 'c1/instance'`); rows < 1 || rows > n {
			t.Fatalf("%d count rows for %d releases in one minute", rows, n)
		}
		checkOK(t)
	})
	t.Run("the owner taking its cooling address back leaves the count", func(t *testing.T) {
		f.alloc("c1/instance", instance("i0"))
		if got := cooling(t, "instance"); got != 23 {
			t.Fatalf("cooling %d after i0 took its address back, want 23", got)
		}
		checkOK(t)
	})
	t.Run("rows inside the next two minutes are counted on the index", func(t *testing.T) {
		f.exec(`UPDATE ipam_allocations SET reusable_at = ipam_now() + interval '30 seconds', cooling_until = ipam_now() + interval '30 seconds'
			WHERE id IN (SELECT id FROM ipam_allocations WHERE pool_id = 'c1/instance' AND state = 'cooling' ORDER BY ordinal LIMIT 3)`)
		if got := cooling(t, "instance"); got != 23 {
			t.Fatalf("cooling %d with 3 rows due in 30 s, want 23", got)
		}
		checkOK(t)
	})
	t.Run("time passing ends cooldowns without a write", func(t *testing.T) {
		seamClock(t, f.raw, time.Minute)
		if got := cooling(t, "instance"); got != 20 {
			t.Fatalf("cooling %d a minute later, want 20", got)
		}
		seamClock(t, f.raw, 25*time.Hour)
		if got := cooling(t, "instance"); got != 0 {
			t.Fatalf("cooling %d 25 hours later, want 0", got)
		}
		checkOK(t)
		// A release now starts a new cooldown; past buckets go, four at a
		// time, as writers pass.
		const past = `SELECT count(*) FROM ipam_pool_cooling WHERE pool_id = 'c1/instance' AND bucket < ipam_cooling_bucket(ipam_now())`
		before := seamCount(t, f.raw, past)
		f.alloc("c1/instance", instance("late"))
		f.release(instance("late"))
		if got := cooling(t, "instance"); got != 1 {
			t.Fatalf("cooling %d, want 1", got)
		}
		if after := seamCount(t, f.raw, past); before == 0 || after != max(0, before-4) {
			t.Errorf("%d past count rows before a release, %d after", before, after)
		}
		checkOK(t)
	})
	t.Run("a drifted count is found and repaired", func(t *testing.T) {
		f.exec(`UPDATE ipam_pool_cooling SET cooling = cooling + 2 WHERE pool_id = 'c1/instance'`)
		rep, err := engine.OperatorOf(f.st).Check(f.ctx, "c1")
		if err != nil || len(rep.Violations) != 1 || rep.Violations[0].Invariant != engine.InvariantUsageCounts ||
			!strings.Contains(rep.Violations[0].Detail, "the cooling counts say 3 addresses") {
			t.Fatalf("check: %v %+v", err, rep.Violations)
		}
		fixed, err := engine.OperatorOf(f.st).RecountUsage(f.ctx, "c1")
		if err != nil || len(fixed) != 1 || fixed[0].PoolID != "c1/instance" || fixed[0].CoolingWas != 3 || fixed[0].Cooling != 1 || fixed[0].Was != fixed[0].Active {
			t.Fatalf("recount: %+v %v", fixed, err)
		}
		checkOK(t)
		if got := cooling(t, "instance"); got != 1 {
			t.Fatalf("cooling %d after the recount, want 1", got)
		}
	})
}

// A pool's usage counts its cooling addresses, and a cluster's tombstones
// those its destroyed pools left cooling. Paused at each of its statement
// boundaries while the pool of a cooling address is destroyed (which turns
// it into such a tombstone), the usage must count the address once, as the
// database was at one moment: not twice, and not never.
func TestUsageReadsOneMoment(t *testing.T) {
	t.Parallel()
	e := newExploreEnv(t)
	var got engine.ClusterUsage
	var gotErr error
	usage := exploreStep{name: "ipamctl usage --cluster c1", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		got, gotErr = engine.OperatorOf(e.st).PoolUsage(ctx, "c1")
		return exploreAck{}, gotErr
	}}
	k := countBoundaries(e, fixtureV4Cooling, usage) // e0 cooling in c1/v4
	for i := 0; i <= k; i++ {
		if msg := exploreRun(e, fixtureV4Cooling, usage, poolDestroyStep(false), int32(i)); msg != "" {
			t.Errorf("paused before statement %d of %d:\n%s", i+1, k, msg)
		}
		n := got.Tombstones.Count
		for _, p := range got.Pools {
			if p.PoolID == "c1/v4" {
				n += p.Cooling
			}
		}
		if gotErr != nil || n != 1 {
			t.Errorf("paused before statement %d of %d, the pool destroyed meanwhile: e0's cooling address counted %d times "+
				"(pools %+v, tombstones %+v, %v); want once", i+1, k, n, got.Pools, got.Tombstones, gotErr)
		}
	}
}
