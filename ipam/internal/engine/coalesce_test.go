package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// Concurrent allocations of one client share statements, in every
// combination the single statements meet: owners that already hold an
// address (adopted by the full path, with the same address), instances whose
// node has blocks (served from the blocks), exact claims just ahead of the
// counter (a batch that meets one fails whole, and its owners go on alone),
// and node, instance and IPv4 owners at once. Every caller gets an address,
// no address is handed out twice, every allocation has its event, the pools'
// counters match a real count. Whether those callers shared statements
// depends on the machine's timing, so the instance and the IPv4 pools then
// serve callers gathered behind a lock (sharedOnce): one statement writes
// all their rows (one transaction id), or nothing here tested the batch.
func TestConcurrentAllocationsShareStatements(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "nb", scaling(40, 16)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/22")}}); err != nil {
		t.Fatal(err)
	}
	earlier := map[string]netip.Addr{}
	for i := range 8 {
		r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: node(fmt.Sprintf("n-%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		earlier["node/"+fmt.Sprintf("n-%d", i)] = r.Address
		env := fmt.Sprintf("e-%d", i)
		if r, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"),
			Owner: engine.Owner{Kind: engine.OwnerEnvIPv4, ID: env, EnvID: env}}); err != nil {
			t.Fatal(err)
		}
		earlier["env_ipv4/"+env] = r.Address
	}
	const workers, each = 24, 30
	type got struct {
		owner string
		addr  netip.Addr
		err   error
		exact bool
	}
	var mu sync.Mutex
	var all []got
	inWorkers(workers, each, func(w, i int) {
		var o engine.Owner
		var req engine.AllocateRequest
		switch {
		case w%4 == 3:
			env := fmt.Sprintf("w%d-%d", w, i)
			if i < 8 {
				env = fmt.Sprintf("e-%d", i) // holds one already
			}
			o = engine.Owner{Kind: engine.OwnerEnvIPv4, ID: env, EnvID: env, OrgID: "acme"}
		case w%3 == 0 && i < 8:
			o = node(fmt.Sprintf("n-%d", i)) // holds one already
		case w%3 == 0:
			o = node(fmt.Sprintf("w%d-%d", w, i))
		case w%3 == 1 && i%5 == 0:
			o = engine.Owner{Kind: engine.OwnerInstance, ID: fmt.Sprintf("w%d-%d", w, i), InstanceID: fmt.Sprintf("w%d-%d", w, i), NodeID: "nb"}
		default:
			o = instance(fmt.Sprintf("w%d-%d", w, i))
			o.NodeID = fmt.Sprintf("plain-%d", w)
		}
		req = engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: o}
		if o.Kind == engine.OwnerEnvIPv4 {
			req.Pool = engine.OperatorPool("c1", "v4")
		}
		if w == 2 && i%10 == 3 {
			// An exact claim of an instance address the counter is about to reach.
			var next netip.Prefix
			mu.Lock() // raw is one connection
			err := raw.QueryRow(ctx, `SELECT set_masklen(p.cidrs[1]::inet, 128) + (min(s.next_ordinal) + 40)
						FROM ipam_pools p JOIN ipam_pool_stripes s ON s.pool_id = p.id WHERE p.id = 'c1/instance' GROUP BY p.cidrs`).Scan(&next)
			mu.Unlock()
			if err != nil {
				t.Error(err)
			}
			req.Address = next.Addr()
		}
		r, err := st.Allocate(ctx, req)
		mu.Lock()
		all = append(all, got{o.Kind + "/" + o.ID, r.Address, err, req.Address.IsValid()})
		mu.Unlock()
	})
	seen := map[netip.Addr]string{}
	for _, g := range all {
		switch {
		case g.exact && errors.Is(g.err, engine.ErrAddressTaken):
			// the counter got there first
		case g.err != nil:
			t.Errorf("%s: %v", g.owner, g.err)
		case seen[g.addr] != "" && seen[g.addr] != g.owner:
			t.Errorf("%s handed to %s and to %s", g.addr, seen[g.addr], g.owner)
		default:
			seen[g.addr] = g.owner
		}
		if earlier[g.owner].IsValid() && g.addr != earlier[g.owner] {
			t.Errorf("%s held %s and was given %s", g.owner, earlier[g.owner], g.addr)
		}
	}
	var rows, txs, withEvent, inBlocks int
	if err := raw.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text),
			count(*) FILTER (WHERE EXISTS (SELECT 1 FROM ipam_events e WHERE e.allocation_id = a.id)),
			count(*) FILTER (WHERE pool_id LIKE 'c1/blocks/%')
		FROM ipam_allocations a WHERE cluster_id = 'c1' AND state = 'active'`).Scan(&rows, &txs, &withEvent, &inBlocks); err != nil {
		t.Fatal(err)
	}
	if rows != len(seen) || withEvent != rows {
		t.Errorf("%d active rows for %d owners served, %d with their event", rows, len(seen), withEvent)
	}
	if inBlocks == 0 {
		t.Error("no instance of node nb was served from its blocks")
	}
	t.Logf("%d rows written by %d transactions", rows, txs)
	// Whether the workers above shared statements depends on the machine's
	// timing; behind a lock, an instance and an IPv4 pool's callers do. The
	// instance callers gather in a cluster of their own: the exact claims
	// above left addresses ahead of c1's counter, and a batch that meets one
	// fails whole.
	const n = 20
	mkCluster(t, st, "c2", "2001:db8:1::/48", "", "")
	sharedOnce(t, raw, `SELECT 1 FROM ipam_pools WHERE id = 'c2/instance' FOR UPDATE`, n, func(i int) error {
		o := instance(gatherer(i))
		o.NodeID = "plain-g"
		_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c2"), Owner: o})
		return err
	}, func() int { return st.Gathered("c2/instance", engine.OwnerInstance, 0) })
	sharedOnce(t, raw, `SELECT 1 FROM ipam_pools WHERE id = 'c1/v4' FOR UPDATE`, n, func(i int) error {
		env := "v4-" + gatherer(i)
		_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"),
			Owner: engine.Owner{Kind: engine.OwnerEnvIPv4, ID: env, EnvID: env}})
		return err
	}, func() int { return st.Gathered("c1/v4", engine.OwnerEnvIPv4, 0) })
	for _, pool := range []string{"c2/instance", "c1/v4"} {
		var rows, txs int
		if err := raw.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM ipam_allocations
			WHERE pool_id = $1 AND state = 'active' AND owner_id LIKE '%gathered-%'`, pool).Scan(&rows, &txs); err != nil {
			t.Fatal(err)
		}
		if rows != n || txs != 1 {
			t.Errorf("%s: the %d callers gathered have %d rows in %d transactions, want one statement for all", pool, n, rows, txs)
		}
	}
	rep, err := engine.OperatorOf(st).Check(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Error(v.String())
	}
}

// A caller that gives up while it waits for a shared statement leaves it
// before it starts: its owner gets nothing, and the callers that went on
// waiting are served. Two allocations are held in flight by a transaction
// that holds the pool's row (the shape writer's lock, which every
// allocation shares), so that the next callers must wait.
func TestSharedStatementWaiterThatGivesUp(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM ipam_pools WHERE id = 'c1/node' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	alloc := func(ctx context.Context, id string) (netip.Addr, error) {
		a, err := st.AllocateNode(ctx, nil, engine.NodeRequest{ClusterID: "c1", NodeID: id})
		return a.Address, err
	}
	type res struct {
		addr netip.Addr
		err  error
	}
	results := make(map[string]chan res)
	start := func(ctx context.Context, id string) {
		ch := make(chan res, 1)
		results[id] = ch
		go func() {
			a, err := alloc(ctx, id)
			ch <- res{a, err}
		}()
	}
	start(ctx, "running-1")
	start(ctx, "running-2")
	mon, err := pgx.Connect(ctx, raw.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close(ctx)
	waitForLockWaiters(ctx, t, mon, 2)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start(short, "gives-up")
	start(ctx, "waits")
	if r := <-results["gives-up"]; r.err == nil {
		t.Fatalf("the caller whose context ended got %s", r.addr)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"running-1", "running-2", "waits"} {
		if r := <-results[id]; r.err != nil || !r.addr.IsValid() {
			t.Errorf("%s: %v %v", id, r.addr, r.err)
		}
	}
	var n int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'gives-up'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the caller that gave up has %d allocations (%v), want none", n, err)
	}
}

// Owners allocated at once get consecutive addresses from the start of the
// pool, through the shared statement too. Two allocations are held in flight
// (as in TestSharedStatementWaiterThatGivesUp) and n more gather behind them;
// once the pool's row is let go, the two take ::1 and ::2 and one statement
// serves the n (their rows share one transaction) with ::3 to ::n+2. With
// 62 owners, more than the pool's 32 stripes, the two in flight give up
// first, so that the statement is alone: it takes every stripe, most of them
// twice, and hands out the 62 addresses after theirs (if they were served
// before they went; a statement interrupted mid-flight may commit).
func TestSharedStatementHandsOutConsecutiveAddresses(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	ctx := context.Background()
	mon, err := pgx.Connect(ctx, raw.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close(ctx)
	for _, tc := range []struct {
		n      int
		giveUp bool // the two in flight give up before the pool's row is let go
	}{{3, false}, {20, false}, {30, false}, {62, true}} {
		n := tc.n
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			cl := fmt.Sprintf("c%d", n)
			mkCluster(t, st, cl, fmt.Sprintf("2001:db8:%x::/48", n), "", "")
			tx, err := raw.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, `SELECT 1 FROM ipam_pools WHERE id = $1 FOR UPDATE`, cl+"/node"); err != nil {
				t.Fatal(err)
			}
			type res struct {
				id   string
				addr netip.Addr
				err  error
			}
			results := make(chan res, n+2)
			start := func(ctx context.Context, id string) {
				go func() {
					a, err := st.AllocateNode(ctx, nil, engine.NodeRequest{ClusterID: cl, NodeID: id})
					results <- res{id, a.Address, err}
				}()
			}
			inFlight, giveUp := context.WithCancel(ctx)
			defer giveUp()
			start(inFlight, "running-1")
			start(inFlight, "running-2")
			waitForLockWaiters(ctx, t, mon, 2)
			for i := range n {
				start(ctx, fmt.Sprintf("n%02d", i))
			}
			for deadline := time.Now().Add(hangBound); st.Gathered(cl+"/node", engine.OwnerNode, 0) != n; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d callers gathered, want %d", st.Gathered(cl+"/node", engine.OwnerNode, 0), n)
				}
			}
			want := n + 2
			if tc.giveUp {
				giveUp()
				for range 2 {
					if r := <-results; r.err == nil {
						t.Fatalf("%s gave up and got %s", r.id, r.addr)
					}
				}
				want = n
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			got := map[netip.Addr]string{}
			for range want {
				r := <-results
				if r.err != nil {
					t.Fatalf("%s: %v", r.id, r.err)
				}
				got[r.addr] = r.id
			}
			// What the pool handed out: ordinals 1 to the count, whether or
			// not the two that gave up were served before they went.
			var count, lowest, highest int
			if err := raw.QueryRow(ctx, `SELECT count(*), min(ordinal), max(ordinal) FROM ipam_allocations
				WHERE pool_id = $1 AND state = 'active'`, cl+"/node").Scan(&count, &lowest, &highest); err != nil {
				t.Fatal(err)
			}
			if count < want || lowest != 1 || highest != count {
				t.Errorf("%d owners hold ordinals %d to %d, want 1 to %d; the callers got %v", count, lowest, highest, count, got)
			}
			for i := 1; i <= count-want; i++ {
				delete(got, netip.MustParseAddr(fmt.Sprintf("2001:db8:%x::%x", n, i))) // the two that gave up
			}
			for i := count - want + 1; i <= count; i++ {
				if a := netip.MustParseAddr(fmt.Sprintf("2001:db8:%x::%x", n, i)); got[a] == "" {
					t.Errorf("%s is not handed out; the %d callers got %v", a, want, got)
				}
			}
			var rows, txs, events int
			if err := raw.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text),
					count(*) FILTER (WHERE EXISTS (SELECT 1 FROM ipam_events e WHERE e.allocation_id = a.id))
				FROM ipam_allocations a WHERE cluster_id = $1 AND owner_id LIKE 'n%'`, cl).Scan(&rows, &txs, &events); err != nil {
				t.Fatal(err)
			}
			if rows != n || txs != 1 || events != n {
				t.Errorf("the %d gathered owners have %d rows in %d transactions, %d with their event: want one statement for all", n, rows, txs, events)
			}
		})
	}
}

// waitForLockWaiters waits (hangBound at most) until want sessions of the test's
// database wait for a lock: the allocations that hold the pool's statements
// running, so that the next callers gather into a shared one.
func waitForLockWaiters(ctx context.Context, t *testing.T, mon *pgx.Conn, want int) {
	t.Helper()
	for deadline := time.Now().Add(hangBound); lockWaiters(ctx, t, mon) != want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d allocations wait for the pool's row, want %d", lockWaiters(ctx, t, mon), want)
		}
	}
}

// lockWaiters is how many sessions of the test's database wait for a lock.
func lockWaiters(ctx context.Context, t *testing.T, mon *pgx.Conn) int {
	t.Helper()
	var waiting int
	if err := mon.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	return waiting
}

// A shared statement whose commit fails acknowledges nothing: its rows come
// back before the commit (at the batch's end), and a commit that fails (here
// a deferred constraint trigger; in production a connection lost to a crash
// or a failover) voids them. Each caller then goes on alone, and fails as
// the commit does. Before, the rows read were handed to their callers as
// allocations, and a failover lost them (found by TestFaultFailoverToStandby).
// The confirms of plan-time holds that share a commit, and plan-time holds
// that share a statement, behave the same.
func TestSharedStatementWhoseCommitFailsAcknowledgesNothing(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := raw.Exec(ctx, `
		CREATE FUNCTION doom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'doomed at commit' USING ERRCODE = 'check_violation'; END $$;
		CREATE CONSTRAINT TRIGGER doom AFTER INSERT OR UPDATE ON ipam_allocations
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
			WHEN ((NEW.owner_id LIKE 'doomed-%' AND NEW.state = 'active')
				OR (NEW.owner_id LIKE 'doomhold-%' AND NEW.state = 'reserved')) EXECUTE FUNCTION doom()`); err != nil {
		t.Fatal(err)
	}
	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node(fmt.Sprintf("doomed-%d", i))})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Errorf("doomed-%d: allocated, though every commit of it fails", i)
		}
	}
	var active int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE owner_id LIKE 'doomed-%'`).Scan(&active); err != nil || active != 0 {
		t.Fatalf("%d rows of the doomed owners (%v), want none", active, err)
	}
	// The same for the confirms of plan-time holds, which share a commit:
	// the holds are taken (the trigger dooms only active rows), and their
	// concurrent applies all fail.
	holds := make([]netip.Addr, n)
	for i := range n {
		h, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node(fmt.Sprintf("doomed-h%d", i))}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		holds[i] = h.Address
	}
	inWorkers(n, 1, func(i, _ int) {
		_, errs[i] = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node(fmt.Sprintf("doomed-h%d", i)), Address: holds[i]})
	})
	for i, err := range errs {
		if err == nil {
			t.Errorf("doomed-h%d: its hold confirmed, though every commit of it fails", i)
		}
	}
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE owner_id LIKE 'doomed-%' AND state = 'active'`).Scan(&active); err != nil || active != 0 {
		t.Fatalf("%d active rows of the doomed owners (%v), want none", active, err)
	}
	// The same for plan-time holds that share a statement, made certain:
	// two holds wait for the pool's row and n gather behind them, so that
	// one statement takes the n together; every commit fails (the trigger
	// dooms these owners' held rows), and no caller is told of a hold.
	sharedOnce(t, raw, `SELECT 1 FROM ipam_pools WHERE id = 'c1/node' FOR UPDATE`, n, func(i int) error {
		h, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("doomhold-" + gatherer(i))}, time.Hour)
		if err == nil {
			return fmt.Errorf("told of its hold of %s, though every commit of it fails", h.Address)
		}
		return nil
	}, func() int { return st.Gathered("c1/node", engine.OwnerNode, time.Hour) })
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE owner_id LIKE 'doomhold-%'`).Scan(&active); err != nil || active != 0 {
		t.Fatalf("%d rows of the doomed holds (%v), want none", active, err)
	}
}

// Concurrent plan-time holds of one client share statements too, each with
// its first look: a plan of many new addresses. Every owner gets a hold, no
// address is held for two owners, owners that held already keep their
// address, and planning everything again (Terraform's re-plan at apply)
// finds each hold unchanged and writes nothing. Applying the holds at once
// (an apply's concurrent creates) then allocates each owner its planned
// address. Behind a lock (sharedOnce), holds gathered are written by one
// statement (one transaction id) and their confirms by one commit.
func TestConcurrentHoldsShareStatements(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/22")}}); err != nil {
		t.Fatal(err)
	}
	reqOf := func(w, i int) engine.AllocateRequest {
		switch {
		case i < 4:
			return engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: node(fmt.Sprintf("n-%d", i))} // held already
		case w%4 == 3:
			env := fmt.Sprintf("w%d-%d", w, i)
			return engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"),
				Owner: engine.Owner{Kind: engine.OwnerEnvIPv4, ID: env, EnvID: env}}
		case w%3 == 0:
			return engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: node(fmt.Sprintf("w%d-%d", w, i))}
		}
		return engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: instance(fmt.Sprintf("w%d-%d", w, i))}
	}
	earlier := map[string]netip.Addr{}
	for i := range 4 {
		h, err := st.Reserve(ctx, reqOf(0, i), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		earlier["node/"+fmt.Sprintf("n-%d", i)] = h.Address
	}
	const workers, each = 16, 20
	plan := func() map[string]netip.Addr {
		var mu sync.Mutex
		held := map[string]netip.Addr{}
		inWorkers(workers, each, func(w, i int) {
			req := reqOf(w, i)
			h, err := st.Reserve(ctx, req, time.Hour)
			key := req.Owner.Kind + "/" + req.Owner.ID
			mu.Lock()
			switch {
			case err != nil:
				t.Errorf("%s: %v", key, err)
			case held[key].IsValid() && held[key] != h.Address:
				t.Errorf("%s held %s and %s", key, held[key], h.Address)
			default:
				held[key] = h.Address
			}
			mu.Unlock()
		})
		return held
	}
	held := plan()
	seen := map[netip.Addr]string{}
	for owner, a := range held {
		if seen[a] != "" {
			t.Errorf("%s held for %s and for %s", a, seen[a], owner)
		}
		seen[a] = owner
		if earlier[owner].IsValid() && a != earlier[owner] {
			t.Errorf("%s held %s and was given %s", owner, earlier[owner], a)
		}
	}
	snapshot := func() (rows, txs, events int, xmins string) {
		t.Helper()
		if err := raw.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text),
				(SELECT count(*) FROM ipam_events WHERE cluster_id = 'c1' AND type = 'allocation.reserved'),
				string_agg(id::text || xmin::text, ',' ORDER BY id)
			FROM ipam_allocations WHERE cluster_id = 'c1' AND state = 'reserved'`).Scan(&rows, &txs, &events, &xmins); err != nil {
			t.Fatal(err)
		}
		return
	}
	rows, txs, events, before := snapshot()
	if rows != len(held) || events != rows {
		t.Errorf("%d holds for %d owners, %d hold events", rows, len(held), events)
	}
	t.Logf("%d holds written by %d transactions", rows, txs)
	again := plan()
	for owner, a := range held {
		if again[owner] != a {
			t.Errorf("%s: held %s, planned again %s", owner, a, again[owner])
		}
	}
	if _, _, _, after := snapshot(); after != before {
		t.Error("planning again wrote the holds")
	}
	inWorkers(workers, each, func(w, i int) {
		req := reqOf(w, i)
		owner := req.Owner.Kind + "/" + req.Owner.ID
		if req.Address = held[owner]; i < 4 && w > 0 {
			return // planned by every worker, applied once
		}
		if r, err := st.Allocate(ctx, req); err != nil || r.Address != req.Address {
			t.Errorf("%s: applying its hold of %s: %s, %v", owner, req.Address, r.Address, err)
		}
	})
	var active, activations int
	if err := raw.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM ipam_allocations
		WHERE cluster_id = 'c1' AND state = 'active'`).Scan(&active, &activations); err != nil {
		t.Fatal(err)
	}
	if active != len(held) {
		t.Errorf("%d active allocations for %d holds applied", active, len(held))
	}
	t.Logf("%d holds confirmed by %d transactions", active, activations)
	// Whether the workers above shared statements depends on the machine's
	// timing; behind a lock, holds and their confirms do.
	const n = 20
	oneStatement := func(state, event string) {
		t.Helper()
		var rows, txs, events int
		if err := raw.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text),
				count(*) FILTER (WHERE EXISTS (SELECT 1 FROM ipam_events e WHERE e.allocation_id = a.id AND e.type = $2))
			FROM ipam_allocations a WHERE cluster_id = 'c1' AND owner_id LIKE 'gathered-%' AND state = $1`,
			state, event).Scan(&rows, &txs, &events); err != nil {
			t.Fatal(err)
		}
		if rows != n || txs != 1 || events != n {
			t.Errorf("the %d callers gathered have %d %s rows in %d transactions, %d with their %s event: want one statement for all",
				n, rows, state, txs, events, event)
		}
	}
	var gmu sync.Mutex
	gated := map[string]netip.Addr{}
	sharedOnce(t, raw, `SELECT 1 FROM ipam_pools WHERE id = 'c1/node' FOR UPDATE`, n, func(i int) error {
		h, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: node(gatherer(i))}, time.Hour)
		gmu.Lock()
		gated[gatherer(i)] = h.Address
		gmu.Unlock()
		return err
	}, func() int { return st.Gathered("c1/node", engine.OwnerNode, time.Hour) })
	oneStatement("reserved", "allocation.reserved")
	sharedOnce(t, raw, `SELECT 1 FROM ipam_allocations WHERE cluster_id = 'c1' AND owner_id LIKE 'running-%' FOR UPDATE`, n, func(i int) error {
		req := engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: node(gatherer(i)), Address: gated[gatherer(i)]}
		r, err := st.Allocate(ctx, req)
		if err == nil && r.Address != req.Address {
			err = fmt.Errorf("held %s, allocated %s", req.Address, r.Address)
		}
		return err
	}, func() int { return st.GatheredConfirms("c1") })
	oneStatement("active", "node.enrolled")
	rep, err := engine.OperatorOf(st).Check(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Error(v.String())
	}
}

// sharedOnce makes one statement serve n callers of a queue: a transaction
// of its own takes lock (rows that every statement of the queue writes or
// locks), the queue's two statements in flight (call(0), call(1), owners
// gatherer(0) and gatherer(1): "running-0", "running-1") wait for it, and
// call(2) to call(n+1) ("gathered-0" on) gather behind them until
// gathered() says n. Then the lock goes, and sharedOnce returns when every
// call has ended, each of whose errors fails the test.
func sharedOnce(t *testing.T, raw *pgx.Conn, lock string, n int, call func(i int) error, gathered func() int) {
	t.Helper()
	ctx := context.Background()
	mon, err := pgx.Connect(ctx, raw.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close(ctx)
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, lock); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, n+2)
	for i := range n + 2 {
		go func() {
			if err := call(i); err != nil {
				errs <- fmt.Errorf("%s: %w", gatherer(i), err)
				return
			}
			errs <- nil
		}()
		if i == 1 {
			waitForLockWaiters(ctx, t, mon, 2)
		}
	}
	for deadline := time.Now().Add(hangBound); gathered() != n; time.Sleep(5 * time.Millisecond) {
		if waiting := lockWaiters(ctx, t, mon); waiting > 2 || time.Now().After(deadline) {
			t.Fatalf("%d callers gathered and %d statements wait for the lock, want %d and 2", gathered(), lockWaiters(ctx, t, mon), n)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range n + 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// gatherer names sharedOnce's call(i)'s owner.
func gatherer(i int) string {
	if i < 2 {
		return fmt.Sprintf("running-%d", i)
	}
	return fmt.Sprintf("gathered-%d", i-2)
}

// inWorkers runs f(w, i) for i in [0, each) in each of workers goroutines
// (w the goroutine's number), and returns when all have ended.
func inWorkers(workers, each int, f func(w, i int)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				f(w, i)
			}
		}()
	}
	wg.Wait()
}
