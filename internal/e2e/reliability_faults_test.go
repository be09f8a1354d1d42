package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// The database stops in the middle of an apply: every resource that fails
// says ipam_unavailable with the database's host and port (and never the
// password), nothing half-written is left behind, and once the database is
// back one more apply converges: states and database agree exactly, no hold
// is left over, the next plan is empty.
//
// The killed-apply fault (SIGKILL of terraform and its provider) is covered by
// TestKilledApplyIsAdopted in e2e_test.go.
func TestFaultDatabaseStoppedMidApply(t *testing.T) {
	srv := startServer(t)
	url := createDatabase(t, srv.url("postgres"), "ipam")
	seed(t, url)
	n := pick(90, 300)
	// The outage outlasts the failover bound: the first calls wait it out,
	// the others then fail at once, so the apply ends soon after one bound.
	w := newWorkdirWith(t, url, `  failover_timeout = "5s"`, mixed("d", n))
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := w.command(ctx, "apply", "-input=false", "-auto-approve", "-parallelism=2", "-no-color")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitBound)
	for len(activeAddresses(t, url)) < 10 {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("the apply made no progress:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.stop()
	stoppedAt := time.Now()
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the apply succeeded although the database stopped under it; the test proves nothing:\n%s", out.String())
	}
	took := time.Since(stoppedAt)
	text := out.String()
	blocks := errorBlocks(text)
	if len(blocks) == 0 {
		t.Fatalf("the failed apply printed no error:\n%s", text)
	}
	// Had each failing resource waited out the 5 s bound again, two at a
	// time, the apply could not have ended sooner than this after the stop:
	// not a speed target (the apply normally ends about one bound after the
	// stop), the least a wait per resource would cost, however fast the
	// machine.
	if rewait := time.Duration(len(blocks)/2-1) * 5 * time.Second; len(blocks) > 4 && took >= rewait {
		t.Errorf("the apply ended %s after the database stopped, with %d errors: each resource waited out the failover bound again",
			took.Round(time.Second), len(blocks))
	}
	where := "127.0.0.1:" + srv.port()
	for _, b := range blocks {
		if !strings.Contains(b, "ipam_unavailable") || !strings.Contains(b, where) {
			t.Errorf("an error does not say ipam_unavailable with %s:\nError: %s", where, b)
		}
	}
	if strings.Contains(text, srv.password()) {
		t.Errorf("the apply's output contains the database password")
	}
	t.Logf("stopped the database after the 10th of %d allocations; the apply ended %s later with %d errors, all ipam_unavailable at %s",
		n, time.Since(stoppedAt).Round(time.Millisecond), len(blocks), where)

	srv.restart()
	// Nothing half-written: every state resource is active with its address,
	// and every allocation row has the event of its last change.
	inState := stateMatchesDB(t, url, w)
	active := len(activeAddresses(t, url))
	checkInvariants(t, url)
	t.Logf("after the restart: %d resources in the state, %d active allocations (%d committed but unanswered, to be adopted)",
		inState, active, active-inState)

	w.run("apply", "-input=false", "-auto-approve")
	if got := stateMatchesDB(t, url, w); got != n {
		t.Errorf("%d resources in the state after the second apply, want %d", got, n)
	}
	if got := len(activeAddresses(t, url)); got != n {
		t.Errorf("%d active allocations after the second apply, want %d: something leaked", got, n)
	}
	if held := countRows(t, url, `SELECT count(*) FROM ipam_allocations WHERE state = 'reserved'`); held != 0 {
		t.Errorf("%d plan-time holds left over", held)
	}
	checkInvariants(t, url)
	if out := w.run("plan", "-input=false", "-detailed-exitcode"); !bytes.Contains(out, []byte("No changes")) {
		t.Errorf("the plan after recovery is not empty:\n%s", out)
	}
}

// checkAcks checks the database at url against what the clients were told:
// every acknowledged allocation is active with its address, every
// acknowledged release is not active. It returns how many are active and
// released.
func checkAcks(t *testing.T, url string, acks map[string]*ack) (nActive, nReleased int) {
	t.Helper()
	db := activeByOwner(t, url)
	for id, a := range acks {
		got, ok := db[ipam.OwnerInstance+"/"+id]
		switch {
		case a.active && !ok:
			t.Errorf("lost commit: %s was acknowledged with %s, but it is not active after the failover", id, a.addr)
		case a.active && canon(got) != canon(a.addr):
			t.Errorf("%s was acknowledged with %s, the new primary says %s", id, a.addr, got)
		case !a.active && ok:
			t.Errorf("lost commit: the release of %s (%s) was acknowledged, but it is active after the failover", id, a.addr)
		}
		if a.active {
			nActive++
		} else {
			nReleased++
		}
	}
	return nActive, nReleased
}

// ackLog is what the clients of a failover test were told.
type ackLog struct {
	mu   sync.Mutex
	acks map[string]*ack
}

// ackClient is client g of a failover test: it allocates instance addresses
// (owners prefix<g>-<n>) and releases its oldest ones, never retrying
// itself (the core rides a failover out), recording each acknowledged
// operation in log and reporting it to acked, while more says so. It
// returns false at its first error, which fails the test.
func ackClient(t *testing.T, st *ipam.Client, g int, prefix string, log *ackLog, more func() bool, acked func(a *ack, allocated bool)) bool {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(uint64(g), 7))
	var mine []*ack
	for seq := 0; more(); {
		if len(mine) > 3 && r.IntN(4) == 0 {
			a := mine[0]
			if _, err := st.Release(ctx, "c1", a.owner, 0); err != nil {
				t.Errorf("client %d: release %s: %v", g, a.owner.ID, err)
				return false
			}
			log.mu.Lock()
			a.active = false
			log.mu.Unlock()
			mine = mine[1:]
			acked(a, false)
			continue
		}
		id := fmt.Sprintf("%s%d-%d", prefix, g, seq)
		seq++
		o := ipam.Owner{Kind: ipam.OwnerInstance, ID: id, InstanceID: id, OrgID: "acme", EnvID: prefix}
		res, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.InstancePool("c1"), Owner: o})
		if err != nil {
			t.Errorf("client %d: allocate %s: %v", g, id, err)
			return false
		}
		a := &ack{owner: o, addr: res.Address.String(), active: true}
		log.mu.Lock()
		log.acks[id] = a
		log.mu.Unlock()
		mine = append(mine, a)
		acked(a, true)
	}
	return true
}

// ack is an operation the client saw succeed.
type ack struct {
	owner   ipam.Owner
	addr    string
	active  bool // false once its release was acknowledged
	afterAt bool // acknowledged after the promotion
}

// Failover: a primary and a synchronous streaming standby on loopback, the
// core and the provider given both hosts with target_session_attrs=read-write.
// While four clients allocate and release, and a terraform apply runs, the
// primary crashes (immediate stop) and the standby is promoted. The calls in
// flight ride it out inside the core (failover_timeout): none of them fails,
// the apply succeeds without a re-run; every allocation and release a client
// saw acknowledged is there; nothing is active twice; and terraform, with the
// same two-host URL, keeps working on its old state.
//
// No acknowledged commit is lost because of synchronous replication
// (synchronous_commit = on, synchronous_standby_names = '*', see
// startReplica): the primary answers a COMMIT only after the standby
// has flushed it. With asynchronous replication the last commits before a
// crash may be lost, and a lost allocation may be handed out again.
func TestFaultFailoverToStandby(t *testing.T) {
	primary, standby, haAdmin := startReplica(t)
	url := createDatabase(t, primary.url("postgres"), "ipam")
	seed(t, url)
	ha := withDatabase(t, haAdmin, "ipam")

	w := newWorkdir(t, ha, mixed("f", 12))
	w.run("apply", "-input=false", "-auto-approve")

	ctx := context.Background()
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: ha, Actor: "terraform", MaxConnections: 8, ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const clients = 4
	before, after := pick(80, 400), pick(25, 250) // acknowledged operations before the crash, per client after it
	var (
		log       = &ackLog{acks: map[string]*ack{}}
		total     atomic.Int64
		promoted  atomic.Bool
		firstBack atomic.Int64 // unix nanos of the first acknowledgement after the promotion
		wg        sync.WaitGroup
	)
	for g := 0; g < clients; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			afterN := 0
			ackClient(t, st, g, "fo", log, func() bool { return afterN < after }, func(a *ack, allocated bool) {
				if allocated {
					a.afterAt = promoted.Load()
				}
				total.Add(1)
				if promoted.Load() {
					afterN++
					firstBack.CompareAndSwap(0, time.Now().UnixNano())
				}
			})
		}()
	}
	for total.Load() < int64(before) && !t.Failed() {
		time.Sleep(5 * time.Millisecond)
	}
	// A terraform apply in flight across the crash and the promotion.
	inflight := newWorkdir(t, ha, mixed("g", 45))
	applyDone := make(chan error, 1)
	var applyOut []byte
	go func() {
		var err error
		applyOut, err = inflight.try("apply", "-input=false", "-auto-approve", "-parallelism=3")
		applyDone <- err
	}()
	for countRows(t, url, `SELECT count(*) FROM ipam_allocations WHERE owner_id LIKE 'g-%' AND state = 'active'`) < 3 && !t.Failed() {
		time.Sleep(5 * time.Millisecond)
	}
	crashAt := time.Now()
	primary.crash()
	standby.promote()
	promoted.Store(true)
	promotedAt := time.Now()
	wg.Wait()
	if err := <-applyDone; err != nil {
		t.Errorf("the apply in flight across the failover failed: %v\n%s", err, applyOut)
	}
	if t.Failed() {
		return
	}
	newURL := standby.url("ipam")
	if got := stateMatchesDB(t, newURL, inflight); got != 45 {
		t.Errorf("%d resources in the state of the apply that ran across the failover, want 45", got)
	}
	nActive, nReleased := checkAcks(t, newURL, log.acks)
	nAfter := 0
	for _, a := range log.acks {
		if a.afterAt {
			nAfter++
		}
	}
	checkInvariants(t, newURL)

	// terraform with the same two-host URL: the first host is gone, the state still matches.
	w.setHCL("", mixed("f", 24))
	w.run("apply", "-input=false", "-auto-approve")
	if got := stateMatchesDB(t, newURL, w); got != 24 {
		t.Errorf("%d resources in the state after the failover apply, want 24", got)
	}
	if got := len(activeByOwner(t, newURL)); got != nActive+24+45 {
		t.Errorf("%d active allocations on the new primary, want %d acknowledged + 24 of terraform", got, nActive)
	}
	back := time.Duration(firstBack.Load() - crashAt.UnixNano())
	t.Logf("failover: %d clients, %d operations acknowledged (%d allocations still active, %d releases), %d of them after the promotion; "+
		"crash to promoted %s, crash to first acknowledged allocation %s; an apply of 45 resources across it succeeded; 0 errors, 0 lost, 0 duplicates",
		clients, total.Load(), nActive, nReleased, nAfter, promotedAt.Sub(crashAt).Round(time.Millisecond), back.Round(time.Millisecond))
}

// More parallel resources than the provider's max_connections: 30 resources,
// -parallelism=30, max_connections = 2. Their plan-time holds and their
// creates queue for a connection, none fails, and the provider never holds
// more than 2 sessions (pg_stat_activity, sampled every 5 ms).
func TestFaultConnectionLimitQueues(t *testing.T) {
	url := setup(t)
	const n = 30
	w := newWorkdirWith(t, url, "  max_connections = 2", mixed("q", n))
	ctx, cancel := context.WithCancel(context.Background())
	var peak, samples, full atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(context.Background())
		for ctx.Err() == nil {
			var k int64
			if err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name = 'terraform-provider-ipam'`).Scan(&k); err != nil {
				t.Error(err)
				return
			}
			samples.Add(1)
			if k >= 2 {
				full.Add(1)
			}
			if k > peak.Load() {
				peak.Store(k)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// Plan and apply apart, so that one provider process at a time holds
	// sessions: the plan's 30 plan-time holds queue as the apply's 30 creates do.
	out, err := w.try("plan", "-input=false", "-parallelism=30", "-out=tfplan")
	if err == nil {
		out, err = w.try("apply", "-input=false", "-parallelism=30", "tfplan")
	}
	cancel()
	<-done
	if err != nil {
		t.Fatalf("plan and apply with %d resources in parallel and max_connections = 2 failed: %v\n%s", n, err, out)
	}
	if got := stateMatchesDB(t, url, w); got != n {
		t.Errorf("%d resources in the state, want %d", got, n)
	}
	if p := peak.Load(); p > 2 {
		t.Errorf("the provider held %d sessions at once; max_connections is 2", p)
	}
	checkInvariants(t, url)
	t.Logf("connection limit: %d resources, -parallelism=30, max_connections = 2: all planned and created; peak %d provider sessions, "+
		"both in use in %d of %d samples", n, peak.Load(), full.Load(), samples.Load())
}

// A plan-time check that cannot use the database (here a lock another
// session holds on the pools, past lock_timeout) says so: the plan of a pool
// whose blocks overlap another pool shows the change with the warning "Not
// Checked at Plan Time" naming ipam_busy, instead of passing silently as if
// checked; once the lock is gone, the same plan fails with the overlap.
func TestPlanSaysWhatItCouldNotCheck(t *testing.T) {
	t.Parallel()
	url := setup(t)
	ctx := context.Background()
	hcl := `resource "ipam_pool" "p" {
  cluster_id = "c1"
  name       = "overlapping"
  cidrs      = ["198.51.100.128/25"]
}
`
	w := newWorkdirWith(t, url, `  lock_timeout = "1s"`, hcl)
	op, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close(ctx)
	tx, err := op.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE ipam_pools IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	out, err := w.try("plan", "-input=false")
	said := strings.Join(strings.Fields(string(out)), " ")
	if err != nil || !strings.Contains(said, "Not Checked at Plan Time") || !strings.Contains(said, "ipam_busy") ||
		!strings.Contains(said, "the apply checks it again") {
		t.Errorf("the plan of a pool it could not check: %v, want it to pass warning that it could not check the blocks:\n%s", err, out)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	out, err = w.try("plan", "-input=false")
	if err == nil || !strings.Contains(string(out), "Invalid Pool") {
		t.Errorf("the plan of an overlapping pool, the database free: %v, want Invalid Pool:\n%s", err, out)
	}
}

// A restart that begins as a saved plan's apply starts, and lasts longer
// than the first contact's 5 s: the apply waits for the server (Terraform
// applies in a new provider process, whose first contact found nothing
// listening) and succeeds. It gave up after 5 s, naming a wrong host or
// port, and the saved plan was then stale (found by a trial as an
// operator).
func TestARestartAsTheApplyStartsIsRiddenOut(t *testing.T) {
	srv := startServer(t)
	url := createDatabase(t, srv.url("postgres"), "ipam")
	w := newWorkdir(t, url, `resource "ipam_cluster" "c" {
  name   = "rs"
  prefix = "2001:db8:75::/48"
}
resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n1"
}
`)
	w.run("plan", "-input=false", "-out=saved.tfplan")
	srv.stop()
	back := make(chan struct{})
	go func() {
		defer close(back)
		time.Sleep(8 * time.Second)
		srv.restart()
	}()
	out, err := w.try("apply", "-input=false", "saved.tfplan")
	<-back
	if err != nil {
		t.Fatalf("the apply of the saved plan across an 8 s restart failed:\n%s", out)
	}
	if got := activeAddresses(t, url); len(got) != 1 {
		t.Errorf("active addresses after the apply: %v, want n1's", got)
	}
}
