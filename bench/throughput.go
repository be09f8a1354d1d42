package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// cell is one timed measurement: ops completed in dur by n clients.
type cell struct {
	label      string
	clients    int
	ops        int
	dur        time.Duration
	lat        []time.Duration
	cpu0, cpu1 cpuTimes
	wal        int64
	ws         writeSet      // what the measurement wrote, from the WAL (writeSet)
	extCPU     time.Duration // CPU of an external client process (pgbench)
	err        error
}

func (c cell) rate() float64 {
	if c.dur <= 0 {
		return 0
	}
	return float64(c.ops) / c.dur.Seconds()
}

// perOp returns server and client CPU per operation, and WAL bytes per op.
func (c cell) perOp() (server, client time.Duration, wal int64, ok bool) {
	if c.ops == 0 || !c.cpu0.ok || !c.cpu1.ok {
		return 0, 0, 0, false
	}
	server = (c.cpu1.server - c.cpu0.server) / time.Duration(c.ops)
	client = (c.cpu1.client - c.cpu0.client) / time.Duration(c.ops)
	if c.extCPU > 0 {
		client = c.extCPU / time.Duration(c.ops)
	}
	return server, client, c.wal / int64(c.ops), true
}

// writeSet reads back what was written since lsn0 (an insert position),
// right after a measurement: before the next checkpoint lets the server
// recycle that WAL. Not ok (n/a in the tables) when the WAL cannot be read.
func (r *runner) writeSet(ctx context.Context, lsn0 string) writeSet {
	ws, err := r.srv.walWriteSet(ctx, lsn0, r.srv.insertLSN(ctx))
	if err != nil {
		if r.writeSetErr == nil {
			r.writeSetErr = err
			r.rep.warn("index entries per operation: n/a (the WAL could not be read back): %v", err)
		}
		return writeSet{}
	}
	return ws
}

// perOpWrites formats a write set per operation: index entries, and the
// heap row versions (inserted, updated with index entries, HOT).
func (c cell) perOpWrites() (entries, rows string) {
	if !c.ws.ok || c.ops == 0 {
		return "n/a", "n/a"
	}
	n := float64(c.ops)
	return fmt.Sprintf("%.2f", float64(c.ws.indexEntries)/n),
		fmt.Sprintf("%.2f ins + %.2f upd + %.2f HOT", float64(c.ws.heapInserts)/n, float64(c.ws.heapUpdates)/n, float64(c.ws.heapHOT)/n)
}

// opFunc performs one operation of worker w (its i-th).
type opFunc func(ctx context.Context, w, i int) error

// timed runs n workers: each does warm operations, then all start together
// and run op until dur has passed. Only the timed operations count.
func (r *runner) timed(ctx context.Context, label string, n, warm int, dur time.Duration, op opFunc) cell {
	c := cell{label: label, clients: n}
	var wg sync.WaitGroup
	ready := make(chan struct{})
	var warmed sync.WaitGroup
	var firstErr atomic.Value
	lats := make([][]time.Duration, n)
	counts := make([]int, n)
	var deadline time.Time
	warmed.Add(n)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			i := 0
			for ; i < warm; i++ {
				if err := op(ctx, w, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					break
				}
			}
			warmed.Done()
			<-ready
			if firstErr.Load() != nil {
				return
			}
			for ; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				if err := op(ctx, w, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
				counts[w]++
			}
		}(w)
	}
	warmed.Wait()
	if r.profile != nil {
		if err := pprof.StartCPUProfile(r.profile); err == nil {
			defer pprof.StopCPUProfile()
		}
	}
	wal0, lsn0 := r.srv.walLSN(ctx), r.srv.insertLSN(ctx)
	c.cpu0 = r.srv.cpuStart()
	start := time.Now()
	deadline = start.Add(dur)
	close(ready)
	wg.Wait()
	c.dur = time.Since(start)
	c.cpu1 = r.srv.cpuEnd()
	c.wal = r.srv.walLSN(ctx) - wal0
	c.ws = r.writeSet(ctx, lsn0)
	for w := range lats {
		c.ops += counts[w]
		c.lat = append(c.lat, lats[w]...)
	}
	if e, ok := firstErr.Load().(error); ok {
		c.err = e
	}
	return c
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)) * p)
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

var clusterSeq atomic.Int64

// newCluster creates a cluster with a prefix of its own.
func newCluster(ctx context.Context, st *ipam.Client, prefix string) (ipam.Cluster, error) {
	n := clusterSeq.Add(1)
	id := fmt.Sprintf("%s%d", prefix, n)
	p := netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/48", 0x100+n))
	return st.CreateCluster(ctx, ipam.Cluster{ID: id, Prefix: p,
		NodeCooldown: ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown})
}

func instanceOwner(id string) ipam.Owner {
	return ipam.Owner{Kind: ipam.OwnerInstance, ID: id, InstanceID: id, OrgID: "acme", EnvID: "prod"}
}

// The allocator kinds measured for throughput, and their targets at 16
// clients (a ratio to pgbench's INSERT).
var (
	allocKinds        = []string{"node", "instance", "ipv4"}
	throughputTargets = map[string]float64{"node addresses": 0.5, "instance addresses": 0.5, "ipv4 addresses": 0.35}
)

// allocCell measures the public API's allocation of one kind with n clients, on a fresh
// cluster (and, for ipv4, a fresh IPv4 table pool).
func (r *runner) allocCell(ctx context.Context, dbURL, kind string, n int) cell {
	label := kind + " addresses"
	setup, err := ipam.Open(ctx, ipam.Config{DatabaseURL: dbURL, MaxConnections: 1, Actor: "bench"})
	if err != nil {
		return cell{label: label, clients: n, err: err}
	}
	cl, err := newCluster(ctx, setup, "tp")
	var poolID string
	switch {
	case err != nil:
	case kind == "node":
		poolID = ipam.NodePool(cl.ID).ID()
	case kind == "instance":
		poolID = ipam.InstancePool(cl.ID).ID()
	default:
		var p ipam.Pool
		p, err = setup.CreatePool(ctx, ipam.Pool{ClusterID: cl.ID, Name: "v4", Cooldown: time.Hour,
			CIDRs: []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr("10.0.0.0"), r.sz.IPv4Block)}})
		poolID = p.ID
		if err == nil {
			// What autovacuum would do after a bulk insert of the free rows.
			_, err = r.execDB(ctx, dbURL, "VACUUM ANALYZE ipam_allocations")
		}
	}
	setup.Close()
	if err != nil {
		return cell{label: label, clients: n, err: err}
	}
	// The calls the platform makes through the public API, which reach the
	// core's one entry point the Terraform resources call (Client.Allocate;
	// an instance's pool is resolved there).
	client, err := ipam.Open(ctx, ipam.Config{DatabaseURL: dbURL, MaxConnections: int32(n), Actor: "bench"})
	if err != nil {
		return cell{label: label, clients: n, err: err}
	}
	defer client.Close()
	r.srv.checkpoint(ctx)
	return r.timed(ctx, label, n, 5, r.sz.CellDuration, func(ctx context.Context, w, i int) error {
		id := fmt.Sprintf("w%d-%d", w, i)
		var err error
		switch kind {
		case "node":
			_, err = client.AllocateNode(ctx, nil, ipam.NodeRequest{ClusterID: cl.ID, NodeID: id})
		case "instance":
			_, err = client.AllocateInstance(ctx, nil, ipam.InstanceRequest{ClusterID: cl.ID, InstanceID: id,
				OrgID: "acme", EnvID: "prod", NodeID: "node-" + strconv.Itoa(w)})
		default:
			_, err = client.AllocateEnvIPv4(ctx, nil, ipam.EnvIPv4Request{ClusterID: cl.ID, Pool: strings.TrimPrefix(poolID, cl.ID+"/"),
				OrgID: "acme", EnvID: id})
		}
		return err
	})
}

func (r *runner) execDB(ctx context.Context, dbURL, sql string, args ...any) (int64, error) {
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer c.Close(context.Background())
	tag, err := c.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

// pgbenchScript is the reference transaction: one single-row INSERT, one
// durable commit (pgbench -n -f).
const pgbenchScript = "INSERT INTO bench_insert (client, note) VALUES (:client_id, 'pgbench reference row');\n"

const pgbenchTable = `CREATE TABLE IF NOT EXISTS bench_insert (
	id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	client integer NOT NULL,
	note text NOT NULL,
	at timestamptz NOT NULL DEFAULT now())`

var tpsRe = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
var txRe = regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`)

// pgbenchArgs is the pgbench command line (without the database URL).
func (r *runner) pgbenchArgs(script string, n int) []string {
	return r.pgbenchArgsFor(script, n, r.sz.PgbenchSeconds)
}

func (r *runner) pgbenchArgsFor(script string, n, seconds int) []string {
	return []string{"-n", "-f", script, "-c", strconv.Itoa(n), "-j", strconv.Itoa(min(n, 2)), "-T", strconv.Itoa(seconds)}
}

// pgbenchCell runs the reference for PgbenchSeconds. A run that processed
// no transaction at all (its clients' connections took the whole of a short
// run on a busy machine: the smoke mode's one second) runs again for twice
// as long, up to four times PgbenchSeconds.
func (r *runner) pgbenchCell(ctx context.Context, dbURL, script string, n int) cell {
	for secs := r.sz.PgbenchSeconds; ; secs *= 2 {
		c := r.pgbenchRun(ctx, dbURL, script, n, secs)
		switch {
		case c.err != nil || c.ops > 0:
			return c
		case secs >= 4*r.sz.PgbenchSeconds:
			c.err = fmt.Errorf("pgbench processed no transaction in %d s", secs)
			return c
		}
	}
}

func (r *runner) pgbenchRun(ctx context.Context, dbURL, script string, n, seconds int) cell {
	c := cell{label: "pgbench INSERT", clients: n}
	pb := r.pgbenchPath()
	if pb == "" {
		c.err = errors.New("pgbench not found")
		return c
	}
	r.srv.checkpoint(ctx)
	cmd := exec.CommandContext(ctx, pb, append(r.pgbenchArgsFor(script, n, seconds), dbURL)...)
	wal0, lsn0 := r.srv.walLSN(ctx), r.srv.insertLSN(ctx)
	c.cpu0 = r.srv.cpuStart()
	out, err := cmd.CombinedOutput()
	c.cpu1 = r.srv.cpuEnd()
	c.wal = r.srv.walLSN(ctx) - wal0
	c.ws = r.writeSet(ctx, lsn0)
	if err != nil {
		c.err = fmt.Errorf("pgbench: %v: %s", err, lastLines(string(out), 5))
		return c
	}
	m, m2 := tpsRe.FindStringSubmatch(string(out)), txRe.FindStringSubmatch(string(out))
	if m2 != nil && m2[1] == "0" {
		return c // no transaction: no rate (pgbenchCell runs it again)
	}
	if m == nil || m2 == nil {
		c.err = fmt.Errorf("pgbench output not understood: %s", lastLines(string(out), 5))
		return c
	}
	tps, _ := strconv.ParseFloat(m[1], 64)
	c.ops, _ = strconv.Atoi(m2[1])
	if tps > 0 {
		c.dur = time.Duration(float64(c.ops) / tps * float64(time.Second))
	}
	if cmd.ProcessState != nil {
		c.extCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		// The client CPU of this process is not pgbench's.
		c.cpu1.client = c.cpu0.client
	}
	return c
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// throughput is section 1.
func (r *runner) throughput(ctx context.Context) error {
	dbURL, err := r.createDB(ctx, "throughput")
	if err != nil {
		return err
	}
	for _, table := range []string{pgbenchTable, placementTable} {
		if _, err := r.execDB(ctx, dbURL, table); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "ipambench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "insert.sql")
	if err := os.WriteFile(script, []byte(pgbenchScript), 0o644); err != nil {
		return err
	}
	r.rep.Commands = append(r.rep.Commands,
		"pgbench script (insert.sql): "+strings.TrimSpace(pgbenchScript),
		"pgbench table: "+strings.Join(strings.Fields(pgbenchTable), " "))
	for _, n := range r.sz.Clients {
		r.rep.Commands = append(r.rep.Commands, "pgbench "+strings.Join(r.pgbenchArgs("insert.sql", n), " ")+" $DATABASE_URL")
	}

	rounds := max(1, r.sz.Rounds)
	labels := []string{}
	for _, k := range allocKinds {
		labels = append(labels, k+" addresses")
	}
	for _, v := range variants {
		labels = append(labels, v.name)
	}
	var where []string
	where = append(where, "| clients | what | ops/s | p50 | p99 | server CPU/op | client CPU/op | total CPU/op | WAL/op | index entries/op | heap row versions/op |",
		"|---|---|---|---|---|---|---|---|---|---|---|")
	for _, n := range r.sz.Clients {
		// refs[i] and refs[i+1] bracket round i.
		var refs []cell
		cells := map[string][]cell{}
		r.logf("throughput: %d clients: pgbench", n)
		refs = append(refs, r.pgbenchCell(ctx, dbURL, script, n))
		for round := 0; round < rounds; round++ {
			// The kinds take turns to go first, so that none always runs
			// right after pgbench (or always last, on the most rows).
			for j := range allocKinds {
				k := allocKinds[(j+round)%len(allocKinds)]
				r.logf("throughput: %d clients, round %d: %s", n, round+1, k)
				c := r.allocCell(ctx, dbURL, k, n)
				cells[c.label] = append(cells[c.label], c)
			}
			for _, mode := range []placementMode{placeRowOnly, placeIPAM, placeWrites} {
				r.logf("throughput: %d clients, round %d: %s", n, round+1, mode.label())
				c := r.placementCell(ctx, dbURL, mode, n)
				cells[c.label] = append(cells[c.label], c)
			}
			for _, v := range variants {
				r.logf("throughput: %d clients, round %d: %s", n, round+1, v.name)
				c := r.variantCell(ctx, dbURL, v, n)
				cells[c.label] = append(cells[c.label], c)
			}
			r.logf("throughput: %d clients: pgbench", n)
			refs = append(refs, r.pgbenchCell(ctx, dbURL, script, n))
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		refOK := true
		for _, c := range refs {
			if c.err != nil {
				r.rep.fail("pgbench, %d clients: %v", n, c.err)
				refOK = false
			}
		}
		var refRates []float64
		for _, c := range refs {
			refRates = append(refRates, c.rate())
		}
		refText := "pgbench INSERT: n/a"
		if refOK {
			refText = fmt.Sprintf("pgbench INSERT %s tx/s", num(medianF(refRates)))
			where = append(where, cpuLine(merge(refs)))
		}
		for _, label := range labels {
			cs := cells[label]
			name := fmt.Sprintf("%s, %d client%s", label, n, plural(n))
			row := Row{Section: "1 throughput", Name: name, Reference: refText, Status: "info"}
			if strings.HasPrefix(label, "experiment") {
				row.Section = "1 throughput (experiment)"
			}
			var rates, ratios []float64
			failed := false
			for i, c := range cs {
				if c.err != nil {
					r.rep.fail("throughput %s, round %d: %v", name, i+1, c.err)
					failed = true
					continue
				}
				rates = append(rates, c.rate())
				if refOK {
					ratios = append(ratios, c.rate()/((refs[i].rate()+refs[i+1].rate())/2))
				}
			}
			if failed {
				row.Value, row.Status = "error", "FAIL"
				r.rep.add(row)
				continue
			}
			row.Value = num(medianF(rates)) + " alloc/s"
			where = append(where, cpuLine(merge(cs)))
			if refOK {
				ratio := medianF(ratios)
				row.Ratio = fmt.Sprintf("%.2f", ratio)
				// The targets at 16 clients: node and instance addresses at
				// least half of pgbench's INSERT, IPv4 add-ons 0.35.
				if want, ok := throughputTargets[label]; ok && n == 16 {
					row.Target = fmt.Sprintf(">= %.2f", want)
					row.Status = metOr(ratio >= want)
				}
			}
			r.rep.add(row)
		}
		where = append(where, r.placementRows(n, cells)...)
		if n == r.sz.Clients[len(r.sz.Clients)-1] {
			if lines := r.indexBreakdown(ctx, dbURL, n, cells); len(lines) > 0 {
				r.rep.note(fmt.Sprintf("Throughput: index entries per operation by index, %d clients (from the WAL, as above; "+
					"the throughput database's indexes only, all rounds together)", n), lines)
			}
		}
	}
	r.rep.note("Throughput: where the time goes (CPU per operation from /proc: the PostgreSQL server's processes vs the client process; "+
		"WAL bytes per operation from pg_current_wal_lsn; index entries and heap row versions per operation counted in the WAL records "+
		"the measurement wrote (pg_walinspect: B-tree leaf inserts and leaf splits, other index kinds' inserts; heap inserts, "+
		"updates with new index entries, HOT updates), every database of the server; all rounds together)", where)
	var pages, live, dead, hot, upd int64
	c, err := pgx.Connect(ctx, dbURL)
	if err == nil {
		_, _ = c.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
		if c.QueryRow(ctx, `SELECT pg_relation_size('ipam_pool_stripes') / current_setting('block_size')::bigint,
				n_live_tup, n_dead_tup, n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'ipam_pool_stripes'`).Scan(&pages, &live, &dead, &hot, &upd) == nil {
			r.rep.note("Throughput: the stripes table after the runs", []string{fmt.Sprintf(
				"ipam_pool_stripes: %d pages for %d live rows (%d dead); %d updates, %d of them HOT. Every fresh allocation updates its stripe's "+
					"next_ordinal and active count, which no index of the table names, so the update can be HOT (no new index entry) while the "+
					"row's page has room; the updates that were not HOT found it full.", pages, live, dead, upd, hot)})
		}
		c.Close(ctx)
	}
	for _, kind := range []string{"instance", "ipv4"} {
		if err := r.sustained(ctx, dbURL, kind, r.sz.Clients[len(r.sz.Clients)-1]); err != nil {
			r.rep.warn("sustained load on one pool (%s addresses): %v", kind, err)
		}
	}
	if err := r.decompose(ctx, dbURL); err != nil {
		r.rep.warn("cost decomposition: %v", err)
	}
	if err := r.profileClient(ctx, dbURL, r.sz.Clients[len(r.sz.Clients)-1]); err != nil {
		r.rep.warn("client CPU profile: %v", err)
	}
	return r.roundTrips(ctx, dbURL)
}

// indexBreakdown lists, for each measurement of n clients, the index
// entries it wrote per operation in each index of the database at dbURL.
func (r *runner) indexBreakdown(ctx context.Context, dbURL string, n int, cells map[string][]cell) []string {
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT d.oid::text || '/' || c.relfilenode::text, c.relname
		FROM pg_class c, pg_database d WHERE d.datname = current_database() AND c.relkind = 'i' AND c.relfilenode <> 0`)
	if err != nil {
		return nil
	}
	names := map[string]string{}
	for rows.Next() {
		var k, v string
		if rows.Scan(&k, &v) == nil {
			names[k] = v
		}
	}
	rows.Close()
	labels := make([]string, 0, len(cells))
	for l := range cells {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	lines := []string{"| clients | what | index entries/op, by index |", "|---|---|---|"}
	for _, l := range labels {
		m := merge(cells[l])
		if !m.ws.ok || m.ops == 0 {
			continue
		}
		type kv struct {
			name string
			n    int64
		}
		var per []kv
		for rel, k := range m.ws.byRel {
			if name, ok := names[rel]; ok {
				per = append(per, kv{name, k})
			}
		}
		sort.Slice(per, func(i, j int) bool { return per[i].n > per[j].n || (per[i].n == per[j].n && per[i].name < per[j].name) })
		var parts []string
		for _, p := range per {
			if f := float64(p.n) / float64(m.ops); f >= 0.01 {
				parts = append(parts, fmt.Sprintf("%s %.2f", p.name, f))
			}
		}
		lines = append(lines, fmt.Sprintf("| %d | %s | %s |", n, l, strings.Join(parts, ", ")))
	}
	return lines
}

// decompose measures the placement's writes built up one piece at a time,
// each in the placement transaction (BEGIN; the scheduler's own row; the
// writes; COMMIT) at one client and at the most clients, the steps taking
// turns round by round: from the scheduler's row alone, through the leanest
// allocation row the product could write, to the allocation's writes alone
// (placementWritesLabel). Each step's ratio to the scheduler's row alone in
// the same round is what the writes leave of the transaction: the floor
// under the placement's targets, and what each guarantee costs of it.
func (r *runner) decompose(ctx context.Context, dbURL string) error {
	vp, err := r.variantSetup(ctx, dbURL)
	if err != nil {
		return err
	}
	if _, err := r.execDB(ctx, dbURL, placementTable+`;
		CREATE TABLE IF NOT EXISTS bench_alloc_floor (LIKE ipam_allocations INCLUDING DEFAULTS);
		CREATE UNIQUE INDEX IF NOT EXISTS bench_alloc_floor_id ON bench_alloc_floor (id);
		CREATE UNIQUE INDEX IF NOT EXISTS bench_alloc_floor_address ON bench_alloc_floor (cluster_id, address);
		CREATE UNIQUE INDEX IF NOT EXISTS bench_alloc_floor_owner ON bench_alloc_floor (cluster_id, owner_kind, owner_id)
			WHERE state IN ('active', 'reserved');
		CREATE SEQUENCE IF NOT EXISTS bench_floor_ordinal START 1099511627776`); err != nil {
		return err
	}
	seqRow := floorSQL("bench_alloc_floor", false, false)
	steps := []struct {
		name string
		op   func(ctx context.Context, tx pgx.Tx, owner string) error
	}{
		{"the scheduler's row alone (the reference)", nil},
		{"+ the leanest allocation row: a copy of the table with only its unique indexes (id, cluster+address, owner), " +
			"no trigger, foreign key or constraint, its ordinal from a sequence", func(ctx context.Context, tx pgx.Tx, owner string) error {
			return tx.QueryRow(ctx, seqRow, floorArgs(vp, owner)).Scan(new(int64))
		}},
		{"+ the ordinal from the pool's stripe (its pick and advance: dense addresses, the pool's count), same copy",
			func(ctx context.Context, tx pgx.Tx, owner string) error {
				return floorStatement(ctx, tx, floorSQL("bench_alloc_floor", true, false), vp, owner)
			}},
		{"+ the real table (its other indexes, the in-pool trigger, the foreign key, the constraints)",
			func(ctx context.Context, tx pgx.Tx, owner string) error {
				return floorStatement(ctx, tx, floorSQL("ipam_allocations", true, false), vp, owner)
			}},
		{"+ the allocation's event (= " + placementWritesLabel + ")", func(ctx context.Context, tx pgx.Tx, owner string) error {
			return oneStatement(ctx, tx, vp, owner)
		}},
	}
	clients := []int{1, r.sz.Clients[len(r.sz.Clients)-1]}
	rounds := max(1, min(2, r.sz.Rounds))
	dur := r.sz.CellDuration / 2
	lines := []string{"| writes in the placement transaction | clients | tx/s | ratio to the scheduler's row alone | server CPU/tx | WAL/tx | index entries/tx |",
		"|---|---|---|---|---|---|---|"}
	var seq atomic.Int64
	for _, n := range clients {
		pc, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			return err
		}
		pc.MaxConns = int32(n)
		genericPlans(pc)
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return err
		}
		cells := make([][]cell, len(steps))
		for round := 0; round < rounds; round++ {
			for j := range steps {
				k := (j + round) % len(steps)
				st := steps[k]
				r.logf("throughput: the placement's writes built up, %d clients, round %d: %s", n, round+1, st.name)
				c := r.timed(ctx, st.name, n, 5, dur, func(ctx context.Context, w, i int) error {
					id := fmt.Sprintf("f%d", seq.Add(1))
					return place(ctx, pool, id, vp.clusterID, "node-"+strconv.Itoa(w), func(tx pgx.Tx) error {
						if st.op == nil {
							return nil
						}
						return st.op(ctx, tx, id)
					})
				})
				if c.err != nil {
					pool.Close()
					return fmt.Errorf("%s, %d clients: %w", st.name, n, c.err)
				}
				cells[k] = append(cells[k], c)
			}
		}
		pool.Close()
		for k, st := range steps {
			var rates, ratios []float64
			for i, c := range cells[k] {
				rates = append(rates, c.rate())
				ratios = append(ratios, c.rate()/cells[0][i].rate())
			}
			m := merge(cells[k])
			srv, _, wal, ok := m.perOp()
			if !ok {
				return fmt.Errorf("no CPU figures (server not on this machine)")
			}
			e, _ := m.perOpWrites()
			lines = append(lines, fmt.Sprintf("| %s | %d | %s | %.2f | %s | %d B | %s |", st.name, n, num(medianF(rates)), medianF(ratios), us(srv), wal, e))
		}
	}
	r.rep.note("Throughput: the placement's writes, built up (each step adds one piece to the one above it, in the placement "+
		"transaction; the steps take turns, the ratio is to the scheduler's row alone in the same round, median of the rounds)", lines)
	return nil
}

// merge adds up the cells of several rounds.
func merge(cs []cell) cell {
	if len(cs) == 0 {
		return cell{}
	}
	m := cell{label: cs[0].label, clients: cs[0].clients, cpu0: cpuTimes{ok: true}, cpu1: cpuTimes{ok: true}}
	for i, c := range cs {
		m.ops += c.ops
		m.dur += c.dur
		m.lat = append(m.lat, c.lat...)
		m.wal += c.wal
		if i == 0 {
			m.ws.ok = true
		}
		m.ws.add(c.ws)
		m.extCPU += c.extCPU
		m.cpu1.server += c.cpu1.server - c.cpu0.server
		m.cpu1.client += c.cpu1.client - c.cpu0.client
		m.cpu0.ok = m.cpu0.ok && c.cpu0.ok && c.cpu1.ok
		m.cpu1.ok = m.cpu0.ok
	}
	return m
}

func medianF(f []float64) float64 {
	if len(f) == 0 {
		return 0
	}
	s := append([]float64(nil), f...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func cpuLine(c cell) string {
	srv, cli, wal, ok := c.perOp()
	s, k, t, w := "n/a", "n/a", "n/a", "n/a"
	if ok {
		s, k, t, w = us(srv), us(cli), us(srv+cli), fmt.Sprintf("%d B", wal)
	}
	p50, p99 := "n/a", "n/a"
	if len(c.lat) > 0 {
		p50, p99 = ms(percentile(c.lat, 0.5)), ms(percentile(c.lat, 0.99))
	}
	e, rows := c.perOpWrites()
	return fmt.Sprintf("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", c.clients, c.label, num(c.rate()), p50, p99, s, k, t, w, e, rows)
}

func metOr(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// num formats a rate with thousands separators.
func num(f float64) string {
	n := int64(f + 0.5)
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string {
	if d >= 10*time.Millisecond {
		return ms(d)
	}
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

// A variant is a hand-written allocation path, measured next to the core to
// show what the allocator could reach with fewer round trips. Variants write
// exactly what Client.Allocate writes on its fresh path (the allocation row,
// its event, the stripe advance, in one durable commit), so the figures
// compare; they skip only the slow paths (an owner that already holds or
// cooled an address, exact claims, exclusions that need layout math).
type variant struct {
	name string
	desc string
	op   func(ctx context.Context, conn *pgx.Conn, p *variantPool, owner string) error
}

type variantPool struct {
	poolID, clusterID string
	stride            int64
	base              netip.Prefix // first address of the pool's block, as /128
	layout            *ipam.Layout
}

var variants = []variant{
	{
		name: "experiment: 1 statement",
		desc: "stripe pick, stripe advance, allocation insert and event insert as one statement (data-modifying CTEs) in an implicit transaction: 1 round trip, 1 commit",
		op: func(ctx context.Context, c *pgx.Conn, p *variantPool, owner string) error {
			return oneStatement(ctx, c, p, owner)
		},
	},
	{
		name: "experiment: 2 round trips",
		desc: "pipelined: [BEGIN; owner probe; stripe pick] then [insert allocation+event; COMMIT] (pool definition cached in the client, address math in Go as now): 2 round trips, 1 commit",
		op:   twoRoundTrips,
	},
}

// floorSQL is the allocation's writes as one statement, without the
// allocator's checks: the row into table (ipam_allocations, or the
// decomposition's lean copy), its ordinal from the pool's stripe (the
// allocator's pick in a caller's transaction and its advance) or, without
// stripe, from the decomposition's sequence, and with event its event.
// Its parameters are named (floorArgs): @pool, @stride, @row (the row's
// id), @cluster, @base (the pool's first address), @owner, @event (the
// event's id).
func floorSQL(table string, stripe, event bool) string {
	ord := `
	s AS (SELECT nextval('bench_floor_ordinal') AS ord),`
	if stripe {
		ord = `
	pick_up AS MATERIALIZED (
		-- the allocator's pick in a caller's transaction: the first unlocked
		-- stripe with room from the owner's, in stripe order, wrapping round
		SELECT stripe FROM ipam_pool_stripes
		WHERE pool_id = @pool AND stripe >= (hashtext(@owner) & 2147483647) % @stride AND next_ordinal <= last_ordinal
		ORDER BY stripe LIMIT 1 FOR UPDATE SKIP LOCKED),
	pick_round AS MATERIALIZED (
		SELECT stripe FROM ipam_pool_stripes
		WHERE pool_id = @pool AND stripe < (hashtext(@owner) & 2147483647) % @stride AND next_ordinal <= last_ordinal
			AND NOT EXISTS (SELECT 1 FROM pick_up)
		ORDER BY stripe LIMIT 1 FOR UPDATE SKIP LOCKED),
	pick AS MATERIALIZED (SELECT * FROM pick_up UNION ALL SELECT * FROM pick_round),
	s AS (
		UPDATE ipam_pool_stripes s SET next_ordinal = s.next_ordinal + @stride
		FROM pick
		WHERE s.pool_id = @pool AND s.stripe = pick.stripe AND s.next_ordinal <= s.last_ordinal
		RETURNING s.next_ordinal - @stride AS ord),`
	}
	sql := `WITH` + ord + `
	a AS (
		INSERT INTO ` + table + ` (id, cluster_id, pool_id, address, ordinal, state, generation, owner_kind, owner_id,
			org_id, env_id, instance_id, actor, allocated_at, last_seen_at)
		SELECT @row, @cluster, @pool, @base::inet + s.ord, s.ord, 'active', 1, 'instance', @owner, 'acme', 'prod', @owner, 'bench', now(), now()
		FROM s
		ON CONFLICT (cluster_id, address) DO NOTHING
		RETURNING *)`
	if event {
		sql += `,
	e AS (
		INSERT INTO ipam_events (id, type, cluster_id, pool_id, allocation_id, generation, address, owner_kind, owner_id,
			org_id, env_id, node_id, instance_id, actor)
		SELECT @event, 'instance.allocated', cluster_id, pool_id, id, generation, address, owner_kind, owner_id, org_id, env_id,
			node_id, instance_id, actor FROM a)`
	}
	return sql + `
	SELECT ordinal FROM a`
}

// oneStatementSQL is the allocation's writes alone: the stripe's pick and
// advance, the row and its event, in one statement (the experiments "1
// statement" and the placement with the allocation's writes alone).
var oneStatementSQL = floorSQL("ipam_allocations", true, true)

// rowQuerier is a connection or a transaction.
type rowQuerier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

var errNoStripe = errors.New("no stripe (all locked or spent)")

// oneStatement runs oneStatementSQL on a connection or in a transaction
// (the placement experiment).
func oneStatement(ctx context.Context, conn rowQuerier, p *variantPool, owner string) error {
	return floorStatement(ctx, conn, oneStatementSQL, p, owner)
}

// floorArgs are floorSQL's parameters, for owner in the pool p: those a
// statement does not name are left out.
func floorArgs(p *variantPool, owner string) pgx.NamedArgs {
	return pgx.NamedArgs{"pool": p.poolID, "stride": p.stride, "row": newUUID(), "cluster": p.clusterID, "base": p.base,
		"owner": owner, "event": newUUID()}
}

// floorStatement runs one of floorSQL's statements with a stripe, trying
// again while every stripe is locked.
func floorStatement(ctx context.Context, conn rowQuerier, sql string, p *variantPool, owner string) error {
	for attempt := 0; attempt < 100; attempt++ {
		var ord int64
		err := conn.QueryRow(ctx, sql, floorArgs(p, owner)).Scan(&ord)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // every stripe locked (or an exact claim took the ordinal): try again
		}
		return err
	}
	return errNoStripe
}

const twoRTOwnerSQL = `SELECT (SELECT count(*) FROM ipam_allocations
		WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state IN ('active', 'reserved'))
	+ (SELECT count(*) FROM ipam_allocations
		WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state = 'cooling')`

const twoRTStripeSQL = `WITH pick AS MATERIALIZED (
		SELECT stripe FROM ipam_pool_stripes
		WHERE pool_id = $1 AND next_ordinal <= last_ordinal
		ORDER BY next_ordinal LIMIT 1 FOR UPDATE SKIP LOCKED)
	UPDATE ipam_pool_stripes s SET next_ordinal = s.next_ordinal + $2
	FROM pick
	WHERE s.pool_id = $1 AND s.stripe = pick.stripe AND s.next_ordinal <= s.last_ordinal
	RETURNING s.stripe, s.next_ordinal - $2, s.last_ordinal`

const twoRTInsertSQL = `WITH a AS (
		INSERT INTO ipam_allocations (id, cluster_id, pool_id, address, ordinal, state, generation, owner_kind, owner_id,
			org_id, env_id, instance_id, actor, allocated_at, last_seen_at)
		VALUES ($1, $2, $3, $4, $5, 'active', 1, 'instance', $6, 'acme', 'prod', $6, 'bench', now(), now())
		ON CONFLICT (cluster_id, address) DO NOTHING
		RETURNING *),
	e AS (
		INSERT INTO ipam_events (id, type, cluster_id, pool_id, allocation_id, generation, address, owner_kind, owner_id,
			org_id, env_id, node_id, instance_id, actor)
		SELECT $7, 'instance.allocated', cluster_id, pool_id, id, generation, address, owner_kind, owner_id, org_id, env_id,
			node_id, instance_id, actor FROM a)
	SELECT ordinal FROM a`

func twoRoundTrips(ctx context.Context, conn *pgx.Conn, p *variantPool, owner string) error {
	for attempt := 0; attempt < 100; attempt++ {
		b := &pgx.Batch{}
		b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
		b.Queue(twoRTOwnerSQL, p.clusterID, ipam.OwnerInstance, owner)
		b.Queue(twoRTStripeSQL, p.poolID, p.stride)
		br := conn.SendBatch(ctx, b)
		var held int
		var stripe int
		var next, last int64
		_, err := br.Exec()
		if err == nil {
			err = br.QueryRow().Scan(&held)
		}
		if err == nil {
			err = br.QueryRow().Scan(&stripe, &next, &last)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		retry := errors.Is(err, pgx.ErrNoRows)
		if err == nil && held > 0 {
			err = fmt.Errorf("owner %s already holds an address (the core's slow path would adopt it)", owner)
		}
		var addr netip.Addr
		var ord int64
		if err == nil {
			ord = p.layout.NextAllowed(next, p.stride)
			a, ok := p.layout.Addr(ord)
			if ord != next || ord > last || !ok {
				err = fmt.Errorf("ordinal %d needs the core's exclusion handling", next)
			}
			addr = a
		}
		if err != nil {
			_, _ = conn.Exec(ctx, "ROLLBACK")
			if retry {
				continue
			}
			return err
		}
		b = &pgx.Batch{}
		b.Queue(twoRTInsertSQL, newUUID(), p.clusterID, p.poolID, netip.PrefixFrom(addr, 128), ord, owner, newUUID())
		b.Queue("COMMIT")
		br = conn.SendBatch(ctx, b)
		var got int64
		err = br.QueryRow().Scan(&got)
		if err == nil {
			_, err = br.Exec()
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if errors.Is(err, pgx.ErrNoRows) {
			_, _ = conn.Exec(ctx, "ROLLBACK")
			continue
		}
		return err
	}
	return errNoStripe
}

func newUUID() uuid.UUID {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.New()
	}
	return id
}

// variantSetup creates a cluster and returns its instance pool for a variant.
func (r *runner) variantSetup(ctx context.Context, dbURL string) (*variantPool, error) {
	setup, err := ipam.Open(ctx, ipam.Config{DatabaseURL: dbURL, MaxConnections: 1, Actor: "bench"})
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	cl, err := newCluster(ctx, setup, "vx")
	if err != nil {
		return nil, err
	}
	p, err := setup.GetPool(ctx, ipam.InstancePool(cl.ID).ID())
	if err != nil {
		return nil, err
	}
	l, err := ipam.NewLayout(p.CIDRs, p.Exclude, p.Gateway)
	if err != nil {
		return nil, err
	}
	return &variantPool{poolID: p.ID, clusterID: cl.ID, stride: int64(p.Stripes),
		base: netip.PrefixFrom(p.CIDRs[0].Addr(), 128), layout: l}, nil
}

func (r *runner) variantCell(ctx context.Context, dbURL string, v variant, n int) cell {
	p, err := r.variantSetup(ctx, dbURL)
	if err != nil {
		return cell{label: v.name, clients: n, err: err}
	}
	pc, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return cell{label: v.name, clients: n, err: err}
	}
	pc.MaxConns = int32(n)
	genericPlans(pc)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return cell{label: v.name, clients: n, err: err}
	}
	defer pool.Close()
	conns := make([]*pgxpool.Conn, n)
	for w := range conns {
		if conns[w], err = pool.Acquire(ctx); err != nil {
			return cell{label: v.name, clients: n, err: err}
		}
		defer conns[w].Release()
	}
	r.srv.checkpoint(ctx)
	return r.timed(ctx, v.name, n, 5, r.sz.CellDuration, func(ctx context.Context, w, i int) error {
		return v.op(ctx, conns[w].Conn(), p, fmt.Sprintf("w%d-%d", w, i))
	})
}

// genericPlans has the hand-written statements run their generic plans, as
// the core's one-statement allocations do (ipam's fastPlans), so that the
// experiments' figures compare with the core's rather than count a custom
// plan at every call.
func genericPlans(pc *pgxpool.Config) {
	pc.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
}

// profileClient records a CPU profile of this process during one more
// instance cell (not counted in the table) and keeps the top functions: where
// the client's share of the CPU goes.
func (r *runner) profileClient(ctx context.Context, dbURL string, n int) error {
	dir, err := os.MkdirTemp("", "ipambench-prof-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	prof := filepath.Join(dir, "cpu.pprof")
	f, err := os.Create(prof)
	if err != nil {
		return err
	}
	// timed profiles its timed phase only (not the setup, the warm-up or
	// the connections' authentication).
	r.profile = f
	c := r.allocCell(ctx, dbURL, "instance", n)
	r.profile = nil
	f.Close()
	if c.err != nil {
		return c.err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	top := func(args ...string) ([]string, error) {
		out, err := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof"}, append(args, exe, prof)...)...).Output()
		if err != nil {
			return nil, fmt.Errorf("go tool pprof: %v", err)
		}
		var keep []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "File:") && !strings.HasPrefix(l, "Build ID:") && !strings.HasPrefix(l, "Type:") && !strings.HasPrefix(l, "Time:") {
				keep = append(keep, l)
			}
		}
		return keep, nil
	}
	flat, err := top("-top", "-nodecount=25")
	if err != nil {
		return err
	}
	cum, err := top("-top", "-cum", "-nodecount=40", "-focus=terraform-provider-ipam/ipam\\.|pgx|pgconn|pgtype")
	if err != nil {
		return err
	}
	r.rep.note(fmt.Sprintf("Client CPU profile of ipam.Client.AllocateInstance, instance addresses, %d clients (%s alloc/s during the profile; go tool pprof)", n, num(c.rate())),
		[]string{"By own time:", "```\n" + strings.Join(flat, "\n") + "\n```", "By cumulative time (ipam and pgx frames):", "```\n" + strings.Join(cum, "\n") + "\n```"})
	return nil
}

// sustained runs n clients allocating addresses of one kind (instance or
// ipv4) from one pool for three windows of twice a cell's time, each with
// connections of its own, and reports every window: a pool lives for years,
// and a cost that grows with what the pool has seen since its last vacuum
// (as dead index entries do) shows as a later window doing worse than the
// first, which the cells, each on a new pool, cannot show. Shared buffers per
// allocation (the database's blks_hit and blks_read, read once the window's
// connections have closed and flushed their counts) do not move with the
// machine's load as CPU does.
func (r *runner) sustained(ctx context.Context, dbURL, kind string, n int) error {
	setup, err := ipam.Open(ctx, ipam.Config{DatabaseURL: dbURL, MaxConnections: 1, Actor: "bench"})
	if err != nil {
		return err
	}
	cl, err := newCluster(ctx, setup, "sus")
	if err == nil && kind == "ipv4" {
		// Four times a cell's pool (a /14 in the full run): three windows
		// at 16 clients take well under its addresses.
		_, err = setup.CreatePool(ctx, ipam.Pool{ClusterID: cl.ID, Name: "v4", Cooldown: time.Hour,
			CIDRs: []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr("10.64.0.0"), r.sz.IPv4Block-2)}})
		if err == nil {
			_, err = r.execDB(ctx, dbURL, "VACUUM ANALYZE ipam_allocations")
		}
	}
	setup.Close()
	if err != nil {
		return err
	}
	blocks := func() (int64, error) {
		// The closed connections' last counts arrive as their backends exit.
		time.Sleep(500 * time.Millisecond)
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return 0, err
		}
		defer c.Close(ctx)
		var b int64
		err = c.QueryRow(ctx, `SELECT blks_hit + blks_read FROM pg_stat_database WHERE datname = current_database()`).Scan(&b)
		return b, err
	}
	lines := []string{
		fmt.Sprintf("| window (%d clients, %s addresses, one pool) | allocations | alloc/s | server CPU/op | WAL/op | shared buffers/op |", n, kind),
		"|---|---|---|---|---|---|"}
	done := 0
	for win := 1; win <= 3; win++ {
		b0, err := blocks()
		if err != nil {
			return err
		}
		client, err := ipam.Open(ctx, ipam.Config{DatabaseURL: dbURL, MaxConnections: int32(n), Actor: "bench"})
		if err != nil {
			return err
		}
		c := r.timed(ctx, "sustained", n, 0, 2*r.sz.CellDuration, func(ctx context.Context, w, i int) error {
			id := fmt.Sprintf("s%d-w%d-%d", win, w, i)
			var err error
			if kind == "ipv4" {
				_, err = client.AllocateEnvIPv4(ctx, nil, ipam.EnvIPv4Request{ClusterID: cl.ID, Pool: "v4", OrgID: "acme", EnvID: id})
			} else {
				_, err = client.AllocateInstance(ctx, nil, ipam.InstanceRequest{ClusterID: cl.ID,
					InstanceID: id, OrgID: "acme", EnvID: "prod", NodeID: "node-" + strconv.Itoa(w)})
			}
			return err
		})
		client.Close()
		if c.err != nil {
			return c.err
		}
		b1, err := blocks()
		if err != nil {
			return err
		}
		srv, _, wal, ok := c.perOp()
		if !ok || c.ops == 0 {
			return fmt.Errorf("no CPU figures (server not on this machine)")
		}
		done += c.ops
		w := 2 * r.sz.CellDuration.Seconds()
		lines = append(lines, fmt.Sprintf("| %d (%.3g to %.3g s) | %s | %s | %s | %d B | %.0f |", win, float64(win-1)*w, float64(win)*w,
			num(float64(c.ops)), num(c.rate()), us(srv), wal, float64(b1-b0)/float64(c.ops)))
	}
	r.rep.note(fmt.Sprintf("Throughput: one pool under sustained load, %s addresses (%s allocations in three windows; shared buffers from pg_stat_database, all of the benchmark database's reads)", kind, num(float64(done))), lines)
	return nil
}
