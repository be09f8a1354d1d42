package engine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// TestModelCore is the randomized, model-based invariant test of the core.
// Concurrent workers draw random operations across every feature (clusters,
// operator pools with gaps and exclusions, node, instance and IPv4
// allocation (also inside a caller's transaction that commits or rolls
// back), exact claims, plan-time holds of two actors, releases, address
// sets (keys added, removed and restated: a restate must keep the key's
// address when its new pools list the address's pool, and refuse the whole
// change when they do not; a key's plan-time hold then its add), create-first
// replacements of a set and of a node's blocks, node block scaling and
// release, cluster and pool updates, shrinks and
// destroys, a transient cluster created, used and destroyed within each
// round (under one of two ids, on one prefix, so that each round's cluster
// inherits the tombstones of another cluster whose owners have the same
// ids), stale-leak reclaim, operators' forced releases (ipamctl release of
// an owner or an address) and expiries of plans' holds (ipamctl
// expire-hold, of an owner or an address), saved plans applied late: holds confirmed after
// the clock moved past them) on a clock the test moves (ipam_clock, no sleeps). After every
// round it checks the global invariants: engine.Check (no address active
// twice anywhere, none outside its pool or its node's blocks, no reuse inside
// the cooldown fixed at release, one IPv4 per environment, counters, settings
// in force), no IPv6 pool block of two clusters overlapping, no address
// that a pool inherited from another cluster handed out inside the cooldown
// it was inherited with (to anyone, its former owner's namesake included),
// the model: every address a caller was told it holds is still active for
// it, and every third round the listings: each filter's and each limit's
// listing agrees with the full one (checkListings).
//
// The seed is logged; IPAM_MODEL_SEED replays it. IPAM_MODEL_DURATION
// (default 40s; 30m under IPAM_SOAK=1) bounds the run.
func TestModelCore(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the randomized model test runs in the full tier (make test) and in make soak")
	}
	seed := testdb.ModelSeed(t)
	duration := 40 * time.Second
	if os.Getenv("IPAM_SOAK") != "" {
		duration = 30 * time.Minute
	}
	if s := os.Getenv("IPAM_MODEL_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("IPAM_MODEL_DURATION: %v", err)
		}
		duration = d
	}
	t.Logf("seed %d (replay with IPAM_MODEL_SEED=%d), for %s", seed, seed, duration)
	sts, raw := seamStores(t, "terraform", "other")
	db, err := pgxpool.New(context.Background(), raw.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Exec(context.Background(), `CREATE TABLE model_placements (instance_id text PRIMARY KEY, address inet NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	m := &model{t: t, sts: sts, raw: raw, db: db, held: map[string]heldAddr{}, outcomes: map[string]int{}}
	const workers = 4
	deadline := time.Now().Add(duration)
	skew := time.Duration(0)
	clock := rand.New(rand.NewPCG(seed, 1))
	rounds, ops := 0, 0
	for time.Now().Before(deadline) {
		m.resetTransient(rounds)
		var wg sync.WaitGroup
		logs := make([][]string, workers)
		for w := 0; w < workers; w++ {
			rng := rand.New(rand.NewPCG(seed, uint64(rounds*workers+w+2)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 12; i++ {
					logs[w] = append(logs[w], m.step(rng, w, i == 0))
				}
			}()
		}
		wg.Wait()
		ops += workers * 12
		rounds++
		if bad := m.check(rounds); len(bad) > 0 {
			for w, l := range logs {
				t.Logf("round %d worker %d:\n  %s", rounds, w, strings.Join(l, "\n  "))
			}
			t.Fatalf("seed %d, round %d (replay with IPAM_MODEL_SEED=%d): %d violations:\n%s", seed, rounds, seed, len(bad), strings.Join(bad, "\n"))
		}
		// Time passes between rounds: minutes to two days.
		skew += time.Duration(clock.Int64N(int64(48 * time.Hour)))
		seamClock(t, raw, skew)
	}
	t.Logf("seed %d: %d rounds, %d operations by %d workers, %s of database time; every invariant held after every round",
		seed, rounds, ops, workers, skew.Round(time.Hour))
	keys := make([]string, 0, len(m.outcomes))
	for k := range m.outcomes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d; ", k, m.outcomes[k])
	}
	t.Logf("outcomes: %s", b.String())
}

type heldAddr struct {
	cluster, kind, id string
	addr              netip.Addr
}

type model struct {
	t    *testing.T
	sts  []*engine.Client
	raw  *pgx.Conn
	db   *pgxpool.Pool // the callers' own transactions (package ipam's way)
	mu   sync.Mutex
	held map[string]heldAddr // owner key -> what the caller was told it holds
	// transient is the id of this round's transient cluster.
	transient string
	// outcomes counts each operation's results, for the closing log line.
	outcomes map[string]int
}

const modelClusters = 3

func (m *model) clusterID(i int) string { return fmt.Sprintf("m%d", i) }

func (m *model) cluster(i int) engine.Cluster {
	return engine.Cluster{ID: m.clusterID(i), Prefix: pfx(fmt.Sprintf("2001:db8:%x::/48", 0x10+i)),
		NodePrefix:     pfx(fmt.Sprintf("2001:db8:%x::/122", 0x10+i)),
		InstancePrefix: pfx(fmt.Sprintf("2001:db8:%x:1::/120", 0x10+i)),
		NodeCooldown:   6 * time.Hour, InstanceCooldown: 2 * time.Hour}
}

// The transient cluster: it does not exist when a round begins (the round
// destroys it, forced, before its workers start), and every worker creates
// it, creates an IPv4 pool in it, allocates in it and destroys it (not
// forced) during the round. Its destroys succeed while it is empty, so they
// race its creation, its pool's and the allocations, which the shared
// clusters, rarely empty, almost never do. Rounds alternate between two
// ids on the same prefix: the forced destroy leaves the round's addresses
// as tombstones, which the next round's cluster, another cluster whose
// owners have the same ids, inherits.
var transientClusters = [2]string{"mt", "mu"}

func transientClusterSpec(id string) engine.Cluster {
	return engine.Cluster{ID: id, Prefix: pfx("2001:db8:30::/48"),
		NodePrefix: pfx("2001:db8:30::/122"), InstancePrefix: pfx("2001:db8:30:1::/120"),
		NodeCooldown: 6 * time.Hour, InstanceCooldown: 2 * time.Hour}
}

// resetTransient destroys the transient cluster (forced) between rounds,
// forgets what was held in it, and names the next round's. The next
// round's cluster is another cluster on the same prefix: each instance that
// held an address in the destroyed one asks the new one for an address at
// once (inside the cooldown of the destroy's release), and must not get its
// namesake's; then the new cluster is destroyed again, so that the round
// begins without it.
func (m *model) resetTransient(round int) {
	ctx := context.Background()
	next := transientClusters[round%2]
	if m.transient != "" {
		if err := m.sts[0].DeleteCluster(ctx, m.transient, true); err != nil && !errors.Is(err, engine.ErrNotFound) {
			m.t.Fatalf("reset of the transient cluster: %v", err)
		}
		var left []heldAddr
		m.mu.Lock()
		for key, h := range m.held {
			if strings.HasPrefix(key, m.transient+"/") && h.kind == engine.OwnerInstance {
				left = append(left, h)
			}
		}
		m.mu.Unlock()
		m.forgetPrefix(m.transient + "/")
		if len(left) > 0 {
			if _, err := m.sts[0].CreateCluster(ctx, transientClusterSpec(next)); err != nil {
				m.t.Fatalf("the next transient cluster: %v", err)
			}
			for _, h := range left {
				o := engine.Owner{Kind: engine.OwnerInstance, ID: h.id, InstanceID: h.id}
				a, err := m.sts[0].Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools(next), Owner: o})
				if err == nil && a.Address == h.addr {
					m.t.Errorf("instance %s of cluster %s got %s, which %s's instance %s left cooling", h.id, next, a.Address, h.cluster, h.id)
				} else if err != nil && !expected(err) {
					m.t.Errorf("instance %s of cluster %s: %v", h.id, next, err)
				}
			}
			if err := m.sts[0].DeleteCluster(ctx, next, true); err != nil {
				m.t.Fatalf("reset of the next transient cluster: %v", err)
			}
		}
	}
	m.transient = next
}

// transientStep is one operation on the transient cluster.
func (m *model) transientStep(ctx context.Context, rng *rand.Rand, st *engine.Client, w, k int) (string, []string, error) {
	cid := m.transient
	pool := cid + "/v4"
	var err error
	switch rng.IntN(6) {
	case 0:
		_, err = st.CreateCluster(ctx, transientClusterSpec(cid))
		if engine.Code(err) == engine.CodeConflict {
			err = nil
		}
		return "create transient cluster " + cid, nil, err
	case 1:
		_, err = st.CreatePool(ctx, engine.Pool{ClusterID: cid, Name: "v4", Cooldown: time.Hour, CIDRs: []netip.Prefix{pfx("10.9.0.0/29")}})
		if engine.Code(err) == engine.CodeConflict {
			err = nil
		}
		return "create transient pool " + pool, nil, err
	case 2, 3, 4:
		// An instance in the cluster's own pool, or an environment's IPv4.
		id := fmt.Sprintf("w%d-t%d", w, k)
		o, from := engine.Owner{Kind: engine.OwnerInstance, ID: id, InstanceID: id}, engine.ClusterPools(cid)
		what := fmt.Sprintf("allocate transient instance %s in %s", id, cid)
		if k%2 == 0 {
			id = fmt.Sprintf("w%d-t%d", w, k%3)
			o, from = engine.Owner{Kind: engine.OwnerEnvIPv4, ID: id, EnvID: id}, testdb.Pool(pool)
			what = fmt.Sprintf("allocate transient IPv4 for %s from %s", id, pool)
		}
		r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: from, Owner: o})
		var notes []string
		if err == nil {
			notes = m.remember(cid+"/"+o.Kind+"/"+id, heldAddr{cid, o.Kind, o.ID, r.Address})
		}
		return what, notes, err
	default:
		err = st.DeleteCluster(ctx, cid, false)
		var notes []string
		if err == nil {
			notes = m.clusterGone(cid)
		}
		return "delete transient cluster " + cid, notes, err
	}
}

// expected reports whether err is an outcome the API promises (a refusal or
// exhaustion, coded), as opposed to a failure.
func expected(err error) bool {
	if err == nil || errors.Is(err, engine.ErrNotFound) {
		return true
	}
	switch engine.Code(err) {
	case engine.CodeExhausted, engine.CodeOwnerConflict, engine.CodeAddressInUse, engine.CodeAddressCooling,
		engine.CodeInvalid, engine.CodeConflict, engine.CodeHoldLost, "not_found":
		return true
	}
	return false
}

func (m *model) remember(key string, h heldAddr) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.held[key]; ok && old.addr != h.addr {
		return []string{fmt.Sprintf("owner %s was told %s, then %s, without a release", key, old.addr, h.addr)}
	}
	m.held[key] = h
	return nil
}

// pick draws an owner id (prefix + 0..11) whose model state under keyPrefix
// is held (or not), falling back to any id.
func (m *model) pick(rng *rand.Rand, keyPrefix, idPrefix string, held bool) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	start := rng.IntN(12)
	for i := 0; i < 12; i++ {
		id := fmt.Sprintf("%s%d", idPrefix, (start+i)%12)
		if _, ok := m.held[keyPrefix+id]; ok == held {
			return id
		}
	}
	return fmt.Sprintf("%s%d", idPrefix, start)
}

// heldBy draws one of the addresses the model says owners with this id
// prefix hold.
func (m *model) heldBy(rng *rand.Rand, idPrefix string) (heldAddr, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var mine []heldAddr
	for _, h := range m.held {
		if strings.HasPrefix(h.id, idPrefix) {
			mine = append(mine, h)
		}
	}
	if len(mine) == 0 {
		return heldAddr{}, false
	}
	slices.SortFunc(mine, func(a, b heldAddr) int { return strings.Compare(a.cluster+a.kind+a.id, b.cluster+b.kind+b.id) })
	return mine[rng.IntN(len(mine))], true
}

// heldIn lists what the model says is held in a cluster.
func (m *model) heldIn(cid string) []heldAddr {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []heldAddr
	for _, h := range m.held {
		if h.cluster == cid {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b heldAddr) int { return strings.Compare(a.kind+a.id, b.kind+b.id) })
	return out
}

func (m *model) forgetPrefix(prefix string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range m.held {
		if strings.HasPrefix(key, prefix) {
			delete(m.held, key)
		}
	}
}

func (m *model) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, key)
}

// step runs one random operation for worker w and returns its log line.
// Owners are the worker's own (their ids carry w), so the model of each owner
// is sequential; clusters and pools are shared by every worker.
func (m *model) step(rng *rand.Rand, w int, first bool) string {
	ctx := context.Background()
	st := m.sts[0]
	if rng.IntN(5) == 0 {
		st = m.sts[1]
	}
	ci := rng.IntN(modelClusters)
	if ci == modelClusters-1 && w != 0 {
		ci = rng.IntN(modelClusters - 1) // the last cluster is worker 0's alone: it empties, so destroys succeed
	}
	cid := m.clusterID(ci)
	k := rng.IntN(6)
	var what string
	var err error
	var notes []string
	op := rng.IntN(36)
	if first && rng.IntN(2) == 0 {
		op = 26 // the workers' first operations race on the transient cluster
	}
	switch op {
	case 0:
		what = "create cluster " + cid
		_, err = st.CreateCluster(ctx, m.cluster(ci))
		if err == nil || engine.Code(err) == engine.CodeConflict {
			err = nil
		}
	case 1:
		c := m.cluster(ci)
		c.InstanceCooldown = time.Duration(1+rng.IntN(48)) * time.Hour
		c.NodeCooldown = time.Duration(rng.IntN(72)) * time.Hour
		if rng.IntN(2) == 0 { // a gateway inside the instance prefix, maybe in a node block
			c.GatewayIPv6 = c.InstancePrefix.Addr().Next().Next()
			if rng.IntN(2) == 0 {
				c.GatewayIPv6 = netip.MustParseAddr(fmt.Sprintf("2001:db8:%x:1::ff", 0x10+ci))
			}
		} else {
			c.GatewayIPv6 = netip.MustParseAddr("fe80::1")
		}
		c.MTU = 1280 + rng.IntN(200)
		what = fmt.Sprintf("update cluster %s (instance cooldown %s, node %s, gateway %s)", cid, c.InstanceCooldown, c.NodeCooldown, c.GatewayIPv6)
		_, err = st.UpdateCluster(ctx, c)
	case 2:
		what = "delete cluster " + cid
		if ci == modelClusters-1 && rng.IntN(2) == 0 {
			// Worker 0 alone uses this cluster: it lets go of everything first
			// (a later round's destroy succeeds once the cooldowns pass).
			what = "drain and delete cluster " + cid
			for _, h := range m.heldIn(cid) {
				if h.kind == engine.OwnerSet {
					set, _, _ := strings.Cut(h.id, "#")
					if st.ReleaseSet(ctx, cid, set) == nil {
						m.forgetPrefix(cid + "/set/" + set + "#")
					}
				} else if ok, _ := st.Release(ctx, cid, engine.Owner{Kind: h.kind, ID: h.id}, 0); ok {
					m.forget(cid + "/" + h.kind + "/" + h.id)
				}
			}
		}
		err = st.DeleteCluster(ctx, cid, false)
		if err == nil {
			notes = m.clusterGone(cid)
		}
	case 3, 4:
		p := m.pool(rng, ci)
		what = fmt.Sprintf("create pool %s/%s %v exclude %v", cid, p.Name, p.CIDRs, p.Exclude)
		_, err = st.CreatePool(ctx, p)
		if err == nil || engine.Code(err) == engine.CodeConflict {
			err = nil
		}
		if err == nil && rng.IntN(2) == 0 {
			p2 := m.pool(rng, ci)
			p2.Name = p.Name
			what += fmt.Sprintf("; update to %v exclude %v", p2.CIDRs, p2.Exclude)
			_, err = st.UpdatePool(ctx, p2)
		}
	case 5:
		name := []string{"v4a", "v4b", "v6"}[rng.IntN(3)]
		what = "delete pool " + cid + "/" + name
		err = st.DeletePool(ctx, cid+"/"+name, false)
	case 6, 7:
		id := m.pick(rng, cid+"/node/", fmt.Sprintf("w%d-n", w), false)
		o := engine.Owner{Kind: engine.OwnerNode, ID: id, NodeID: id}
		var addr netip.Addr
		if rng.IntN(4) == 0 {
			addr = netip.MustParseAddr(fmt.Sprintf("2001:db8:%x::%x", 0x10+ci, 1+rng.IntN(12)))
		}
		what = fmt.Sprintf("allocate node %s in %s (claim %v)", o.ID, cid, addr)
		var r engine.AllocateResult
		r, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool(cid), Owner: o, Address: addr})
		if err == nil {
			notes = m.remember(cid+"/node/"+o.ID, heldAddr{cid, o.Kind, o.ID, r.Address})
		}
	case 8, 9:
		node := fmt.Sprintf("w%d-n%d", w, rng.IntN(3))
		id := m.pick(rng, cid+"/instance/", fmt.Sprintf("w%d-i", w), false)
		o := engine.Owner{Kind: engine.OwnerInstance, ID: id, InstanceID: id, NodeID: node}
		what = fmt.Sprintf("allocate instance %s on %s in %s", o.ID, node, cid)
		var r engine.AllocateResult
		r, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools(cid), Owner: o})
		if err == nil {
			notes = m.remember(cid+"/instance/"+o.ID, heldAddr{cid, o.Kind, o.ID, r.Address})
		}
	case 25:
		// A burst: several node, instance and environment IPv4 owners (one
		// perhaps twice) at once through one client, which gathers them
		// into shared statements (shareTake).
		type one struct {
			key string
			req engine.AllocateRequest
		}
		var burst []one
		v4 := cid + "/" + []string{"v4a", "v4b"}[rng.IntN(2)]
		for range 3 + rng.IntN(6) {
			switch rng.IntN(3) {
			case 0:
				env := fmt.Sprintf("w%d-e%d", w, rng.IntN(6))
				burst = append(burst, one{cid + "/env_ipv4/" + env, engine.AllocateRequest{Pool: testdb.Pool(v4),
					Owner: engine.Owner{Kind: engine.OwnerEnvIPv4, ID: env, EnvID: env}}})
			case 1:
				id := m.pick(rng, cid+"/node/", fmt.Sprintf("w%d-n", w), false)
				burst = append(burst, one{cid + "/node/" + id, engine.AllocateRequest{Pool: engine.ClusterPools(cid),
					Owner: engine.Owner{Kind: engine.OwnerNode, ID: id, NodeID: id}}})
			default:
				id := m.pick(rng, cid+"/instance/", fmt.Sprintf("w%d-i", w), false)
				burst = append(burst, one{cid + "/instance/" + id, engine.AllocateRequest{Pool: engine.ClusterPools(cid),
					Owner: engine.Owner{Kind: engine.OwnerInstance, ID: id, InstanceID: id, NodeID: fmt.Sprintf("w%d-n%d", w, rng.IntN(3))}}})
			}
		}
		what = fmt.Sprintf("burst of %d allocations in %s", len(burst), cid)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, b := range burst {
			wg.Go(func() {
				r, berr := st.Allocate(ctx, b.req)
				mu.Lock()
				defer mu.Unlock()
				if berr == nil {
					notes = append(notes, m.remember(b.key, heldAddr{cid, b.req.Owner.Kind, b.req.Owner.ID, r.Address})...)
				} else if err == nil {
					err = berr
				}
			})
		}
		wg.Wait()
	case 10:
		env := fmt.Sprintf("w%d-e%d", w, k%3)
		o := engine.Owner{Kind: engine.OwnerEnvIPv4, ID: env, EnvID: env}
		pool := cid + "/" + []string{"v4a", "v4b"}[rng.IntN(2)]
		what = fmt.Sprintf("allocate IPv4 for %s from %s", env, pool)
		var r engine.AllocateResult
		r, err = st.Allocate(ctx, engine.AllocateRequest{Pool: testdb.Pool(pool), Owner: o})
		if err == nil {
			notes = m.remember(cid+"/env_ipv4/"+env, heldAddr{cid, o.Kind, o.ID, r.Address})
		}
	case 11, 12, 13:
		// Release something this worker holds (any cluster), or now and then anything.
		kind := []string{engine.OwnerNode, engine.OwnerInstance, engine.OwnerEnvIPv4}[rng.IntN(3)]
		id := fmt.Sprintf("w%d-%c%d", w, kind[0], k)
		if h, ok := m.heldBy(rng, fmt.Sprintf("w%d-", w)); ok && h.kind != engine.OwnerSet && rng.IntN(8) != 0 {
			kind, id, cid = h.kind, h.id, h.cluster
		}
		what = fmt.Sprintf("release %s %s in %s", kind, id, cid)
		var ok bool
		ok, err = st.Release(ctx, cid, engine.Owner{Kind: kind, ID: id}, 0)
		if ok {
			m.forget(cid + "/" + kind + "/" + id)
		}
	case 29:
		// A saved plan applied, maybe late: the node's hold (taken by an
		// earlier hold, rounds ago perhaps, the clock moved since) confirmed
		// on exactly its address, while shrinks, destroys and others run.
		o := engine.Owner{Kind: engine.OwnerNode, ID: fmt.Sprintf("w%d-n%d", w, k), NodeID: fmt.Sprintf("w%d-n%d", w, k)}
		var held netip.Prefix
		if m.db.QueryRow(ctx, `SELECT address FROM ipam_allocations WHERE cluster_id = $1 AND owner_kind = 'node' AND owner_id = $2
			AND state = 'reserved'`, cid, o.ID).Scan(&held) != nil {
			what = fmt.Sprintf("apply a saved plan for node %s in %s: no hold", o.ID, cid)
			break
		}
		what = fmt.Sprintf("apply a saved plan for node %s in %s at %s", o.ID, cid, held.Addr())
		var r engine.AllocateResult
		r, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool(cid), Owner: o, Address: held.Addr()})
		if err == nil {
			notes = m.remember(cid+"/node/"+o.ID, heldAddr{cid, o.Kind, o.ID, r.Address})
		}
	case 30:
		// A Terraform replacement of a node this worker holds, in the
		// create-first order: the plan marks the allocation, the create
		// keeps it or claims another address (the old one cools for the
		// node), and the old object's destroy, with its generation,
		// releases nothing.
		h, ok := m.heldBy(rng, fmt.Sprintf("w%d-n", w))
		if !ok || h.kind != engine.OwnerNode {
			what = "replace a node: none held"
			break
		}
		o := engine.Owner{Kind: engine.OwnerNode, ID: h.id, NodeID: h.id}
		var old engine.Allocation
		if old, err = st.GetActive(ctx, h.cluster, o.Kind, o.ID); err == nil {
			old, err = st.MarkReplacement(ctx, h.cluster, o, old.Generation, time.Hour)
		}
		if err != nil {
			what = fmt.Sprintf("replace node %s in %s: mark", o.ID, h.cluster)
			if errors.Is(err, engine.ErrNotFound) {
				err = nil // released or reclaimed meanwhile
			}
			break
		}
		var addr netip.Addr
		if rng.IntN(2) == 0 {
			addr = netip.MustParseAddr(fmt.Sprintf("2001:db8:%x::%x", 0x10+ci, 1+rng.IntN(12)))
			if h.cluster != cid {
				addr = netip.Addr{}
			}
		}
		what = fmt.Sprintf("replace node %s in %s (claim %v)", o.ID, h.cluster, addr)
		var r engine.AllocateResult
		r, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool(h.cluster), Owner: o, Address: addr})
		if err != nil {
			// The mark stands for its hour: the manager's next create of
			// the node, this worker's plain allocation included, is the
			// replacement's create again and may move it to the address it
			// claims (the old one cooling for it), as Terraform's retry of
			// the create would. The model no longer knows where the node is
			// until it is told again.
			m.forget(h.cluster + "/node/" + o.ID)
			break
		}
		if r.Address != old.Address {
			m.forget(h.cluster + "/node/" + o.ID) // the move released the old address
		}
		notes = m.remember(h.cluster+"/node/"+o.ID, heldAddr{h.cluster, o.Kind, o.ID, r.Address})
		if released, rerr := st.Release(ctx, h.cluster, o, old.Generation); rerr != nil || released {
			notes = append(notes, fmt.Sprintf("the replaced object's destroy of node %s (generation %d) released %v (%v); the create holds %s generation %d",
				o.ID, old.Generation, released, rerr, r.Address, r.Generation))
		}
	case 31:
		what, notes, err = m.replaceSet(ctx, cid, fmt.Sprintf("w%d-s%d", w, k%2), engine.Owner{InstanceID: fmt.Sprintf("w%d-i%d", w, k%2)})
	case 32:
		what, notes, err = m.replaceBlocks(ctx, cid, fmt.Sprintf("w%d-n%d", w, rng.IntN(3)), rng.IntN(2) == 0)
	case 33:
		// A set key's plan-time hold, then the apply of that plan: the key
		// added on exactly the held address.
		set := fmt.Sprintf("w%d-s%d", w, k%2)
		labels := engine.Owner{ID: set, InstanceID: fmt.Sprintf("w%d-i%d", w, k%2)}
		e := engine.SetEntry{Key: fmt.Sprintf("k%d", rng.IntN(3)), Pools: []string{cid + "/v4a", cid + "/v4b"}}
		if rng.IntN(2) == 0 {
			e.Pools = []string{cid + "/instance"}
		}
		what = fmt.Sprintf("hold then add set %s key %s in %s", set, e.Key, cid)
		var held engine.SetMember
		if held, err = st.ReserveSetEntry(ctx, cid, labels, e, time.Hour); err != nil {
			break
		}
		e.Address = held.Address
		var members []engine.SetMember
		if members, err = st.ApplySet(ctx, engine.SetChange{ClusterID: cid, Owner: labels, Add: []engine.SetEntry{e}}); err != nil {
			break
		}
		for _, mem := range members {
			if mem.Key == e.Key && mem.Address != held.Address {
				notes = append(notes, fmt.Sprintf("set %s key %s was held at %s and added at %s", set, e.Key, held.Address, mem.Address))
			}
			notes = append(notes, m.remember(cid+"/set/"+mem.Owner.ID, heldAddr{cid, engine.OwnerSet, mem.Owner.ID, mem.Address})...)
		}
	case 20:
		o := engine.Owner{Kind: engine.OwnerNode, ID: fmt.Sprintf("w%d-n%d", w, k), NodeID: fmt.Sprintf("w%d-n%d", w, k)}
		ttl := time.Duration(10+rng.IntN(120)) * time.Minute
		what = fmt.Sprintf("hold node %s in %s for %s", o.ID, cid, ttl)
		var h engine.Hold
		h, err = st.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool(cid), Owner: o}, ttl)
		notes = lostHoldNotes(h, o)
	case 14:
		o := engine.Owner{Kind: engine.OwnerInstance, ID: fmt.Sprintf("w%d-i%d", w, k), InstanceID: fmt.Sprintf("w%d-i%d", w, k),
			NodeID: fmt.Sprintf("w%d-n%d", w, rng.IntN(3))}
		what = fmt.Sprintf("hold instance %s on %s in %s", o.ID, o.NodeID, cid)
		var h engine.Hold
		h, err = st.Reserve(ctx, engine.AllocateRequest{Pool: engine.ClusterPools(cid), Owner: o}, time.Duration(10+rng.IntN(120))*time.Minute)
		notes = lostHoldNotes(h, o)
	case 15:
		node := fmt.Sprintf("w%d-n%d", w, rng.IntN(3))
		demand := int64(rng.IntN(40))
		sc := engine.BlockScaling{PrefixLength: 125, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 4}
		if rng.IntN(2) == 0 {
			sc.Demand = &demand
		}
		what = fmt.Sprintf("scale blocks of %s in %s (demand %v)", node, cid, sc.Demand != nil)
		_, err = st.ScaleNodeBlocks(ctx, cid, node, sc)
	case 16:
		node := fmt.Sprintf("w%d-n%d", w, rng.IntN(3))
		what = fmt.Sprintf("release blocks of %s in %s", node, cid)
		err = st.ReleaseNodeBlocks(ctx, cid, node)
	case 17:
		set := fmt.Sprintf("w%d-s%d", w, k%2)
		// A set is labelled with an instance, one that may have an address
		// of its own: the listing by instance finds both.
		ch := engine.SetChange{ClusterID: cid, Owner: engine.Owner{ID: set, InstanceID: fmt.Sprintf("w%d-i%d", w, k%2)}}
		// A key the set holds may instead be restated: given pools that
		// its address's pool is among (it must be kept) or not (the whole
		// change must be refused).
		before, _ := st.Peek().GetSet(ctx, cid, set) // a look that confirms nothing
		fits := map[string]bool{}
		restateOnly := len(before) > 0 && rng.IntN(2) == 0 // a change of its held keys' requests alone
		for key := 0; key < 3; key++ {
			name := fmt.Sprintf("k%d", key)
			i := slices.IndexFunc(before, func(mem engine.SetMember) bool { return mem.Key == name })
			if restateOnly && i < 0 {
				continue
			}
			choice := rng.IntN(3)
			if i >= 0 && (restateOnly || rng.IntN(2) == 0) {
				choice = 2 // a key the set holds is restated more often than not
			}
			switch choice {
			case 0:
				ch.Add = append(ch.Add, engine.SetEntry{Key: name, Pools: []string{cid + "/v4a", cid + "/v4b"}})
			case 1:
				// The instance pool alone half the time: v6 rarely exists,
				// and a set that holds keys can restate them.
				pools := []string{cid + "/v6", cid + "/instance"}
				ch.Add = append(ch.Add, engine.SetEntry{Key: name, Pools: pools[rng.IntN(2):]})
			case 2:
				if i >= 0 {
					// Pools that agree with each other: the key's own group
					// (reordered, or one of it), or, one time in three, the
					// other family's.
					pools := []string{cid + "/v4b", cid + "/v4a"}
					if v6 := before[i].Address.Is6(); v6 != (rng.IntN(3) == 0) {
						pools = []string{cid + "/instance", cid + "/v6"}
					}
					rng.Shuffle(len(pools), func(a, b int) { pools[a], pools[b] = pools[b], pools[a] })
					pools = pools[:1+rng.IntN(len(pools))]
					ch.Restate = append(ch.Restate, engine.SetEntry{Key: name, Pools: pools})
					fits[name] = slices.Contains(pools, before[i].PoolID)
					break
				}
				fallthrough
			default:
				ch.Remove = append(ch.Remove, name)
			}
		}
		what = fmt.Sprintf("apply set %s in %s (+%d -%d)", set, cid, len(ch.Add), len(ch.Remove))
		if len(ch.Restate) > 0 {
			what = fmt.Sprintf("restate+apply set %s in %s (+%d -%d, restated keys that fit: %v)", set, cid, len(ch.Add), len(ch.Remove), fits)
		}
		var members []engine.SetMember
		members, err = st.ApplySet(ctx, ch)
		if err != nil && len(ch.Restate) > 0 {
			members, _ = st.Peek().GetSet(ctx, cid, set)
		}
		notes = append(notes, restateNotes(ch, fits, before, members, err)...)
		if err == nil {
			for _, r := range ch.Remove {
				m.forget(cid + "/set/" + set + "#" + r)
			}
			for _, mem := range members {
				notes = append(notes, m.remember(cid+"/set/"+mem.Owner.ID, heldAddr{cid, engine.OwnerSet, mem.Owner.ID, mem.Address})...)
			}
		}
	case 18:
		set := fmt.Sprintf("w%d-s%d", w, k%2)
		what = fmt.Sprintf("release set %s in %s", set, cid)
		err = st.ReleaseSet(ctx, cid, set)
		if err == nil {
			m.forgetPrefix(cid + "/set/" + set + "#")
		}
	case 21:
		o := engine.Owner{Kind: engine.OwnerNode, ID: fmt.Sprintf("w%d-n%d", w, k), NodeID: fmt.Sprintf("w%d-n%d", w, k)}
		ttl := time.Duration(10+rng.IntN(120)) * time.Minute
		what = fmt.Sprintf("hold node %s in %s for %s", o.ID, cid, ttl)
		var h engine.Hold
		h, err = st.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool(cid), Owner: o}, ttl)
		notes = lostHoldNotes(h, o)
	case 23:
		// The scheduler's way (package ipam): an instance allocated inside a
		// caller's transaction, with a row of the caller's own, committed or
		// rolled back. A rollback must leave nothing the owner holds.
		node := fmt.Sprintf("w%d-n%d", w, rng.IntN(3))
		id := m.pick(rng, cid+"/instance/", fmt.Sprintf("w%d-i", w), false)
		o := engine.Owner{Kind: engine.OwnerInstance, ID: id, InstanceID: id, NodeID: node}
		commit := rng.IntN(2) == 0
		what = fmt.Sprintf("place instance %s on %s in %s in a caller transaction (commit %v)", id, node, cid, commit)
		key := cid + "/instance/" + id
		m.mu.Lock()
		_, heldBefore := m.held[key]
		m.mu.Unlock()
		var tx pgx.Tx
		if tx, err = m.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}); err != nil {
			break
		}
		var r engine.AllocateResult
		r, err = st.InTx(tx).Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools(cid), Owner: o})
		if err == nil {
			_, err = tx.Exec(ctx, `INSERT INTO model_placements (instance_id, address) VALUES ($1, $2)
				ON CONFLICT (instance_id) DO UPDATE SET address = EXCLUDED.address`, cid+"/"+id, netip.PrefixFrom(r.Address, 128))
		}
		if err == nil && commit {
			if err = tx.Commit(ctx); err == nil {
				notes = m.remember(key, heldAddr{cid, o.Kind, o.ID, r.Address})
			}
			break
		}
		_ = tx.Rollback(ctx)
		if a, gerr := st.GetActive(ctx, cid, engine.OwnerInstance, id); gerr == nil && !heldBefore {
			notes = append(notes, fmt.Sprintf("a rolled-back placement left %s active for instance %s", a.Address, key))
		}
	case 34:
		// An operator's release (ipamctl release --force: a state may hold
		// it) of something this worker holds, by its owner or its address.
		h, ok := m.heldBy(rng, fmt.Sprintf("w%d-", w))
		if !ok {
			what = "nothing held for an operator to release"
			break
		}
		req := engine.ReleaseRequest{ClusterID: h.cluster, Reason: "model test", Force: true}
		if rng.IntN(2) == 0 {
			req.Address = h.addr
		} else {
			req.OwnerKind, req.OwnerID = h.kind, h.id
		}
		what = fmt.Sprintf("operator release of %s %s (%s) in %s", h.kind, h.id, h.addr, h.cluster)
		var res engine.ReleaseResult
		res, err = engine.OperatorOf(st).ReleaseAllocation(ctx, req)
		switch {
		case err == nil && (res.Owner.Kind != h.kind || res.Owner.ID != h.id || res.Address != h.addr):
			notes = append(notes, fmt.Sprintf("%s released %s %s at %s", what, res.Owner.Kind, res.Owner.ID, res.Address))
		case err == nil && res.AlreadyReleased:
			notes = append(notes, fmt.Sprintf("%s: already released, though the model holds it", what))
		case err == nil:
			m.forget(h.cluster + "/" + h.kind + "/" + h.id)
		}
	case 35:
		// An operator's expiry of a plan's hold (ipamctl expire-hold) of
		// one of this worker's node owners, by owner or by the address a
		// look finds: the plan that took it learns of its loss only if
		// another owner or manager takes it (lostHoldNotes, at its next
		// hold); nothing it was told it holds as an allocation changes.
		o := fmt.Sprintf("w%d-n%d", w, k)
		req := engine.HoldRequest{ClusterID: cid, OwnerKind: engine.OwnerNode, OwnerID: o, Reason: "model test"}
		var held netip.Prefix
		if m.db.QueryRow(ctx, `SELECT address FROM ipam_allocations WHERE cluster_id = $1 AND owner_kind = 'node' AND owner_id = $2
			AND state = 'reserved'`, cid, o).Scan(&held) == nil && rng.IntN(2) == 0 {
			req = engine.HoldRequest{ClusterID: cid, Address: held.Addr(), Reason: "model test"}
		}
		what = fmt.Sprintf("operator expiry of node %s's hold in %s", o, cid)
		var res engine.ExpireHoldResult
		res, err = engine.OperatorOf(st).ExpireHold(ctx, req)
		switch {
		case err == nil && res.Owner.ID != o && req.Address == (netip.Addr{}):
			notes = append(notes, fmt.Sprintf("%s expired %s %s's hold", what, res.Owner.Kind, res.Owner.ID))
		case err == nil && (res.State != engine.StateReserved || !res.HoldExpired):
			notes = append(notes, fmt.Sprintf("%s answered %s (expired %v)", what, res.State, res.HoldExpired))
		}
	case 22:
		// Stale-leak reclaim: addresses no refresh has seen for some days
		// go back to cooling. Applied only by worker 0 in its own cluster
		// (so that no other worker's allocation races the model's record of
		// what was reclaimed); the others run it dry.
		apply := w == 0 && ci == modelClusters-1
		days := 1 + rng.IntN(4)
		what = fmt.Sprintf("reclaim addresses unseen for %dd in %s (apply %v)", days, cid, apply)
		var rep engine.LeakReport
		if rep, err = engine.OperatorOf(st).FindStaleLeaks(ctx, cid, nil, days); err == nil {
			var res []engine.ReclaimResult
			res, err = engine.OperatorOf(st).Reclaim(ctx, rep, engine.ReclaimOptions{Apply: apply})
			for _, r := range res {
				if r.Outcome == engine.OutcomeReclaimed {
					m.forget(cid + "/" + r.Leak.OwnerKind + "/" + r.Leak.OwnerID)
				}
				m.mu.Lock()
				m.outcomes["reclaim addresses: "+r.Outcome]++
				m.mu.Unlock()
			}
		}
	case 26, 27, 28:
		what, notes, err = m.transientStep(ctx, rng, st, w, k)
	case 24:
		// Usage read from the counters, and a recount while the other
		// workers write: the counters (active and cooling) kept by the
		// writers must already hold the real count, so the recount finds
		// nothing to correct.
		what = "usage and recount of " + cid
		if _, err = engine.OperatorOf(st).PoolUsage(ctx, cid); err == nil || errors.Is(err, engine.ErrNotFound) {
			var fixed []engine.Recount
			fixed, err = engine.OperatorOf(st).RecountUsage(ctx, cid)
			for _, f := range fixed {
				notes = append(notes, fmt.Sprintf("the usage counters of %s said %d active and %d cooling, a real count found %d and %d",
					f.PoolID, f.Was, f.CoolingWas, f.Active, f.Cooling))
			}
		}
	default:
		// An exact claim of an instance address somewhere in the instance
		// prefix: below the counter, in a node block, or above the counter.
		o := engine.Owner{Kind: engine.OwnerInstance, ID: fmt.Sprintf("w%d-i%d", w, k), InstanceID: fmt.Sprintf("w%d-i%d", w, k)}
		addr := netip.MustParseAddr(fmt.Sprintf("2001:db8:%x:1::%x", 0x10+ci, 1+rng.IntN(255)))
		what = fmt.Sprintf("claim instance %s = %s in %s", o.ID, addr, cid)
		var r engine.AllocateResult
		r, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools(cid), Owner: o, Address: addr})
		if err == nil {
			notes = m.remember(cid+"/instance/"+o.ID, heldAddr{cid, o.Kind, o.ID, r.Address})
		}
	}
	verb := strings.Join(strings.Fields(what)[:2], " ")
	outcome := "ok"
	if err != nil {
		outcome = engine.Code(err)
		if outcome == "" {
			outcome = "other"
		}
	}
	m.mu.Lock()
	m.outcomes[verb+": "+outcome]++
	m.mu.Unlock()
	line := what
	if err != nil {
		line += ": " + err.Error()
		if !expected(err) {
			notes = append(notes, "unexpected error from "+what+": "+err.Error())
		}
	}
	for _, n := range notes {
		m.t.Errorf("%s", n)
	}
	return line
}

// replaceSet is a Terraform replacement of a set this worker holds, in the
// create-first order, by the manager that made its members: the plan marks
// each member at its generation, the create takes each over at its address
// (also a key in a later pool of its list while an earlier one has room),
// and the old object's destroy, with the old generations, releases nothing.
func (m *model) replaceSet(ctx context.Context, cid, set string, labels engine.Owner) (string, []string, error) {
	before, err := m.sts[0].Peek().GetSet(ctx, cid, set)
	if err != nil || len(before) == 0 {
		return "no set to replace: " + set + " in " + cid + " holds none", nil, nil
	}
	var st *engine.Client
	for _, c := range m.sts {
		if !slices.ContainsFunc(before, func(mem engine.SetMember) bool { return mem.Actor != c.Actor() }) {
			st = c
		}
	}
	if st == nil {
		return "no set to replace: " + set + " in " + cid + " has members of two managers", nil, nil
	}
	what := fmt.Sprintf("replace set %s in %s (%d keys)", set, cid, len(before))
	gens := map[string]int64{}
	labels.ID = set
	ch := engine.SetChange{ClusterID: cid, Owner: labels}
	for _, mem := range before {
		gens[mem.Key] = mem.Generation
		e := engine.SetEntry{Key: mem.Key, Pools: mem.Request.Pools, Family: mem.Request.Family}
		if mem.Request.Address {
			e.Address, e.Requested = mem.Address, true
		}
		ch.Add = append(ch.Add, e)
	}
	if err := st.MarkSetReplacement(ctx, cid, set, gens, time.Hour); err != nil {
		return what + ": mark", nil, err
	}
	after, err := st.ApplySet(ctx, ch)
	if err != nil {
		// The marks stand for their hour: the model no longer knows where
		// the keys are until it is told again (see the node's replacement).
		m.forgetPrefix(cid + "/set/" + set + "#")
		return what, nil, err
	}
	var notes []string
	for _, mem := range before {
		i := slices.IndexFunc(after, func(a engine.SetMember) bool { return a.Key == mem.Key })
		if i < 0 || after[i].Address != mem.Address || after[i].Generation <= mem.Generation {
			notes = append(notes, fmt.Sprintf("the replacement of set %s moved or lost key %s: %s at generation %d, then %+v",
				set, mem.Key, mem.Address, mem.Generation, after))
		}
	}
	for _, mem := range after {
		notes = append(notes, m.remember(cid+"/set/"+mem.Owner.ID, heldAddr{cid, engine.OwnerSet, mem.Owner.ID, mem.Address})...)
	}
	if err := st.ReleaseSetAt(ctx, cid, set, gens); err != nil {
		notes = append(notes, fmt.Sprintf("the replaced set %s's destroy: %v", set, err))
	}
	return what, notes, nil
}

// replaceBlocks is a Terraform replacement of a node's blocks (this
// worker's node) by the manager whose mark holds. Create first, the create
// takes the blocks over, and the old object's destroy, with the old
// generation, releases nothing. Destroy first, the marked destroy either
// releases the blocks (no instance uses them) or leaves them all for the
// create to take over; it is never refused.
func (m *model) replaceBlocks(ctx context.Context, cid, node string, destroyFirst bool) (string, []string, error) {
	what := fmt.Sprintf("replace blocks of %s in %s", node, cid)
	if destroyFirst {
		what += ", destroy first"
	}
	old, err := m.sts[0].GetNodeBlocks(ctx, cid, node)
	if err != nil {
		return "no blocks to replace: " + node + " in " + cid + " has none", nil, nil
	}
	var st *engine.Client
	for _, c := range m.sts {
		if err := c.MarkNodeBlocksReplacement(ctx, cid, node, old.Generation, time.Hour); err == nil {
			st = c
			break
		} else if !errors.Is(err, engine.ErrNotFound) {
			return what + ": mark", nil, err
		}
	}
	if st == nil {
		return "no blocks to replace: " + node + " in " + cid + " released or taken meanwhile", nil, nil
	}
	var notes []string
	takeOver := true
	if destroyFirst {
		released, err := st.ReleaseNodeBlocksAt(ctx, cid, node, old.Generation)
		if err != nil {
			notes = append(notes, fmt.Sprintf("the marked destroy of %s's blocks (generation %d) was refused: %v", node, old.Generation, err))
		}
		takeOver = !released
	}
	now, err := st.CreateNodeBlocks(ctx, cid, node, old.Scaling)
	if err != nil {
		return what, notes, err
	}
	if takeOver && (now.Generation <= old.Generation || !slices.ContainsFunc(now.Blocks, func(b netip.Prefix) bool { return slices.Contains(old.Blocks, b) })) {
		notes = append(notes, fmt.Sprintf("the replacement of %s's blocks took none of them over: %v at generation %d, then %v at %d",
			node, old.Blocks, old.Generation, now.Blocks, now.Generation))
	}
	if !destroyFirst {
		if released, err := st.ReleaseNodeBlocksAt(ctx, cid, node, old.Generation); err != nil || released {
			notes = append(notes, fmt.Sprintf("the replaced blocks of %s (generation %d): their destroy released %v (%v)", node, old.Generation, released, err))
		}
	}
	return what, notes, nil
}

// restateNotes checks a set change's restated keys against what the set
// held before it (the worker's own set: nothing else changes it): a key
// whose address's pool its new pools list is kept at its address with the
// new request stored; one whose pool they leave out refuses the whole change
// (nothing restated is ever moved), and a change that fails keeps the old
// request, which the read after it (after) shows.
func restateNotes(ch engine.SetChange, fits map[string]bool, before, after []engine.SetMember, err error) []string {
	var notes []string
	misfit := slices.Contains(slices.Collect(maps.Values(fits)), false)
	switch {
	case err == nil && misfit:
		notes = append(notes, fmt.Sprintf("apply set %s restated a key whose address its new pools leave out (%v): it must be refused", ch.Owner.ID, fits))
	case err != nil && !misfit && strings.Contains(err.Error(), "does not satisfy its new request"):
		notes = append(notes, fmt.Sprintf("apply set %s refused a restate that its addresses satisfy (%v): %v", ch.Owner.ID, fits, err))
	}
	for _, e := range ch.Restate {
		i := slices.IndexFunc(before, func(m engine.SetMember) bool { return m.Key == e.Key })
		j := slices.IndexFunc(after, func(m engine.SetMember) bool { return m.Key == e.Key })
		switch {
		case err != nil:
			// after is a read made after the refusal: the old request stays.
			if j >= 0 && after[j].Generation == before[i].Generation && !slices.Equal(after[j].Request.Pools, before[i].Request.Pools) {
				notes = append(notes, fmt.Sprintf("apply set %s was refused (%v), and key %s's request changed: %v, then %v",
					ch.Owner.ID, err, e.Key, before[i].Request.Pools, after[j].Request.Pools))
			}
		case j < 0:
			notes = append(notes, fmt.Sprintf("apply set %s restated key %s and no longer holds it", ch.Owner.ID, e.Key))
		case after[j].Address != before[i].Address || after[j].Generation != before[i].Generation:
			notes = append(notes, fmt.Sprintf("apply set %s restated key %s and moved it: %s (generation %d), then %s (%d)",
				ch.Owner.ID, e.Key, before[i].Address, before[i].Generation, after[j].Address, after[j].Generation))
		case !slices.Equal(after[j].Request.Pools, e.Pools):
			notes = append(notes, fmt.Sprintf("apply set %s restated key %s with pools %v, and a read gives %v", ch.Owner.ID, e.Key, e.Pools, after[j].Request.Pools))
		}
	}
	return notes
}

// lostHoldNotes checks the lost hold a Reserve reports: an address another
// owner took, at a database time.
func lostHoldNotes(h engine.Hold, o engine.Owner) []string {
	if l := h.Lost; l != nil && (l.TakenBy == o.Kind+" "+o.ID || !l.Address.IsValid() || l.At.IsZero()) {
		return []string{fmt.Sprintf("a hold of %s %s reported a lost hold it did not lose: %+v", o.Kind, o.ID, *l)}
	}
	return nil
}

// pool draws an operator pool of cluster i: private or public IPv4 with gaps
// and exclusions, or IPv6 inside (or, to be refused, outside) the cluster.
func (m *model) pool(rng *rand.Rand, i int) engine.Pool {
	cid := m.clusterID(i)
	switch rng.IntN(4) {
	case 0: // private IPv4: may repeat across clusters
		p := engine.Pool{ClusterID: cid, Name: "v4a", Cooldown: time.Duration(rng.IntN(3)) * time.Hour,
			CIDRs: []netip.Prefix{pfx("10.0.0.0/29")}}
		if p.Cooldown == 0 {
			p.Cooldown = engine.NoCooldown // a pool without one (zero is the default)
		}
		if rng.IntN(2) == 0 {
			p.CIDRs = append(p.CIDRs, pfx("10.0.1.0/30"))
		}
		if rng.IntN(2) == 0 {
			p.Exclude = []netip.Prefix{pfx("10.0.0.2/31")}
		}
		return p
	case 1: // public IPv4: one cluster only
		p := engine.Pool{ClusterID: cid, Name: "v4b", Cooldown: time.Hour, CIDRs: []netip.Prefix{pfx(fmt.Sprintf("192.0.2.%d/29", 8*rng.IntN(2)))}}
		if rng.IntN(2) == 0 {
			p.Exclude = []netip.Prefix{pfx(fmt.Sprintf("192.0.2.%d/32", 8*rng.IntN(2)+3))}
		}
		return p
	case 2: // IPv6 inside the cluster
		return engine.Pool{ClusterID: cid, Name: "v6", Cooldown: time.Hour, CIDRs: []netip.Prefix{pfx(fmt.Sprintf("2001:db8:%x:9::/124", 0x10+i))}}
	default: // IPv6 in another cluster's prefix or node prefix: must be refused
		other := (i + 1 + rng.IntN(modelClusters-1)) % modelClusters
		b := pfx(fmt.Sprintf("2001:db8:%x:9::/124", 0x10+other))
		if rng.IntN(2) == 0 {
			b = m.cluster(other).NodePrefix
		}
		return engine.Pool{ClusterID: cid, Name: "v6", Cooldown: time.Hour, CIDRs: []netip.Prefix{b}}
	}
}

// clusterGone: a non-forced destroy succeeded, so nobody may hold anything in it.
func (m *model) clusterGone(cid string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var bad []string
	for key, h := range m.held {
		if h.cluster == cid {
			bad = append(bad, fmt.Sprintf("cluster %s was destroyed while %s was told it holds %s", cid, key, h.addr))
			delete(m.held, key)
		}
	}
	return bad
}

// check runs the global invariants after the given number of rounds, and
// every third round the check of the listings (checkListings, which reads
// more than the rest of the check).
func (m *model) check(rounds int) []string {
	ctx := context.Background()
	var bad []string
	rep, err := engine.OperatorOf(m.sts[0]).Check(ctx, "")
	if err != nil {
		return []string{"check: " + err.Error()}
	}
	for _, v := range rep.Violations {
		bad = append(bad, v.String())
	}
	var overlaps int64
	if err := m.raw.QueryRow(ctx, `SELECT count(*) FROM ipam_pools p JOIN ipam_pools q ON p.cluster_id < q.cluster_id
		JOIN LATERAL unnest(p.cidrs) a ON true JOIN LATERAL unnest(q.cidrs) b ON true
		WHERE family(a) = 6 AND a && b`).Scan(&overlaps); err != nil {
		bad = append(bad, err.Error())
	} else if overlaps > 0 {
		bad = append(bad, fmt.Sprintf("%d IPv6 pool blocks overlap across clusters", overlaps))
	}
	var dug int64
	if err := m.raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations a JOIN ipam_events e ON e.allocation_id = a.id
		WHERE e.type = 'allocation.inherited' AND e.generation < a.generation AND a.state IN ('active', 'reserved')
			AND split_part(e.data->>'from_pool', '/', 1) <> a.cluster_id
			AND (e.data->>'reusable_at')::timestamptz > a.allocated_at`).Scan(&dug); err != nil {
		bad = append(bad, err.Error())
	} else if dug > 0 {
		bad = append(bad, fmt.Sprintf("%d addresses inherited from another cluster were handed out inside their cooldown", dug))
	}
	if rounds%3 == 0 {
		bad = append(bad, m.checkListings(ctx, rounds/3)...)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, h := range m.held {
		var n int64
		if err := m.raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE cluster_id = $1 AND owner_kind = $2
			AND owner_id = $3 AND address = $4 AND state = 'active'`, h.cluster, h.kind, h.id, netip.PrefixFrom(h.addr, h.addr.BitLen())).Scan(&n); err != nil {
			bad = append(bad, err.Error())
		} else if n != 1 {
			bad = append(bad, fmt.Sprintf("lost: %s was told it holds %s, which is not active for it", key, h.addr))
		}
	}
	if m.t.Failed() {
		bad = append(bad, "an operation failed (see above)")
	}
	return bad
}
