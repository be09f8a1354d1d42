package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// loadFigures is what one storm did, for the log and RELIABILITY.md.
type loadFigures struct {
	ops, allocs, adopted, releases, exhausted, claimsRefused atomic.Int64
}

// held is an allocation a core worker holds.
type held struct {
	cluster string
	owner   ipam.Owner
	pool    string
	addr    netip.Addr
}

// coreWorker allocates and releases through the core until stop is closed
// (and at least minOps operations are done), then releases what it holds.
// Every result is checked as it comes: an adoption must return the owner's
// address, and only the outcomes a concurrent world allows are accepted.
func coreWorker(t *testing.T, st *ipam.Client, g int, stop <-chan struct{}, minOps int, pace time.Duration, f *loadFigures) {
	r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
	var mine []held
	n, v4 := 0, 0
	ctx := context.Background()
	allocate := func(pool string, o ipam.Owner, claim netip.Addr) {
		n++
		res, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: testdb.Pool(pool), Owner: o, Address: claim})
		f.ops.Add(1)
		switch code := ipam.Code(err); {
		case err == nil:
			f.allocs.Add(1)
			if claim.IsValid() && res.Address != claim {
				t.Errorf("worker %d: claimed %s, got %s", g, claim, res.Address)
			}
			mine = append(mine, held{cluster: res.ClusterID, owner: o, pool: pool, addr: res.Address})
		case code == ipam.CodeExhausted && strings.Contains(pool, "churn"):
			f.exhausted.Add(1)
		case claim.IsValid() && (code == ipam.CodeAddressInUse || code == ipam.CodeAddressCooling):
			f.claimsRefused.Add(1)
		default:
			t.Errorf("worker %d: allocate %s from %s: %v", g, o.ID, pool, err)
		}
	}
	for i := 0; ; i++ {
		select {
		case <-stop:
			if i >= minOps {
				for _, h := range mine {
					if _, err := st.Release(ctx, h.cluster, h.owner, 0); err != nil {
						t.Errorf("worker %d: final release of %s: %v", g, h.owner.ID, err)
					}
					f.releases.Add(1)
				}
				return
			}
		default:
		}
		id := fmt.Sprintf("w%d-%d", g, n)
		switch a := r.IntN(20); {
		case a < 5:
			allocate("c1/instance", ipam.Owner{Kind: ipam.OwnerInstance, ID: id, InstanceID: id, OrgID: "acme", EnvID: "load"}, netip.Addr{})
		case a < 7:
			allocate("c1/node", ipam.Owner{Kind: ipam.OwnerNode, ID: id, NodeID: id}, netip.Addr{})
		case a < 10:
			// The churn pools cool for 2s, so their addresses are reused during the storm.
			allocate("c1/churn6", ipam.Owner{Kind: ipam.OwnerInstance, ID: id, InstanceID: id}, netip.Addr{})
		case a < 12:
			allocate("c1/churn4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: id, EnvID: id}, netip.Addr{})
		case a < 13:
			// An exact claim racing the counters: free, in use or cooling, all three happen.
			claim := netip.MustParseAddr(fmt.Sprintf("2001:db8:0:ff::%x", 1+r.IntN(63)))
			allocate("c1/churn6", ipam.Owner{Kind: ipam.OwnerInstance, ID: id, InstanceID: id}, claim)
		case a < 14 && v4 < 4:
			// The shared IPv4 pool cools for an hour: a few each, so it is never exhausted.
			v4++
			allocate("c1/v4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: id, EnvID: id, OrgID: "acme"}, netip.Addr{})
		case a < 15 && len(mine) > 0:
			// Idempotency: allocating again for an owner that holds an address adopts it.
			h := mine[r.IntN(len(mine))]
			res, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: testdb.Pool(h.pool), Owner: h.owner})
			f.ops.Add(1)
			if err != nil || !res.Adopted || res.Address != h.addr {
				t.Errorf("worker %d: allocate again for %s (holding %s): %s adopted=%v, %v", g, h.owner.ID, h.addr, res.Address, res.Adopted, err)
			}
			f.adopted.Add(1)
		case len(mine) > 0:
			k := r.IntN(len(mine))
			h := mine[k]
			ok, err := st.Release(ctx, h.cluster, h.owner, 0)
			f.ops.Add(1)
			if err != nil || !ok {
				t.Errorf("worker %d: release %s (%s): released=%v, %v", g, h.owner.ID, h.addr, ok, err)
			}
			f.releases.Add(1)
			mine = append(mine[:k], mine[k+1:]...)
		}
		time.Sleep(pace/2 + rand.N(pace))
	}
}

// TestLoadStorm: at least 8 terraform apply processes at once, each with its
// own working directory and state and 50 mixed resources (node, instance,
// IPv4), plus 16 goroutines allocating, claiming, adopting and releasing
// through the core, all against one database. Afterwards ipam.Check (what
// `ipamctl check` runs), `ipamctl check` itself and independent SQL find no
// violation, every state matches the database exactly, no hold is left over,
// and every user's next plan is empty. IPAM_SOAK=1 runs 16 processes over
// three rounds (apply all, shrink to half, apply all again).
func TestLoadStorm(t *testing.T) {
	users, each, rounds := pick(8, 16), 50, pick(1, 3)
	workers, minOps, pace := 16, pick(20, 200), time.Duration(pick(150, 40))*time.Millisecond
	url := setup(t)
	ctx := context.Background()
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, Actor: "terraform", MaxConnections: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, p := range []ipam.Pool{
		{ClusterID: "c1", Name: "churn6", Cooldown: 2 * time.Second, CIDRs: []netip.Prefix{netip.MustParsePrefix("2001:db8:0:ff::/122")}},
		{ClusterID: "c1", Name: "churn4", Cooldown: 2 * time.Second, CIDRs: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/26")}},
	} {
		if _, err := st.CreatePool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	var f loadFigures
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			coreWorker(t, st, g, stop, minOps, pace, &f)
		}()
	}

	ws := make([]*workdir, users)
	for u := range ws {
		ws[u] = newWorkdir(t, url, mixed(fmt.Sprintf("s%d", u), each))
	}
	start := time.Now()
	applies := 0
	for round := 1; round <= rounds; round++ {
		n := each
		if round%2 == 0 {
			n = each / 2 // the rest are destroyed, their addresses cool down
		}
		var twg sync.WaitGroup
		for u, w := range ws {
			w.setHCL("", mixed(fmt.Sprintf("s%d", u), n))
			twg.Add(1)
			go func() {
				defer twg.Done()
				if out, err := w.try("apply", "-input=false", "-auto-approve"); err != nil {
					t.Errorf("round %d: apply in %s: %v\n%s", round, w.dir, err, out)
				}
			}()
		}
		twg.Wait()
		applies += users
	}
	storm := time.Since(start)
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}

	compared := stateMatchesDB(t, url, ws...)
	active := len(activeAddresses(t, url))
	if compared != users*each || active != compared {
		t.Errorf("%d resources in the states, %d active allocations in the database, want %d each", compared, active, users*each)
	}
	if n := countRows(t, url, `SELECT count(*) FROM ipam_allocations WHERE state = 'reserved'`); n != 0 {
		t.Errorf("%d plan-time holds left over after every apply finished", n)
	}
	rows := checkInvariants(t, url)
	if out, code := runIpamctl(t, url, "check"); code != 0 {
		t.Errorf("ipamctl check exited %d:\n%s", code, out)
	}
	// Terraform's own view: every user's next plan is empty.
	var pwg sync.WaitGroup
	for _, w := range ws {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			// -detailed-exitcode: 0 no changes, 1 error, 2 changes.
			if out, err := w.try("plan", "-input=false", "-detailed-exitcode"); err != nil {
				t.Errorf("plan after the storm in %s is not empty (%v):\n%s", w.dir, err, out)
			}
		}()
	}
	pwg.Wait()
	events := countRows(t, url, `SELECT count(*) FROM ipam_events`)
	// Addresses that went to a second owner (after their cooldown): the reuse path ran.
	reused := countRows(t, url, `SELECT count(*) FROM (SELECT allocation_id FROM ipam_events
		WHERE allocation_id IS NOT NULL AND (type LIKE '%.allocated' OR type LIKE '%.enrolled' OR type LIKE '%_enabled')
		GROUP BY allocation_id HAVING count(DISTINCT owner_kind || '/' || owner_id) > 1) x`)
	t.Logf("storm: %d terraform apply processes (%d at once, %d rounds) with %d resources each, %s; "+
		"%d core workers: %d operations, %d allocations, %d adoptions, %d releases, %d exhausted (churn pools), %d exact claims refused (in use or cooling); "+
		"afterwards: %d state resources = %d active allocations, %d allocation rows and %d events checked, %d addresses reused by a second owner after their cooldown, 0 violations",
		applies, users, rounds, each, storm.Round(time.Millisecond), workers, f.ops.Load(), f.allocs.Load(), f.adopted.Load(),
		f.releases.Load(), f.exhausted.Load(), f.claimsRefused.Load(), compared, active, rows, events, reused)
}
