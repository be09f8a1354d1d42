package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// patroniCluster is a Patroni cluster of the test's own (scripts/patroni.sh).
type patroniCluster struct {
	t   *testing.T
	dir string
}

func (p *patroniCluster) do(action string) { p.t.Helper(); script(p.t, "patroni.sh", action, p.dir) }

func (p *patroniCluster) url(db string) string {
	p.t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, "url"))
	if err != nil {
		p.t.Fatal(err)
	}
	return withDatabase(p.t, strings.TrimSpace(string(b)), db)
}

// A Patroni cluster of three PostgreSQL members and one etcd, synchronous
// replication, the provider and the core given every member with
// target_session_attrs=read-write. During a storm of core allocations and
// releases (4 clients) and of terraform applies (3 users, each applying a
// growing configuration in a loop): a planned switchover, then the primary
// killed (SIGKILL) so that Patroni fails over to the synchronous standby.
// No client and no apply retries anything itself: the calls ride it out
// (failover_timeout). Afterwards every acknowledged allocation and release
// is on the new primary, no address is active twice, every state matches
// the database, and nothing is active that no client or state holds.
//
// Patroni, etcd and three servers take a minute to set up: the test runs in
// `make failover` (and `make soak`), which set IPAM_PATRONI=1.
func TestPatroniFailover(t *testing.T) {
	if os.Getenv("IPAM_PATRONI") != "1" {
		t.Skip("the Patroni failover test runs with IPAM_PATRONI=1: make failover (or make soak)")
	}
	p := &patroniCluster{t: t, dir: serverDir(t, "patroni")}
	t.Cleanup(func() { scriptQuiet(t, "patroni.sh", "stop", p.dir) })
	p.do("start")
	url := createDatabase(t, p.url("postgres"), "ipam")
	seed(t, url)
	ctx := context.Background()

	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, Actor: "scheduler", MaxConnections: 8, ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	var (
		log      = &ackLog{acks: map[string]*ack{}}
		ops      atomic.Int64
		inflight atomic.Int64 // errors of calls and applies: each would have failed a user
		applies  atomic.Int64
		stopped  atomic.Bool
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	const clients, users = 4, 3
	for g := 0; g < clients; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !ackClient(t, st, g, "pa", log, func() bool { return !stopped.Load() }, func(*ack, bool) {
				ops.Add(1)
				time.Sleep(5 * time.Millisecond)
			}) {
				inflight.Add(1)
			}
		}()
	}
	ws := make([]*workdir, users)
	for u := range ws {
		ws[u] = newWorkdirWith(t, url, `  failover_timeout = "60s"`, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 1; ; round++ {
				select {
				case <-stop:
					return
				default:
				}
				ws[u].setHCL(`  failover_timeout = "60s"`, mixed(fmt.Sprintf("pu%d", u), min(3*round, 45)))
				if out, err := ws[u].try("apply", "-input=false", "-auto-approve", "-parallelism=4"); err != nil {
					inflight.Add(1)
					t.Errorf("user %d: apply %d failed during the storm: %v\n%s", u, round, err, out)
					return
				}
				applies.Add(1)
			}
		}()
	}

	waitOps := func(n int64) {
		for target := ops.Load() + n; ops.Load() < target && !t.Failed(); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitOps(200)
	switchAt := time.Now()
	p.do("switchover")
	switchTook := time.Since(switchAt)
	waitOps(200)
	p.do("wait-sync") // Patroni fails over only to a synchronous standby
	p.do("kill-leader")
	killAt := time.Now()
	waitOps(1) // the first acknowledged operation after the kill
	failoverTook := time.Since(killAt)
	waitOps(200)
	stopped.Store(true)
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}

	nActive, nReleased := checkAcks(t, url, log.acks)
	db := activeByOwner(t, url)
	inState := stateMatchesDB(t, url, ws...)
	if len(db) != nActive+inState {
		t.Errorf("%d active allocations, but clients hold %d and states %d: %d leaked", len(db), nActive, inState, len(db)-nActive-inState)
	}
	checkInvariants(t, url)
	t.Logf("patroni: %d core operations acknowledged (%d allocations active, %d released), %d terraform applies (%d resources in state) "+
		"across 1 switchover (patronictl switchover took %s) and 1 failover (SIGKILL of the primary; first acknowledged operation %s later); "+
		"%d in-flight errors, 0 duplicates, 0 lost, 0 leaked",
		ops.Load(), nActive, nReleased, applies.Load(), inState, switchTook.Round(100*time.Millisecond),
		failoverTook.Round(100*time.Millisecond), inflight.Load())
}
