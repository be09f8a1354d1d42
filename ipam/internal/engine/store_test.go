package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	neturl "net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
	"github.com/overlayipam/terraform-provider-ipam/migrations"
)

// newStore opens a store on a fresh migrated database; raw is a plain
// connection to the same database for checks and for moving time.
func newStore(t *testing.T, actor string) (*engine.Client, *pgx.Conn) {
	t.Helper()
	url := testdb.New(t)
	ctx := context.Background()
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: url, MaxConnections: 20, Actor: actor})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	raw, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close(context.Background()) })
	return st, raw
}

func mkCluster(t *testing.T, st *engine.Client, id, prefix, nodePrefix, instancePrefix string) engine.Cluster {
	t.Helper()
	c := engine.Cluster{ID: id, Prefix: netip.MustParsePrefix(prefix), NodeCooldown: engine.DefaultNodeCooldown, InstanceCooldown: engine.DefaultInstanceCooldown}
	if nodePrefix != "" {
		c.NodePrefix = netip.MustParsePrefix(nodePrefix)
	}
	if instancePrefix != "" {
		c.InstancePrefix = netip.MustParsePrefix(instancePrefix)
	}
	out, err := st.CreateCluster(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// openClient opens a client with cfg, closed when the test ends.
func openClient(t *testing.T, cfg engine.Config) *engine.Client {
	t.Helper()
	c, err := engine.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// loseHold gives node "planned" a plan-time hold in cluster c's node pool
// through holder, expires it (the database's clock is the clock: the hold
// moves into the past) and lets thief allocate its address to node "thief":
// the hold is lost. It returns the lost hold.
func loseHold(t *testing.T, holder, thief *engine.Client, raw *pgx.Conn, c string) engine.Hold {
	t.Helper()
	ctx := context.Background()
	h, err := holder.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool(c), Owner: node("planned")}, time.Hour)
	if err != nil || h.Lost != nil {
		t.Fatalf("the hold: %+v %v", h.Lost, err)
	}
	if _, err := raw.Exec(ctx, `UPDATE ipam_allocations SET reusable_at = now() - interval '1 second',
		reserved_until = now() - interval '1 second' WHERE state = 'reserved'`); err != nil {
		t.Fatal(err)
	}
	if _, err := thief.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool(c), Owner: node("thief"), Address: h.Address}); err != nil {
		t.Fatal(err)
	}
	return h
}

// Every path allocates in each statement mode that describes statements,
// and the other modes are refused at Open and New. A connection string may
// choose how pgx sends statements (default_query_exec_mode): in each mode
// that describes statements, the fast take, a plan-time hold and its confirm,
// the full path's exact claim, adoption and dropped hold, and a release all
// work; the modes that do not describe (whose parameters' types pgx guesses
// from Go values: a jsonb document fails) are refused at Open and New,
// naming the mode and the ones to use.
func TestEveryStatementModeServesEveryPath(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"exec", "simple_protocol"} {
		url := testdb.New(t)
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		_, err := engine.Open(context.Background(), engine.Config{DatabaseURL: url + sep + "default_query_exec_mode=" + mode})
		var inv *engine.InvalidError
		if !errors.As(err, &inv) || inv.Field != "database_url" || !strings.Contains(err.Error(), "default_query_exec_mode="+mode+" is not supported") ||
			!strings.Contains(err.Error(), "cache_describe") {
			t.Errorf("Open in mode %s: %v, want invalid_input naming database_url and the modes to use", mode, err)
		}
		pc, err := pgxpool.ParseConfig(url + sep + "default_query_exec_mode=" + mode)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.New(pool, engine.Config{}); !errors.As(err, &inv) || inv.Field != "pool" {
			t.Errorf("New over a pool in mode %s: %v, want invalid_input naming the pool", mode, err)
		}
		pool.Close()
	}
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			url := testdb.New(t)
			sep := "?"
			if strings.Contains(url, "?") {
				sep = "&"
			}
			st := openClient(t, engine.Config{DatabaseURL: url + sep + "default_query_exec_mode=" + mode, Actor: "terraform"})
			if got := st.StatementMode(); got != mode {
				t.Fatalf("statement mode %q, want %q", got, mode)
			}
			ctx := context.Background()
			mkCluster(t, st, "c1", "2001:db8::/48", "", "")
			n1, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: node("n1")})
			if err != nil {
				t.Fatalf("fast take: %v", err)
			}
			h, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: instance("i1")}, time.Hour)
			if err != nil {
				t.Fatalf("hold: %v", err)
			}
			if i1, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: instance("i1"), Address: h.Address}); err != nil || i1.Address != h.Address {
				t.Fatalf("confirm: %v %v, want %v", i1.Address, err, h.Address)
			}
			claim := engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n2"), Address: n1.Address.Next().Next().Next()}
			n2, err := st.Allocate(ctx, claim)
			if err != nil || n2.Address != claim.Address {
				t.Fatalf("exact claim: %v %v, want %v", n2.Address, err, claim.Address)
			}
			again, err := st.Allocate(ctx, claim)
			if err != nil || !again.Adopted || again.Generation <= n2.Generation {
				t.Fatalf("adoption: %+v %v", again, err)
			}
			h2, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: instance("i2")}, time.Hour)
			if err != nil {
				t.Fatalf("second hold: %v", err)
			}
			moved := h2.Address.Next().Next()
			if i2, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: instance("i2"), Address: moved}); err != nil || i2.Address != moved {
				t.Fatalf("a claim past the owner's hold: %v %v, want %v", i2.Address, err, moved)
			}
			if ok, err := st.Release(ctx, "c1", node("n2"), again.Generation); err != nil || !ok {
				t.Fatalf("release: %v %v", ok, err)
			}
		})
	}
}

func node(id string) engine.Owner {
	return engine.Owner{Kind: engine.OwnerNode, ID: id, NodeID: id}
}

func instance(id string) engine.Owner {
	return engine.Owner{Kind: engine.OwnerInstance, ID: id, InstanceID: id, OrgID: "org", EnvID: "env"}
}

// age moves every cooling address of a pool back in time, as if d had passed.
func age(t *testing.T, raw *pgx.Conn, poolID string, d time.Duration) {
	t.Helper()
	_, err := raw.Exec(context.Background(), `UPDATE ipam_allocations SET released_at = released_at - $2::interval,
		reusable_at = reusable_at - $2::interval, cooling_until = cooling_until - $2::interval
		WHERE pool_id = $1 AND state = 'cooling'`, poolID, fmt.Sprintf("%d seconds", int(d.Seconds())))
	if err != nil {
		t.Fatal(err)
	}
}

func TestClusterDefaultsAndSubPrefixes(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	c := mkCluster(t, st, "c1", "2a01:4f8:abcd::/48", "", "")
	if c.NodePrefix.String() != "2a01:4f8:abcd::/64" || c.InstancePrefix.String() != "2a01:4f8:abcd:1::/64" {
		t.Fatalf("sub-prefixes %s %s", c.NodePrefix, c.InstancePrefix)
	}
	if c.GatewayIPv6.String() != "fe80::1" || c.MTU != 1420 || c.NodeCooldown != 30*24*time.Hour {
		t.Fatalf("defaults: %+v", c)
	}
	got, err := st.GetCluster(context.Background(), "c1")
	if err != nil || got.Prefix != c.Prefix || got.InstanceCooldown != 24*time.Hour {
		t.Fatalf("GetCluster = %+v, %v", got, err)
	}
	// Overlapping clusters are refused, naming the other cluster.
	_, err = st.CreateCluster(context.Background(), engine.Cluster{ID: "c2", Prefix: netip.MustParsePrefix("2a01:4f8:abcd:100::/56"), InstanceCooldown: time.Hour})
	if err == nil || !strings.Contains(err.Error(), `"c1"`) || engine.Code(err) != engine.CodeInvalid {
		t.Fatalf("overlap: %v", err)
	}
}

func TestClusterValidation(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	bad := []struct {
		name  string
		c     engine.Cluster
		field string
	}{
		{"IPv4 prefix", engine.Cluster{ID: "x", Prefix: netip.MustParsePrefix("10.0.0.0/8"), InstanceCooldown: time.Hour}, "prefix"},
		{"prefix longer than 64 bits", engine.Cluster{ID: "x", Prefix: netip.MustParsePrefix("2001:db8::/65"), InstanceCooldown: time.Hour}, "prefix"},
		{"instance cooldown too short", engine.Cluster{ID: "x", Prefix: netip.MustParsePrefix("2001:db8::/48"), InstanceCooldown: time.Minute}, "instance_cooldown"},
		{"node prefix outside", engine.Cluster{ID: "x", Prefix: netip.MustParsePrefix("2001:db8::/48"), NodePrefix: netip.MustParsePrefix("2001:db9::/64"), InstanceCooldown: time.Hour}, "node_prefix"},
		{"instance prefix inside node prefix", engine.Cluster{ID: "x", Prefix: netip.MustParsePrefix("2001:db8::/48"), NodePrefix: netip.MustParsePrefix("2001:db8::/64"), InstancePrefix: netip.MustParsePrefix("2001:db8::/96"), InstanceCooldown: time.Hour}, "instance_prefix"},
		{"empty name", engine.Cluster{ID: "", Prefix: netip.MustParsePrefix("2001:db8::/48"), InstanceCooldown: time.Hour}, "name"},
	}
	// Sequential, not parallel: the row count below must follow them
	// (parallel subtests would run after the rest of the test).
	for _, tc := range bad {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			_, err := st.CreateCluster(context.Background(), tc.c)
			var ie *engine.InvalidError
			if !errors.As(err, &ie) || ie.Field != tc.field {
				t.Errorf("%+v: error %v, want one naming %s", tc.c, err, tc.field)
			}
		})
	}
	var n int
	if err := raw.QueryRow(context.Background(), `SELECT count(*) FROM ipam_clusters`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows written: %d %v", n, err)
	}
}

// 16 goroutines allocate 500 addresses each from one pool (one client, so
// that many of them share statements): no duplicate, none outside the
// prefix, and the ordinals fill 1 to 8000 but for a tail (see below).
func TestConcurrentAllocationIsUnique(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	c := mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	const workers, each = 16, 500
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	results := make([][]engine.AllocateResult, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r, err := st.Allocate(context.Background(), engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance(fmt.Sprintf("i-%d-%d", w, i))})
				if err != nil {
					errs <- err
					return
				}
				results[w] = append(results[w], r)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[netip.Addr]bool{}
	var maxOrd int64
	minOrd := int64(1 << 62)
	for _, rs := range results {
		for _, r := range rs {
			if seen[r.Address] {
				t.Fatalf("duplicate %s", r.Address)
			}
			seen[r.Address] = true
			if !c.InstancePrefix.Contains(r.Address) {
				t.Fatalf("%s outside %s", r.Address, c.InstancePrefix)
			}
			minOrd, maxOrd = min(minOrd, r.Ordinal), max(maxOrd, r.Ordinal)
		}
	}
	t.Logf("%d allocations, ordinals %d..%d", len(seen), minOrd, maxOrd)
	if len(seen) != workers*each || minOrd != 1 {
		t.Fatalf("%d addresses, lowest ordinal %d", len(seen), minOrd)
	}
	// Dense: every pick takes the lowest free ordinals it can lock, a single
	// statement's one and a shared statement's several alike, and a stripe
	// skipped while locked is taken by a later pick. So no ordinal below
	// the stripes' lowest next ordinal is ever skipped. Only the tail may
	// hold gaps: a pick that waited for a locked stripe takes that stripe
	// at its new next ordinal, so under load a queue of waiters can run one
	// stripe a few steps ahead of the others (at most one step per caller
	// waiting, never more than the callers times the stripes: seen here up
	// to 348 past the count under the full suite's load, 0 alone). Some of
	// the ordinals were handed out by statements that served several owners
	// (their rows share a transaction), or this tested the single statement
	// alone.
	var lowestNext int64
	if err := raw.QueryRow(context.Background(), `SELECT min(next_ordinal) FROM ipam_pool_stripes WHERE pool_id = 'c1/instance'`).Scan(&lowestNext); err != nil {
		t.Fatal(err)
	}
	used := map[int64]bool{}
	for _, rs := range results {
		for _, r := range rs {
			used[r.Ordinal] = true
		}
	}
	for n := int64(1); n < lowestNext; n++ {
		if !used[n] {
			t.Fatalf("ordinal %d skipped below the stripes' lowest next ordinal %d: the space is not filled densely", n, lowestNext)
		}
	}
	if maxOrd > workers*each+workers*int64(engine.DefaultStripes) {
		t.Fatalf("highest ordinal %d for %d allocations: a stripe ran further ahead than the waiting callers can take it", maxOrd, workers*each)
	}
	var rows, txs int
	if err := raw.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT xmin::text) FROM ipam_allocations
		WHERE state = 'active'`).Scan(&rows, &txs); err != nil {
		t.Fatal(err)
	}
	if txs >= rows {
		t.Errorf("%d rows in %d transactions: no statement served several owners", rows, txs)
	}
	t.Logf("%d rows written by %d transactions", rows, txs)
	var events, active int
	_ = raw.QueryRow(context.Background(), `SELECT count(*) FROM ipam_events WHERE type = 'instance.allocated'`).Scan(&events)
	_ = raw.QueryRow(context.Background(), `SELECT count(*) FROM ipam_allocations WHERE state = 'active'`).Scan(&active)
	if events != workers*each || active != workers*each {
		t.Fatalf("%d events, %d active rows", events, active)
	}
}

// The fresh pick tries last the stripes that another transaction has locked
// or changed since the statement's snapshot (ChangedSinceSnapshot): locking
// one changed since would make PostgreSQL set the whole statement up again
// to recheck it, only to step over it. A stripe advanced and committed after
// the snapshot, and one locked by a transaction still running, count as
// changed; one locked by a transaction done before the snapshot (a step over
// leaves its lock), and one nobody touched, do not.
func TestFreshPickTriesChangedStripesLast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	const stripe = `SELECT 1 FROM ipam_pool_stripes WHERE pool_id = 'c1/node' AND stripe = `
	if _, err := raw.Exec(ctx, "BEGIN; "+stripe+"1 FOR UPDATE; COMMIT"); err != nil {
		t.Fatal(err)
	}
	snap, err := pgx.Connect(ctx, raw.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close(ctx)
	tx, err := snap.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil { // the snapshot
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, `UPDATE ipam_pool_stripes SET next_ordinal = next_ordinal + stripe + 32 WHERE pool_id = 'c1/node' AND stripe = 2`); err != nil {
		t.Fatal(err)
	}
	locker, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Rollback(ctx) }()
	if _, err := locker.Exec(ctx, stripe+"3 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `SELECT stripe FROM ipam_pool_stripes WHERE pool_id = 'c1/node' AND `+engine.ChangedSinceSnapshot+` ORDER BY stripe`)
	if err != nil {
		t.Fatal(err)
	}
	changed, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(changed) != "[2 3]" {
		t.Errorf("stripes changed since the snapshot: %v, want [2 3] (advanced and committed since; locked by a transaction still running)", changed)
	}
	// The shared statement orders its pick by the test; the takes of one
	// owner keep the plain order.
	shared, one, inTx := engine.FreshTakes()
	if !strings.Contains(shared, "ORDER BY "+engine.ChangedSinceSnapshot+", next_ordinal") {
		t.Errorf("the shared fresh take does not try the changed stripes last:\n%s", shared)
	}
	for _, sql := range []string{one, inTx} {
		if strings.Contains(sql, engine.ChangedSinceSnapshot) {
			t.Errorf("a fresh take of one owner orders by the changed test:\n%s", sql)
		}
	}
}

func TestSequentialAllocationStartsAtOne(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	for i := 1; i <= 40; i++ {
		r, err := st.Allocate(context.Background(), engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node(fmt.Sprintf("n%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		if want := netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", i)); r.Address != want {
			t.Fatalf("allocation %d got %s, want %s", i, r.Address, want)
		}
	}
}

func TestIdempotentPerOwnerAndActor(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "team-a")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	a, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")})
	if err != nil || a.Adopted {
		t.Fatal(a, err)
	}
	b, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")})
	if err != nil || !b.Adopted || b.Address != a.Address {
		t.Fatalf("retry: %+v %v", b, err)
	}
	other, err := engine.Open(ctx, engine.Config{DatabaseURL: testdbURLOf(t, st), Actor: "team-b"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")})
	if engine.Code(err) != engine.CodeOwnerConflict || !strings.Contains(err.Error(), `"team-a"`) || !strings.Contains(err.Error(), "import") {
		t.Fatalf("other actor: %v", err)
	}
}

// The cooldown: a released address is not reused inside its cooldown, and is
// reused, oldest-cooled first, once fresh space is exhausted and it has passed.
func TestCooldownBlocksReuseThenOldestCooledFirst(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	// A /125 node prefix: ordinals 1..7 usable (::0 is the anycast address).
	mkCluster(t, st, "c1", "2001:db8::/48", "2001:db8::/125", "")
	ctx := context.Background()
	alloc := func(id string) (engine.AllocateResult, error) {
		return st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node(id)})
	}
	var addrs []netip.Addr
	gens := map[netip.Addr]int64{}
	for i := 1; i <= 7; i++ {
		r, err := alloc(fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, r.Address)
		gens[r.Address] = r.Generation
	}
	// Release n3, then n1, then n5: n3 cooled longest.
	for _, id := range []string{"n3", "n1", "n5"} {
		if ok, err := st.Release(ctx, "c1", node(id), 0); err != nil || !ok {
			t.Fatal(ok, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Inside the cooldown: exhausted, with the figures.
	_, err := alloc("n8")
	var ex *engine.ExhaustedError
	if !errors.As(err, &ex) || ex.Size != 7 || ex.Active != 4 || ex.Cooling != 3 || ex.NextReusable.IsZero() {
		t.Fatalf("inside cooldown: %v", err)
	}
	for _, want := range []string{"ipam_exhausted", `"c1/node"`, "size 7", "3 cooling", "next becomes reusable at"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q missing from %q", want, err)
		}
	}
	var failures int
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocation_failures WHERE reason = 'ipam_exhausted' AND pool_id = 'c1/node'`).Scan(&failures)
	if failures != 1 {
		t.Fatalf("%d failures recorded", failures)
	}
	// 29 days later: still cooling (node cooldown is 30 days).
	age(t, raw, "c1/node", 29*24*time.Hour)
	if _, err := alloc("n8"); engine.Code(err) != engine.CodeExhausted {
		t.Fatalf("day 29: %v", err)
	}
	// Past the cooldown: reused oldest-cooled first: n3's, n1's, n5's.
	age(t, raw, "c1/node", 2*24*time.Hour)
	for i, want := range []netip.Addr{addrs[2], addrs[0], addrs[4]} {
		r, err := alloc(fmt.Sprintf("m%d", i))
		if err != nil || r.Address != want {
			t.Fatalf("reuse %d: got %v (%v), want %s", i, r.Address, err, want)
		}
		if r.Generation <= gens[want] {
			t.Fatalf("generation %d after reuse of %s, whose last was %d", r.Generation, want, gens[want])
		}
	}
}

func TestOwnerGetsItsCoolingAddressBack(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	a, _ := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance("i1")})
	_, _ = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance("i2")})
	if ok, err := st.Release(ctx, "c1", instance("i1"), a.Generation); !ok || err != nil {
		t.Fatal(ok, err)
	}
	b, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance("i1")})
	if err != nil || b.Address != a.Address || b.Generation <= a.Generation {
		t.Fatalf("replacement got %v gen %d (%v), want %s", b.Address, b.Generation, err, a.Address)
	}
	// A stale release (old generation) is a no-op.
	if ok, err := st.Release(ctx, "c1", instance("i1"), a.Generation); ok || err != nil {
		t.Fatalf("stale release: %v %v", ok, err)
	}
	if _, err := st.GetActive(ctx, "c1", engine.OwnerInstance, "i1"); err != nil {
		t.Fatal("stale release released the new allocation")
	}
}

// An exact claim gets the address asked for, and the counter steps over it;
// another owner asking for it is refused while it is held (address_in_use,
// naming the holder) and while it cools (address_cooling, saying until
// when); an address outside the pool or the subnet-router anycast address
// is refused as invalid.
func TestExactClaimGetsItsAddressAndTheCounterStepsOver(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	want := netip.MustParseAddr("2001:db8::2")
	r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("exact"), Address: want})
	if err != nil || r.Address != want {
		t.Fatal(r, err)
	}
	// The counter steps over the claimed address.
	var got []string
	for i := range 3 {
		r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node(fmt.Sprint("n", i))})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Address.String())
	}
	if strings.Join(got, " ") != "2001:db8::1 2001:db8::3 2001:db8::4" {
		t.Fatalf("counter after an exact claim: %v", got)
	}
	_, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("other"), Address: want})
	if engine.Code(err) != engine.CodeAddressInUse || !strings.Contains(err.Error(), `"exact"`) {
		t.Fatalf("in use: %v", err)
	}
	_, _ = st.Release(ctx, "c1", node("exact"), 0)
	_, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("other"), Address: want})
	if engine.Code(err) != engine.CodeAddressCooling || !strings.Contains(err.Error(), "until") {
		t.Fatalf("cooling: %v", err)
	}
	for _, tc := range []struct{ name, addr string }{
		{"outside the node prefix", "2001:db8:1::5"},
		{"subnet-router anycast", "2001:db8::"},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("x"), Address: netip.MustParseAddr(tc.addr)})
			var ie *engine.InvalidError
			if !errors.As(err, &ie) || ie.Field != "address" {
				t.Fatalf("%s: %v, want invalid address", tc.addr, err)
			}
		})
	}
}

// A forced destroy releases each active address with its event before the
// database lets the pools go (ipam_pools_keep_live_rows refuses a pool that
// still has one).
func TestDeleteClusterRefusesWhileHolding(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	_, _ = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")})
	_, _ = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n2")})
	_, _ = st.Release(ctx, "c1", node("n2"), 0)
	// A plan's hold: its address was never routed.
	held, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n3")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	err = st.DeleteCluster(ctx, "c1", false)
	if err == nil || !strings.Contains(err.Error(), `still holds 1 active address: 2001:db8::1 (node "n1"); destroy the resources`) {
		t.Fatalf("delete: %v", err)
	}
	if err := st.DeleteCluster(ctx, "c1", true); err != nil {
		t.Fatal(err)
	}
	// The active address cools down as a tombstone; the hold's does not
	// (it was dropped, as a destroy that is not forced drops it).
	var activeCools, heldCools int
	if err := raw.QueryRow(ctx, `SELECT count(*) FILTER (WHERE address = '2001:db8::1'), count(*) FILTER (WHERE address = $1)
		FROM ipam_tombstones WHERE reusable_at > now()`, held.Address).Scan(&activeCools, &heldCools); err != nil ||
		activeCools != 1 || heldCools != 0 {
		t.Fatalf("tombstones after the forced destroy: the active address %d, the held %s %d (%v); want 1 and 0", activeCools, held.Address, heldCools, err)
	}
	var dropped int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_events WHERE type = 'allocation.hold_dropped' AND owner_id = 'n3'
		AND data->>'reason' = 'force_destroy'`).Scan(&dropped); err != nil || dropped != 1 {
		t.Fatalf("the forced destroy's drop of n3's hold: %d events (%v), want 1", dropped, err)
	}
	if _, err := st.GetCluster(ctx, "c1"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatal(err)
	}
	var released int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_events WHERE type = 'node.released' AND owner_id = 'n1'
		AND data->>'reason' = 'force_destroy'`).Scan(&released); err != nil || released != 1 {
		t.Fatalf("the forced destroy's release of n1: %d events (%v), want 1", released, err)
	}
}

// A destroy counts what the cluster holds only once no allocation can be in
// flight in any of its pools, a pool created while the destroy waited for
// the cluster's row included. The pool is created by a transaction that
// commits after the destroy locked the cluster's pools and before it locked
// the cluster's row (a second transaction holds that row too); an
// allocation from the new pool is in flight when the destroy counts. The
// destroy must refuse, naming it: before the fix it counted nothing,
// succeeded, and its cascade took the allocation away once that committed.
func TestDeleteClusterCountsAPoolCreatedWhileItWaited(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	mon := extraConn(t, raw)
	blockedBy := func(tx pgx.Tx, what string) { waitBlockedBy(t, mon, tx, "the destroy", what) }
	creating := beginOn(t, extraConn(t, raw))
	if _, err := st.InTx(creating).CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/29")}}); err != nil {
		t.Fatal(err)
	}
	holding := beginOn(t, extraConn(t, raw))
	if _, err := holding.Exec(ctx, `SELECT 1 FROM ipam_clusters WHERE id = 'c1' FOR KEY SHARE`); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- st.DeleteCluster(ctx, "c1", false) }()
	blockedBy(creating, "the cluster's row")
	if err := creating.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	allocating := beginOn(t, extraConn(t, raw))
	a, err := st.AllocateEnvIPv4(ctx, allocating, engine.EnvIPv4Request{ClusterID: "c1", Pool: "v4", OrgID: "o1", EnvID: "e1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := holding.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-deleted:
		t.Fatalf("the destroy ended (%v) with an allocation in flight", err)
	default:
	}
	blockedBy(allocating, "the allocation in flight")
	if err := allocating.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-deleted
	var ce *engine.ConflictError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "1 active") {
		t.Fatalf("destroy: %v, want refused for the allocation of %s", err, a.Address)
	}
	var n int
	if err := mon.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'e1' AND state = 'active'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the allocation of %s: %d rows (%v), want 1", a.Address, n, err)
	}
}

// extraConn is one more connection to raw's database, closed with the test.
func extraConn(t *testing.T, raw *pgx.Conn) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), raw.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// beginOn begins a transaction on c.
func beginOn(t *testing.T, c *pgx.Conn) pgx.Tx {
	t.Helper()
	tx, err := c.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// waitBlockedBy waits until a session waits for a lock that tx holds; who
// and what name them in the failure.
func waitBlockedBy(t *testing.T, mon *pgx.Conn, tx pgx.Tx, who, what string) {
	t.Helper()
	pid := tx.Conn().PgConn().PID()
	for deadline := time.Now().Add(hangBound); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := mon.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE $1::int = ANY (pg_blocking_pids(pid))`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never waited for %s", who, what)
		}
	}
}

// A read-only server (a standby, or a primary being demoted) refuses at once
// the writes a call marks as ones it can do without (WritesOptional: what a
// plan or a refresh writes): a plan-time hold answers read_only saying the
// server is read-only, a replacement's mark too, and a refresh whose record
// is due, of an allocation or of a set's members, reads without it. None
// waits for a writable server (no report of a wait; the bound is a minute
// here), and a refusal keeps its connection (a plan of many new addresses
// against a standby would otherwise connect again for each). A live hold
// due for renewal still answers the plan. The same writes unmarked, as an
// apply makes them, ride the bound out as a failover and end unavailable.
func TestReadOnlyServerRefusesOptionalWritesAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	st := openClient(t, engine.Config{DatabaseURL: url, Actor: "test"})
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	a, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")})
	if err != nil {
		t.Fatal(err)
	}
	held, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n4")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "vm-1"},
		Add: []engine.SetEntry{{Key: "overlay", Family: 6}}}); err != nil {
		t.Fatal(err)
	}
	raw, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(ctx)
	seamClock(t, raw, 40*time.Minute) // n4's hold: live, but due for renewal
	var readOnlySince time.Time
	if err := raw.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&readOnlySince); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	var first string
	var waits atomic.Int64 // told every few seconds of a wait for a usable server
	ro := openClient(t, engine.Config{DatabaseURL: url, Actor: "test", FailoverTimeout: time.Minute, MaxConnections: 1,
		OnWait: func(context.Context, engine.Wait) { waits.Add(1) }})
	plan := engine.WritesOptional(ctx)
	// sessions: the database's sessions started after since (a session
	// that ended may linger a moment in pg_stat_activity on a busy server).
	sessions := func(since time.Time) string {
		var pids string
		if err := raw.QueryRow(ctx, `SELECT coalesce(string_agg(pid::text, ',' ORDER BY pid), '') FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_start > $1`, since).Scan(&pids); err != nil {
			t.Fatal(err)
		}
		return pids
	}
	var afterFirst time.Time
	for i := range 3 {
		_, err = ro.Reserve(plan, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node(fmt.Sprintf("n2-%d", i))}, time.Hour)
		if engine.Code(err) != engine.CodeReadOnly || !strings.Contains(err.Error(), "the server is read-only") {
			t.Errorf("a plan-time hold on a read-only server: %v, want read_only saying the server is read-only", err)
		}
		if i == 0 {
			first = sessions(readOnlySince)
			if err := raw.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&afterFirst); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A refusal keeps its connection: a plan of many new addresses
	// against a standby does not connect again for each.
	if now := sessions(afterFirst); now != "" || first == "" {
		t.Errorf("the read-only client had sessions %q after its first refused hold, and started %q over two more, want none",
			first, now)
	}
	// A live hold whose renewal the server refuses still answers the plan
	// (Terraform's re-plan at apply must show what its plan showed).
	if h, err := ro.Reserve(plan, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n4")}, time.Hour); err != nil || h.Address != held.Address {
		t.Errorf("a hold due for renewal on a read-only server: %v, %v, want its address %s", h.Address, err, held.Address)
	}
	if _, err := ro.MarkReplacement(plan, "c1", node("n1"), a.Generation, time.Hour); engine.Code(err) != engine.CodeReadOnly {
		t.Errorf("a replacement's mark on a read-only server: %v, want read_only", err)
	}
	got, err := ro.GetActive(plan, "c1", engine.OwnerNode, "n1")
	if err != nil || got.Address != a.Address || got.Confirmed {
		t.Errorf("a refresh on a read-only server: %v, %v (confirmed %v), want %s read without its record", err, got.Address, got.Confirmed, a.Address)
	}
	// A set's refresh reads its rows as they come (the record's refusal
	// arrives with them, not with the query).
	if members, err := ro.GetSet(plan, "c1", "vm-1"); err != nil || len(members) != 1 || members[0].Confirmed {
		t.Errorf("a set's refresh on a read-only server: %v, %v, want its one member read without its record", members, err)
	}
	if n := waits.Load(); n != 0 {
		t.Errorf("the optional writes waited for a writable server (%d reports of a wait), want none", n)
	}
	var rows int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE confirmed_at IS NOT NULL OR owner_id NOT IN ('n1', 'n4', 'vm-1#overlay')
			OR reserved_until > ipam_now() + interval '30 minutes'`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("the read-only server's refusals left %d rows written (%v), want none", rows, err)
	}
	bounded := openClient(t, engine.Config{DatabaseURL: url, Actor: "test", FailoverTimeout: time.Second})
	_, err = bounded.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n3")}, time.Hour)
	if engine.Code(err) != engine.CodeUnavailable || !strings.Contains(err.Error(), "is read-only") || !strings.Contains(err.Error(), "failover_timeout is 1s") {
		t.Errorf("a hold not marked optional on a read-only server: %v, want ipam_unavailable once the bound is spent", err)
	}
}

func TestUnavailableNamesHostAndPortNotPassword(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: "postgres://ipam:s3cretPassw0rd@127.0.0.1:1/ipam?sslmode=disable", ConnectTimeout: 2 * time.Second,
		FailoverTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")})
	if engine.Code(err) != engine.CodeUnavailable || !strings.Contains(err.Error(), "127.0.0.1:1 refused the connection") ||
		!strings.Contains(err.Error(), "failover_timeout is 1s") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("got %v", err)
	}
}

// Another service on the database's port (an HTTP server, say) is named for
// what it is and refused at once, not waited for as a failover.
func TestNotPostgresIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := serveTCP(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 512)
		_, _ = c.Read(buf)
		_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
	})
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: "postgres://ipam:s3cretPassw0rd@" + addr + "/ipam?sslmode=disable",
		FailoverTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")})
	if engine.Code(err) != engine.CodeRefused || !strings.Contains(err.Error(), addr+" does not speak the PostgreSQL protocol") ||
		strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("got %v, want ipam_refused naming a server that does not speak PostgreSQL", err)
	}
}

// A startup setting the server does not take (options=-c with a bad value,
// or a setting it does not know) is refused at once, not ridden out as a
// failover for failover_timeout.
func TestABadStartupSettingIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for _, opt := range []string{"-c%20statement_timeout%3Dabc", "-c%20no_such_setting_at_all%3D1"} {
		st, err := engine.Open(ctx, engine.Config{DatabaseURL: url + sep + "options=" + opt, FailoverTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = st.Migrate(cctx)
		cancel()
		st.Close()
		if engine.Code(err) != engine.CodeRefused {
			t.Errorf("options=%s: %v, want ipam_refused at once", opt, err)
		}
	}
}

// With the default failover bound, a client that no server has answered
// yet and that finds nothing listening at any host gives up after the
// first contact's wait, says so (FirstContact, and in its message), and so
// does the next call, which fails at once; an explicit bound is waited in
// full, and the message names it instead.
func TestFirstContactWithNothingThereIsCutShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const url = "postgres://ipam@127.0.0.1:1/ipam?sslmode=disable"
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, call := range []string{"first", "next"} {
		_, err = st.Migrate(ctx)
		var ue *engine.UnavailableError
		if !errors.As(err, &ue) || !ue.FirstContact || ue.Bound != engine.DefaultFailoverTimeout ||
			!strings.Contains(err.Error(), "no server has answered yet: a first contact waits 5s, not failover_timeout's 30s") {
			t.Fatalf("%s call with nothing listening: %#v (%v), want ipam_unavailable cut at the first contact", call, ue, err)
		}
	}
	// A Unix socket's directory without the socket file: nothing there too.
	sock, err := engine.Open(ctx, engine.Config{DatabaseURL: "host=" + t.TempDir() + " port=5432 user=ipam dbname=ipam"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	_, err = sock.Migrate(ctx)
	var sue *engine.UnavailableError
	if !errors.As(err, &sue) || !sue.FirstContact || !strings.Contains(err.Error(), "has no socket file") {
		t.Fatalf("a socket directory without the socket: %v, want ipam_unavailable cut at the first contact, naming the missing socket", err)
	}
	explicit, err := engine.Open(ctx, engine.Config{DatabaseURL: url, FailoverTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer explicit.Close()
	_, err = explicit.Migrate(ctx)
	var ue *engine.UnavailableError
	if !errors.As(err, &ue) || ue.FirstContact || !strings.Contains(err.Error(), "failover_timeout is 1s") {
		t.Fatalf("with failover_timeout set: %v, want the whole bound waited and named", err)
	}
}

// Four processes migrating an empty database at once each report the
// version they found when they applied their first migration (From), read
// under the migration lock: one of them found none, and each that applied
// nothing (another migrated first) reports From = Current.
func TestMigrateConcurrentlyAndRefuseNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testdb.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("ipam_empty_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		_ = admin.Close(ctx)
	})
	url := testdb.WithDatabase(testdb.AdminURL(t), name)
	latest, err := engine.LatestSchemaVersion()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	statuses := make([]engine.SchemaStatus, 4)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := engine.Open(ctx, engine.Config{DatabaseURL: url})
			if err != nil {
				t.Error(err)
				return
			}
			defer st.Close()
			if statuses[i], err = st.Migrate(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	fromNothing := 0
	for _, s := range statuses {
		if s.Current != latest || s.From > s.Current {
			t.Errorf("a concurrent migration reported %+v, want Current %d and From at most that", s, latest)
		}
		if s.From == 0 {
			fromNothing++
		}
	}
	if fromNothing != 1 {
		t.Errorf("concurrent migrations of an empty database: %+v, want exactly one from version 0", statuses)
	}
	// Each migration ran once, in one of them: what each says it applied
	// adds up to the whole, and none claims more than it saw happen.
	var applied int32
	for _, s := range statuses {
		applied += s.Applied
		if s.Found > s.From || s.Applied > s.Current-s.Found {
			t.Errorf("a concurrent migration reported %+v: found after its first migration, or applied more than it saw", s)
		}
	}
	if applied != latest {
		t.Errorf("concurrent migrations of an empty database applied %d migrations between them (%+v), want %d", applied, statuses, latest)
	}
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err := st.Migrate(ctx); err != nil || s.From != latest || s.Current != latest || s.Found != latest || s.Applied != 0 {
		t.Fatalf("migrating an up-to-date database: %+v %v, want From and Current %d", s, err, latest)
	}
	raw, _ := pgx.Connect(ctx, url)
	defer raw.Close(ctx)
	_, _ = raw.Exec(ctx, `UPDATE ipam_schema_version SET version = version + 1`)
	if _, err := st.Migrate(ctx); engine.Code(err) != engine.CodeSchema || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("newer schema: %v", err)
	}
}

// testdbURLOf recovers the database of a store for a second store: tests
// open one store per database, so the current database name is enough.
func testdbURLOf(t *testing.T, st *engine.Client) string {
	t.Helper()
	db, err := st.CurrentDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return testdb.WithDatabase(testdb.AdminURL(t), db)
}

// A hold that expires unused goes back to the pool without cooldown; the
// owner's later apply of the old plan is then refused rather than handed
// another address.
func TestReservationExpiresWithoutCooldown(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	// A /126 node prefix: 3 usable addresses.
	mkCluster(t, st, "c1", "2001:db8::/48", "2001:db8::/126", "")
	ctx := context.Background()
	hold, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("planned")}, time.Hour)
	if err != nil || hold.State != engine.StateReserved {
		t.Fatal(hold, err)
	}
	again, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("planned")}, time.Hour)
	if err != nil || again.Address != hold.Address || again.ID != hold.ID {
		t.Fatalf("planning again: %v %v", again.Address, err)
	}
	for _, id := range []string{"b", "c"} {
		if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node(id)}); err != nil {
			t.Fatal(err)
		}
	}
	// While the hold lasts, the pool is full (the hold counts as in use).
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("d")}); engine.Code(err) != engine.CodeExhausted {
		t.Fatalf("during the hold: %v", err)
	}
	// Expire it (database time is the clock: move the hold into the past).
	if _, err := raw.Exec(ctx, `UPDATE ipam_allocations SET reusable_at = now() - interval '1 second',
		reserved_until = now() - interval '1 second' WHERE state = 'reserved'`); err != nil {
		t.Fatal(err)
	}
	d, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("d")})
	if err != nil || d.Address != hold.Address {
		t.Fatalf("after expiry: got %v (%v), want the held %s with no cooldown", d.Address, err, hold.Address)
	}
	// The planned owner's apply claims its planned address and is refused.
	_, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("planned"), Address: hold.Address})
	if engine.Code(err) != engine.CodeAddressInUse || !strings.Contains(err.Error(), `"d"`) {
		t.Fatalf("stale plan: %v", err)
	}
}

// An owner whose hold expired and went to another owner is told so by the
// first plan after the loss (hold_lost, no hold), which the first look
// finds in its round trip; inside a caller's transaction it does not look.
// The next plan takes a new hold and, the loss told, names it no more, nor
// does the hold found again (a plan named it in every later plan).
func TestReserveReportsLostHold(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	req := engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("planned")}
	first := loseHold(t, st, st, raw, "c1")
	check := func(what string, h engine.Hold, err error) {
		t.Helper()
		if err != nil || h.Lost != nil || !h.Address.IsValid() || h.Address == first.Address {
			t.Fatalf("%s: holds %s, lost %+v, %v, want a new address and the told loss not named again", what, h.Address, h.Lost, err)
		}
	}
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Inside a caller's transaction the look-up is not made (it must not
	// fail, or add to, the caller's transaction).
	if in, err := st.InTx(tx).Reserve(ctx, req, time.Hour); err != nil || in.Lost != nil || in.Address == first.Address {
		t.Fatalf("in a caller's transaction: holds %s, lost %+v, %v", in.Address, in.Lost, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The first plan after the loss is told, and takes no hold: a saved
	// plan that showed the lost address is being applied, maybe.
	_, err = st.Reserve(ctx, req, time.Hour)
	var hl *engine.HoldLostError
	if !errors.As(err, &hl) || hl.Lost.Address != first.Address || hl.Lost.TakenBy != "node thief" || engine.Code(err) != engine.CodeHoldLost {
		t.Fatalf("first plan after the loss: %v, want hold_lost naming %s", err, first.Address)
	}
	var holds int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'planned'`).Scan(&holds); err != nil || holds != 0 {
		t.Fatalf("the reported loss left %d rows of the owner (%v), want none", holds, err)
	}
	h, err := st.Reserve(ctx, req, time.Hour)
	check("new hold", h, err)
	again, err := st.Reserve(ctx, req, time.Hour)
	check("found again", again, err)
	if again.ID != h.ID {
		t.Fatalf("planning again took another hold: %s, then %s", h.Address, again.Address)
	}
	// Another owner of the cluster has lost nothing.
	if o, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("other")}, time.Hour); err != nil || o.Lost != nil {
		t.Fatalf("other owner: %+v %v", o.Lost, err)
	}
}

// A lost hold is reported to every plan of the run it was first reported
// to (the re-plan of a one-command apply), and to no other.
func TestReserveReportsLostHoldToItsRun(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	url := raw.Config().ConnString()
	r1 := openClient(t, engine.Config{DatabaseURL: url, PlanRun: "r1"})
	r2 := openClient(t, engine.Config{DatabaseURL: url, PlanRun: "r2"})
	req := engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("planned")}
	first := loseHold(t, r1, st, raw, "c1")
	for i := range 2 {
		if _, err := r1.Reserve(ctx, req, time.Hour); engine.Code(err) != engine.CodeHoldLost {
			t.Fatalf("plan %d of run r1 after the loss: %v, want hold_lost", i+1, err)
		}
	}
	h, err := r2.Reserve(ctx, req, time.Hour)
	if err != nil || h.Address == first.Address || !h.Address.IsValid() {
		t.Fatalf("a plan of another run: %v %v, want a new hold", h.Address, err)
	}
	// The owner holds an address again: no run is told any more.
	if again, err := r1.Reserve(ctx, req, time.Hour); err != nil || again.ID != h.ID {
		t.Fatalf("run r1 once the owner holds again: %v %v, want %s", again.Address, err, h.Address)
	}
}

// An owner's hold becomes its allocation at apply, keeping the address.
func TestReservationConfirmedAtApply(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	hold, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance("i1")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Someone else allocating meanwhile does not get the held address.
	other, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance("i2")})
	if err != nil || other.Address == hold.Address {
		t.Fatalf("other: %v %v", other.Address, err)
	}
	a, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance("i1"), Address: hold.Address})
	if err != nil || a.Address != hold.Address || a.State != engine.StateActive {
		t.Fatalf("apply: %+v %v", a, err)
	}
	var n int
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM ipam_events WHERE type = 'instance.allocated' AND instance_id = 'i1'`).Scan(&n)
	if n != 1 {
		t.Fatalf("%d instance.allocated events for i1", n)
	}
}

// Migrate applies the current definition of every function after the
// numbered migrations, and again whenever the database records another
// checksum for one (a definition changed since, or was replaced by hand):
// the function a migration left older, or one edited in place, is put back.
func TestMigrateAppliesFunctionDefinitions(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	ctx := context.Background()
	defs, err := migrations.Definitions()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_schema_definitions`).Scan(&n); err != nil || n != len(defs) {
		t.Fatalf("definitions recorded: %d %v, want %d", n, err, len(defs))
	}
	scope := func() string {
		t.Helper()
		var s string
		if err := raw.QueryRow(ctx, `SELECT ipam_tombstone_scope('10.0.0.1', 'c1')`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if scope() != "c1" {
		t.Fatalf("ipam_tombstone_scope of a private address: %q, want the cluster", scope())
	}
	// An older definition (as a numbered migration left it, or a binary
	// before a change), recorded under its own checksum: Migrate applies
	// the current one.
	if _, err := raw.Exec(ctx, `CREATE OR REPLACE FUNCTION ipam_tombstone_scope(address inet, cluster text) RETURNS text
		LANGUAGE sql IMMUTABLE AS $$ SELECT 'edited' $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, `UPDATE ipam_schema_definitions SET checksum = 'older' WHERE name = 'ipam_tombstone_scope'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if scope() != "c1" {
		t.Fatalf("after Migrate with another checksum recorded: %q, want the current definition back", scope())
	}
	var sum string
	if err := raw.QueryRow(ctx, `SELECT checksum FROM ipam_schema_definitions WHERE name = 'ipam_tombstone_scope'`).Scan(&sum); err != nil || sum == "older" {
		t.Fatalf("recorded checksum: %q %v", sum, err)
	}
}

// Concurrent requests for one owner agree on one answer: two allocations of
// an environment racing for its pool's last free address both get it (one
// adopts the other's), and two exact claims of one address by one node
// both get it; neither answers ipam_exhausted or address_in_use naming the
// owner itself, and no allocation failure is recorded.
func TestConcurrentRequestsOfOneOwnerAgree(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "terraform")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	const rounds = 30
	race := func(round int, req engine.AllocateRequest) {
		t.Helper()
		var wg sync.WaitGroup
		got := make([]engine.AllocateResult, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = st.Allocate(ctx, req)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: request %d of %s %s: %v", round, i, req.Owner.Kind, req.Owner.ID, err)
			}
		}
		if got[0].Address != got[1].Address {
			t.Fatalf("round %d: the two requests of %s got %s and %s", round, req.Owner.ID, got[0].Address, got[1].Address)
		}
	}
	for r := range rounds {
		// A pool of one address: both race for its last free one.
		name := fmt.Sprintf("one%d", r)
		if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: name, Cooldown: time.Hour,
			CIDRs: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("203.0.113.%d/32", r+1))}}); err != nil {
			t.Fatal(err)
		}
		race(r, engine.AllocateRequest{Pool: engine.OperatorPool("c1", name), Owner: envOwner(fmt.Sprintf("e%d", r))})
		// Both claim one address exactly.
		race(r, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: node(fmt.Sprintf("n%d", r)),
			Address: netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", 0x100+r))})
	}
	var failures int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocation_failures`).Scan(&failures); err != nil || failures != 0 {
		t.Fatalf("allocation failures recorded: %d %v, want none", failures, err)
	}
}

// The generic verbs give an owner the label that names it, as the typed
// verbs do: a listing by instance_id (or node_id, env_id) finds what
// Allocate and Reserve write for an owner that did not repeat its id there.
func TestGenericVerbsWriteTheOwnersOwnLabel(t *testing.T) {
	st, raw := newStore(t, "tf")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: engine.Owner{Kind: engine.OwnerInstance, ID: "r-1"}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: engine.Owner{Kind: engine.OwnerNode, ID: "n-1"}}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE (owner_kind, instance_id) = ('instance', 'r-1')
		OR (owner_kind, node_id) = ('node', 'n-1')`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows labelled with their owner: %d (%v), want 2", n, err)
	}
}

// An owner takes its cooling address back only for the same tenant: an
// instance released under one org gets it back under that org, but under
// another org it gets a fresh address (its old one keeps cooling, and a claim
// of it is refused), on every path that takes one (an allocation, a plan-time
// hold and its confirm, an exact claim); back under the first org, it gets
// that org's address back.
func TestOwnCoolingAddressStaysWithItsTenant(t *testing.T) {
	st, _ := newStore(t, "tf")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	inst := func(org string) engine.Owner {
		return engine.Owner{Kind: engine.OwnerInstance, ID: "vm-1", InstanceID: "vm-1", OrgID: org, EnvID: "prod"}
	}
	req := func(o engine.Owner) engine.AllocateRequest {
		return engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: o}
	}
	release := func() {
		t.Helper()
		if ok, err := st.Release(ctx, "c1", engine.Owner{Kind: engine.OwnerInstance, ID: "vm-1"}, 0); err != nil || !ok {
			t.Fatalf("release: %v %v", ok, err)
		}
	}
	first, err := st.Allocate(ctx, req(inst("acme")))
	if err != nil {
		t.Fatal(err)
	}
	release()
	if back, err := st.Allocate(ctx, req(inst("acme"))); err != nil || back.Address != first.Address {
		t.Fatalf("the same org: %v %v, want %v back", back.Address, err, first.Address)
	}
	release()
	// Another org: a fresh address, by hold and confirm, and by allocation.
	h, err := st.Reserve(ctx, req(inst("evilcorp")), time.Hour)
	if err != nil || h.Address == first.Address {
		t.Fatalf("hold for another org: %v %v, want an address other than %v", h.Address, err, first.Address)
	}
	confirm := req(inst("evilcorp"))
	confirm.Address = h.Address
	if c, err := st.Allocate(ctx, confirm); err != nil || c.Address != h.Address {
		t.Fatalf("confirm for another org: %v %v", c.Address, err)
	}
	release()
	other, err := st.Allocate(ctx, req(inst("globex")))
	if err != nil || other.Address == first.Address {
		t.Fatalf("allocation for another org: %v %v, want an address other than %v", other.Address, err, first.Address)
	}
	release()
	// A replacement that changes the tenant (create_before_destroy: the
	// create first, on the allocation its plan marked) does not take the
	// address over: the old one cools down, the new tenant gets another.
	live, err := st.Allocate(ctx, req(inst("hooli")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkReplacement(ctx, "c1", inst("hooli"), live.Generation, time.Hour); err != nil {
		t.Fatalf("mark: %v", err)
	}
	moved, err := st.Allocate(ctx, req(inst("umbrella")))
	if err != nil || moved.Address == live.Address || moved.Adopted {
		t.Fatalf("replacement for another org: %v adopted %v (%v), want an address other than %v", moved.Address, moved.Adopted, err, live.Address)
	}
	release()
	again := req(inst("initech"))
	again.Address = first.Address
	if _, err := st.Allocate(ctx, again); engine.Code(err) != engine.CodeAddressCooling {
		t.Fatalf("claim of the address cooling for the first org, by another: %v, want address_cooling", err)
	}
	// Back under the first org, the owner gets that org's address back,
	// though it was released under other orgs since: its latest cooling
	// address of the tenant, not its latest of all (which is another's).
	if back, err := st.Allocate(ctx, req(inst("acme"))); err != nil || back.Address != first.Address {
		t.Fatalf("the first org again, after other orgs: %v %v, want %v back", back.Address, err, first.Address)
	}
}

// A server that accepts connections and never answers (a hung host, a
// stuck proxy) is the database's absence: a one-statement call fails with
// ipam_unavailable once FailoverTimeout has passed. It ran into the take
// statement's own bound (lock_timeout and two seconds) and was named a
// statement that ran past it, ipam_timeout, and the next path waited
// again: two minutes in all (found by a trial of the scheduler's API).
func TestAServerThatNeverAnswersIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var held []net.Conn
	var mu sync.Mutex
	addr := serveTCP(t, func(c net.Conn) {
		mu.Lock()
		held = append(held, c) // read nothing, answer nothing
		mu.Unlock()
	})
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	}()
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: "postgres://ipam:s3cretPassw0rd@" + addr + "/ipam?sslmode=disable",
		ConnectTimeout: time.Second, FailoverTimeout: 3 * time.Second, LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	_, err = st.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: "i1", OrgID: "o", EnvID: "e"})
	if took := time.Since(start); engine.Code(err) != engine.CodeUnavailable || took > 15*time.Second || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("a call against a server that never answers: %v after %s, want ipam_unavailable after about 3s", err, took)
	} else {
		t.Logf("after %s: %v", took, err)
	}
}

// serveTCP listens on a port of the loopback until the test ends, and hands
// each connection to handle (on a goroutine of its own); it returns the
// address.
func serveTCP(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}

// A role with no connection slot left (its CONNECTION LIMIT reached) is
// ipam_unavailable with NoSlots set, so that the advice names the limits
// rather than a failover's settings (found by a trial as an operator).
func TestNoConnectionSlotLeftIsNamed(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	ctx := context.Background()
	raw, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(ctx)
	role := fmt.Sprintf("noslots_%d", time.Now().UnixNano()%1e9)
	if _, err := raw.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'pw' CONNECTION LIMIT 0`, role)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = raw.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(role, "pw")
	st, err := engine.Open(ctx, engine.Config{DatabaseURL: u.String(), FailoverTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.GetCluster(ctx, "c1")
	var ue *engine.UnavailableError
	if !errors.As(err, &ue) || !ue.NoSlots || !strings.Contains(err.Error(), "has no connection slot left") {
		t.Fatalf("a role at its connection limit: %v, want ipam_unavailable with NoSlots", err)
	}
}

// A call on a client after its Close is the caller's mistake, named as such
// at once: not a database outage waited for, not pgx's bare "closed pool".
func TestCallAfterCloseIsNamed(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "t")
	mkCluster(t, st, "c1", "2001:db8:1::/48", "", "")
	st.Close()
	// A call that waited for a server (failover_timeout, a minute) would
	// end with this context instead.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := st.AllocateNode(ctx, nil, engine.NodeRequest{ClusterID: "c1", NodeID: "n1"})
	if !errors.Is(err, engine.ErrClosed) || !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "client is closed") {
		t.Fatalf("AllocateNode after Close: %v, want ErrClosed", err)
	}
	if _, err := st.GetCluster(ctx, "c1"); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("GetCluster after Close: %v, want ErrClosed", err)
	}
}

// A client made by New over the caller's pool, once closed, refuses every
// call as a closed one does, with or without the caller's transaction,
// and allocates nothing; the caller's pool stays open for the caller.
func TestCallAfterCloseOfABorrowingClientIsNamed(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, "") // a client made by New over s.db, with cluster c1
	ctx := context.Background()
	st, raw := s.client, s.db
	st.Close()
	req := engine.InstanceRequest{ClusterID: "c1", InstanceID: "after-close", OrgID: "acme", EnvID: "prod"}
	if _, err := st.AllocateInstance(ctx, nil, req); !errors.Is(err, engine.ErrClosed) || !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("AllocateInstance after Close: %v, want ErrClosed", err)
	}
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := st.AllocateInstance(ctx, tx, req); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("AllocateInstance in the caller's transaction after Close: %v, want ErrClosed", err)
	}
	if _, err := st.InTx(tx).GetCluster(ctx, "c1"); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("GetCluster in the caller's transaction after Close: %v, want ErrClosed", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the caller's transaction after the refusals: %v", err)
	}
	var n int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'after-close'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d allocations after Close (%v), want none", n, err)
	}
}
