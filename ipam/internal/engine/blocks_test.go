package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

func scaling(demand int64, maxBlocks int) engine.BlockScaling {
	sc := engine.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: maxBlocks}
	if demand >= 0 {
		sc.Demand = &demand
	}
	return sc
}

func TestBlockScalingMath(t *testing.T) {
	t.Parallel()
	sc := scaling(-1, 100)
	if sc.BatchSize() != 16 {
		t.Fatal(sc.BatchSize())
	}
	// The seed's numbers: B = 16, mf = 0.5: 25 used gives 3 blocks, 48 addresses.
	for _, tc := range []struct {
		used int64
		want int
	}{{0, 1}, {7, 1}, {8, 1}, {9, 2}, {25, 3}, {40, 3}, {41, 4}, {1000, 63}} {
		t.Run(fmt.Sprintf("TargetBlocks(%d)", tc.used), func(t *testing.T) {
			t.Parallel()
			if got := sc.TargetBlocks(tc.used); got != tc.want {
				t.Errorf("TargetBlocks(%d) = %d, want %d", tc.used, got, tc.want)
			}
		})
	}
	// A jump of many batches in one step, and the cap.
	if got := scaling(-1, 10).TargetBlocks(1000); got != 10 {
		t.Errorf("capped target %d", got)
	}
	if !sc.Surplus(64, 39) || sc.Surplus(64, 40) {
		t.Error("shrinking must start only past Mf x B = 24 free")
	}
	bad := []struct {
		name string
		sc   engine.BlockScaling
	}{
		{"max_free below min_free + 1", engine.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.4, MaxBlocks: 4}},
		{"negative min_free", engine.BlockScaling{PrefixLength: 124, MinFree: -1, MaxFree: 1.5, MaxBlocks: 4}},
		{"prefix length 64", engine.BlockScaling{PrefixLength: 64, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 4}},
		{"max_blocks 0", engine.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 0}},
		// Sizes past int64: block size x max_blocks must be judged without overflow.
		{"/65 (2^63 addresses a block)", engine.BlockScaling{PrefixLength: 65, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 1}},
		{"/66 x 2", engine.BlockScaling{PrefixLength: 66, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 2}},
		{"/100 x 16", engine.BlockScaling{PrefixLength: 100, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 16}},
		{"/120 x MaxInt", engine.BlockScaling{PrefixLength: 120, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: math.MaxInt}},
	}
	for _, tc := range bad {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.sc.Validate() == nil {
				t.Errorf("%+v accepted", tc.sc)
			}
		})
	}
}

func TestNodeBlocksGrowShrinkAndAllocate(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	c := mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	nb, err := st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(25, 16))
	if err != nil {
		t.Fatal(err)
	}
	if len(nb.Blocks) != 3 || nb.Capacity != 48 || nb.TargetBlocks != 3 {
		t.Fatalf("demand 25: %+v", nb)
	}
	for _, b := range nb.Blocks {
		if b.Bits() != 124 || !engine.PrefixContains(c.InstancePrefix, b) || b.Masked() != b {
			t.Fatalf("block %s is not an aligned /124 of %s", b, c.InstancePrefix)
		}
	}
	// Grow many batches in one step.
	if nb, err = st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(100, 16)); err != nil || len(nb.Blocks) != 7 || len(nb.Added) != 4 {
		t.Fatalf("demand 100: %+v %v", nb, err)
	}
	// Instances on the node land in its blocks.
	inBlocks := func(a netip.Addr, blocks []netip.Prefix) bool {
		for _, b := range blocks {
			if b.Contains(a) {
				return true
			}
		}
		return false
	}
	first, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: engine.Owner{Kind: engine.OwnerInstance, ID: "i0", InstanceID: "i0", NodeID: "n1"}})
	if err != nil || !inBlocks(first.Address, nb.Blocks) {
		t.Fatalf("instance on n1: %v %v", first.Address, err)
	}
	// Shrink: demand 0 -> target 1. The block holding i0 is never released,
	// the empty surplus only on the second scaling that sees it empty.
	if nb, err = st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(0, 16)); err != nil || len(nb.Released) != 0 || len(nb.Blocks) != 7 {
		t.Fatalf("first shrink scaling released early: %+v %v", nb, err)
	}
	if nb, err = st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(0, 16)); err != nil || len(nb.Released) != 6 || len(nb.Blocks) != 1 {
		t.Fatalf("second shrink scaling: %+v %v", nb, err)
	}
	if !nb.Blocks[0].Contains(first.Address) {
		t.Fatalf("the block holding %s was released", first.Address)
	}
	var cooling int
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM ipam_node_blocks WHERE state = 'cooling' AND reusable_at > now() + interval '23 hours'`).Scan(&cooling)
	if cooling != 6 {
		t.Fatalf("%d released blocks cooling for the instance cooldown, want 6", cooling)
	}
	// Filling the last block grows the node in the same transaction.
	for i := 1; i <= 20; i++ {
		r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: engine.Owner{Kind: engine.OwnerInstance, ID: fmt.Sprint("i", i), NodeID: "n1"}})
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		got, _ := st.GetNodeBlocks(ctx, "c1", "n1")
		if !inBlocks(r.Address, got.Blocks) {
			t.Fatalf("%s outside n1's blocks %v", r.Address, got.Blocks)
		}
		// The answer names the block (one the growth added, too) and the
		// instance's network settings.
		if !r.Block.Contains(r.Address) || !slices.Contains(got.Blocks, r.Block) || !reflect.DeepEqual(r.Network, c.Network()) {
			t.Fatalf("instance %d: %s in block %s, network %+v; want one of %v and %+v", i, r.Address, r.Block, r.Network, got.Blocks, c.Network())
		}
	}
	got, _ := st.GetNodeBlocks(ctx, "c1", "n1")
	if len(got.Blocks) < 2 || got.Used != 21 {
		t.Fatalf("after filling: %+v", got)
	}
}

func TestNodeBlocksMaxBlocksNamesTheNode(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(-1, 1)); err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: engine.Owner{Kind: engine.OwnerInstance, ID: fmt.Sprint("i", i), NodeID: "n1"}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: engine.Owner{Kind: engine.OwnerInstance, ID: "late", NodeID: "n1"}})
	if engine.Code(err) != engine.CodeExhausted || !strings.Contains(err.Error(), `node "n1"`) || !strings.Contains(err.Error(), "max_blocks 1") {
		t.Fatalf("got %v", err)
	}
	// Nodes without blocks still use the cluster-wide instance pool.
	r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: engine.Owner{Kind: engine.OwnerInstance, ID: "elsewhere", NodeID: "n2"}})
	if err != nil || r.PoolID != "c1/instance" {
		t.Fatalf("node without blocks: %+v %v", r, err)
	}
}

// Instances allocated on many nodes at once while scaling runs: no duplicate,
// none outside its node's blocks, no block released while it holds an address.
func TestNodeBlocksConcurrent(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	const nodes, each = 6, 40
	for n := range nodes {
		if _, err := st.ScaleNodeBlocks(ctx, "c1", fmt.Sprint("n", n), scaling(-1, 8)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for n := range nodes {
		node := fmt.Sprint("n", n)
		wg.Add(2)
		go func() { // allocations, some released again
			defer wg.Done()
			for i := range each {
				o := engine.Owner{Kind: engine.OwnerInstance, ID: fmt.Sprintf("%s-i%d", node, i), NodeID: node}
				r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: o})
				if err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					if _, err := st.Release(ctx, "c1", o, r.Generation); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
		go func() { // scaling, with demand going down to 0 (shrink attempts)
			defer wg.Done()
			for i := range 12 {
				d := int64(0)
				if i%4 == 0 {
					d = 64
				}
				if _, err := st.ScaleNodeBlocks(ctx, "c1", node, scaling(d, 8)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var dup, outside, orphan int
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM (SELECT address FROM ipam_allocations WHERE state IN ('active', 'reserved')
		GROUP BY address HAVING count(*) > 1) x`).Scan(&dup)
	// Every active instance address on a node lies in an active block of that node.
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations a WHERE a.state = 'active' AND a.pool_id LIKE 'c1/blocks/%'
		AND NOT EXISTS (SELECT 1 FROM ipam_node_blocks b WHERE b.cluster_id = 'c1' AND b.state = 'active'
			AND b.node_id = a.node_id AND a.address <<= b.block)`).Scan(&outside)
	// No cooling (released) block holds a live address.
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM ipam_node_blocks b JOIN ipam_allocations a ON a.cluster_id = b.cluster_id
		AND a.address <<= b.block WHERE b.state = 'cooling' AND a.state IN ('active', 'reserved')`).Scan(&orphan)
	var overlapping int
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM ipam_node_blocks x JOIN ipam_node_blocks y ON x.block && y.block AND x.block <> y.block`).Scan(&overlapping)
	if dup+outside+orphan+overlapping != 0 {
		t.Fatalf("%d duplicates, %d outside their node's blocks, %d in released blocks, %d overlapping blocks", dup, outside, orphan, overlapping)
	}
	var active int
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE state = 'active' AND pool_id LIKE 'c1/blocks/%'`).Scan(&active)
	if want := nodes * (each - (each+2)/3); active != want {
		t.Fatalf("%d active instance addresses, want %d", active, want)
	}
	noDeadlocks(t, st, raw)
}

// A gateway change racing an instance allocation in a node's blocks: the
// allocation takes the address the new gateway names, and is in flight while
// the update looks for a holder. The update must refuse, naming the holder,
// once the allocation commits: a gateway is never an address someone holds.
func TestGatewayUpdateRacingBlockAllocation(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	c := mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(1, 16)); err != nil {
		t.Fatal(err)
	}
	allocating := beginOn(t, extraConn(t, raw))
	a, err := st.AllocateInstance(ctx, allocating, engine.InstanceRequest{ClusterID: "c1", InstanceID: "i0", OrgID: "o1", EnvID: "e1", NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	c.GatewayIPv6 = a.Address
	updated := make(chan error, 1)
	go func() {
		_, err := st.UpdateCluster(ctx, c)
		updated <- err
	}()
	mon := extraConn(t, raw)
	select {
	case err := <-updated:
		t.Fatalf("the gateway update ended (%v) with an allocation of %s in flight", err, a.Address)
	case <-time.After(200 * time.Millisecond):
	}
	waitBlockedBy(t, mon, allocating, "the gateway update", "the allocation in flight")
	if err := allocating.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-updated
	var ie *engine.InvalidError
	if !errors.As(err, &ie) || ie.Field != "gateway_ipv6" || !strings.Contains(err.Error(), "i0") {
		t.Fatalf("gateway update to %s: %v, want refused naming instance i0", a.Address, err)
	}
}

// An instance placed in its node's blocks lies in two pools of its cluster
// (the blocks and the cluster's instance pool): a reverse lookup still gives
// one answer, its own row's pool.
func TestLookupInNodeBlocksAnswersOnce(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(4, 4)); err != nil {
		t.Fatal(err)
	}
	r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"),
		Owner: engine.Owner{Kind: engine.OwnerInstance, ID: "i1", InstanceID: "i1", NodeID: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, cluster := range []string{"", "c1"} {
		got, err := engine.OperatorOf(st).LookupAddress(ctx, r.Address, cluster)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].PoolID != r.PoolID || got[0].Owner.ID != "i1" {
			t.Fatalf("lookup of %s (cluster %q): %+v, want one answer in %s", r.Address, cluster, got, r.PoolID)
		}
	}
}

// Seam: a plan-time hold on an instance's own cooling address, left to
// expire, kept the address's cooldown; the node's block release counted it
// as in use ("still has 1 instance addresses in its blocks") for up to the
// whole instance cooldown, and usage called it reserved. One definition of a
// hold's state now says: an expired hold that kept a cooldown is cooling. The
// release parks it with the block, as a released address, and usage counts
// it cooling.
func TestExpiredHoldWithCooldownIsCooling(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	i1, r := releasedInBlocks(t, st, scaling(4, 4))
	h, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: i1}, time.Hour)
	if err != nil || h.Address != r.Address {
		t.Fatalf("hold on its own cooling address: %v %v, want %s", h.Address, err, r.Address)
	}
	if _, err := raw.Exec(ctx, `INSERT INTO ipam_clock (skew) VALUES (interval '2 hours')
		ON CONFLICT (singleton) DO UPDATE SET skew = EXCLUDED.skew`); err != nil {
		t.Fatal(err)
	}
	u, err := engine.OperatorOf(st).PoolUsage(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range u.Pools {
		if p.PoolID == r.PoolID && (p.Reserved != 0 || p.Cooling != 1) {
			t.Errorf("usage of %s: %d reserved, %d cooling; want the expired hold counted cooling", p.PoolID, p.Reserved, p.Cooling)
		}
	}
	if err := st.ReleaseNodeBlocks(ctx, "c1", "n1"); err != nil {
		t.Fatalf("the node's block release, with an expired hold that kept a cooldown: %v", err)
	}
	var state string
	var cooling bool
	if err := raw.QueryRow(ctx, `SELECT state, reusable_at > ipam_now() + interval '20 hours' FROM ipam_allocations WHERE owner_id = 'i1'`).Scan(&state, &cooling); err != nil {
		t.Fatal(err)
	}
	if state != engine.StateCooling || !cooling {
		t.Fatalf("the expired hold after the release: %s (still inside its cooldown: %v), want parked cooling", state, cooling)
	}
	if rep, err := engine.OperatorOf(st).Check(ctx, ""); err != nil || !rep.OK() {
		t.Fatalf("check: %v %+v", err, rep.Violations)
	}
}

// Seam: carving node blocks out of the instance pool lowered the allocator's
// top but not the pool's recorded size, so a pool that refused with
// ipam_exhausted showed half of it free and raised no alert, and the
// category counted the blocks' addresses twice. Usage now counts what the
// allocator can hand out: the instance pool's size is exactly the number of
// allocations it takes to exhaust it, and the category adds the blocks once.
func TestUsageAfterNodeBlocks(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "2001:db8::/120", "2001:db8:0:1::/120")
	ctx := context.Background()
	sc := engine.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 4}
	d := int64(64)
	sc.Demand = &d
	nb, err := st.ScaleNodeBlocks(ctx, "c1", "n1", sc)
	if err != nil || len(nb.Blocks) != 4 {
		t.Fatalf("scale: %v %v", nb.Blocks, err)
	}
	usage := func() (inst, cat engine.UsageCounts) {
		u, err := engine.OperatorOf(st).PoolUsage(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range u.Pools {
			if p.PoolID == "c1/instance" {
				inst = p.UsageCounts
			}
		}
		for _, c := range u.Categories {
			if c.Category == engine.CategoryInstance {
				cat = c.UsageCounts
			}
		}
		return inst, cat
	}
	inst, cat := usage()
	n := 0
	for ; ; n++ {
		_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance(fmt.Sprint("i", n))})
		if engine.Code(err) == engine.CodeExhausted {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if inst.Size != int64(n) {
		t.Errorf("the instance pool's size is %d, but the allocator handed out %d before ipam_exhausted", inst.Size, n)
	}
	if inst.Size != 127 {
		t.Errorf("the instance pool's size is %d, want 127: the lower half of its /120 (the upper half is the blocks') but its subnet-router anycast address", inst.Size)
	}
	if cat.Size != inst.Size+64 {
		t.Errorf("the instance category's size is %d, want the pool's %d and the node's 64 block addresses once", cat.Size, inst.Size)
	}
	if inst, _ = usage(); inst.Free != 0 || !inst.Alert {
		t.Errorf("an exhausted instance pool shows %d free (alert %v)", inst.Free, inst.Alert)
	}
}

// A node's blocks are not released while instances use them, and the
// refusal names them, with the actor that placed each (a scheduler's
// instance is released with ipamctl release, not by Terraform).
func TestReleaseNodeBlocksNamesTheInstancesInTheWay(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(4, 4)); err != nil {
		t.Fatal(err)
	}
	sched, err := engine.Open(ctx, engine.Config{DatabaseURL: raw.Config().ConnString(), Actor: "scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sched.Close)
	r, err := sched.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: "vm-7", OrgID: "o1", EnvID: "e1", NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	err = st.ReleaseNodeBlocks(ctx, "c1", "n1")
	if !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("releasing blocks in use: %v, want conflict", err)
	}
	for _, want := range []string{`node "n1" still has 1 address in its blocks`, "instance vm-7 (" + r.Address.String() + ", actor scheduler)", "ipamctl release --cluster c1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q: %v", want, err)
		}
	}
}

// A create of a node's blocks adopts them by the rule of every allocation:
// its own unconfirmed work only. Confirmed blocks (a Terraform state read
// them), or another actor's, are refused with owner_conflict.
func TestCreateNodeBlocksAdoptsOnlyItsOwnUnconfirmedWork(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4)); err != nil {
		t.Fatal(err)
	}
	// A retried create (the first one's answer was lost): adopted.
	if _, err := st.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4)); err != nil {
		t.Fatalf("a retried create: %v", err)
	}
	other, err := engine.Open(ctx, engine.Config{DatabaseURL: raw.Config().ConnString(), Actor: "scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	var oc *engine.OwnerConflictError
	// The plan-time check says what the create says, and writes nothing.
	if err := other.CheckNodeBlocks(ctx, "c1", "n1", scaling(4, 4)); !errors.As(err, &oc) || oc.Actor != "terraform" {
		t.Fatalf("another actor's check: %v, want owner_conflict naming actor terraform", err)
	}
	wide := scaling(4, 4)
	wide.PrefixLength = 120
	if err := other.CheckNodeBlocks(ctx, "c1", "n2", wide); engine.Code(err) != engine.CodeInvalid || !strings.Contains(err.Error(), "carves /124 blocks") {
		t.Fatalf("another block length's check: %v, want invalid_input naming /124", err)
	}
	if err := other.CheckNodeBlocks(ctx, "c9", "n1", wide); err != nil {
		t.Fatalf("a cluster the same apply may create: %v, want no refusal", err)
	}
	if _, err := other.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4)); !errors.As(err, &oc) || oc.OwnerKind != engine.OwnerNodeBlocks ||
		oc.Actor != "terraform" || oc.OwnerID != "n1" {
		t.Fatalf("another actor's create: %v, want owner_conflict naming actor terraform", err)
	}
	if err := st.ConfirmNodeBlocks(ctx, "c1", "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4)); !errors.As(err, &oc) || !strings.Contains(err.Error(), "refresh has seen them") ||
		!strings.Contains(err.Error(), "declare them in one configuration only") || strings.Contains(err.Error(), "own actor") {
		t.Fatalf("a create of confirmed blocks: %v, want owner_conflict saying the blocks belong in one configuration", err)
	}
	// Scaling (an update, ipamctl scale) is not a create: it goes on.
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(8, 4)); err != nil {
		t.Fatalf("scaling confirmed blocks: %v", err)
	}
}

// An instance allocation (or a plan-time hold) racing the release of its
// node's blocks either lands in the blocks (and the release is refused),
// or, the blocks gone, in the cluster's instance pool: never a bare
// not_found, though cluster, node and owner all exist.
func TestInstanceRacingBlockReleaseFindsItsPool(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	var notFound []string
	for round := range 40 {
		nodeID := fmt.Sprintf("n%d", round)
		if _, err := st.ScaleNodeBlocks(ctx, "c1", nodeID, scaling(1, 2)); err != nil {
			t.Fatal(err)
		}
		o := engine.Owner{Kind: engine.OwnerInstance, ID: "i" + nodeID, InstanceID: "i" + nodeID, NodeID: nodeID}
		var wg sync.WaitGroup
		var allocErr, releaseErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			if round%2 == 0 {
				_, allocErr = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: o})
			} else {
				_, allocErr = st.Reserve(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: o}, time.Hour)
			}
		}()
		go func() {
			defer wg.Done()
			releaseErr = st.ReleaseNodeBlocks(ctx, "c1", nodeID)
		}()
		wg.Wait()
		if errors.Is(allocErr, engine.ErrNotFound) {
			notFound = append(notFound, fmt.Sprintf("round %d: %v", round, allocErr))
		} else if allocErr != nil {
			t.Fatalf("round %d: the instance's allocation: %v", round, allocErr)
		}
		if releaseErr != nil && engine.Code(releaseErr) != engine.CodeConflict {
			t.Fatalf("round %d: the blocks' release: %v", round, releaseErr)
		}
	}
	if len(notFound) > 0 {
		t.Fatalf("%d of 40 racing rounds answered not_found:\n%s", len(notFound), strings.Join(notFound, "\n"))
	}
}

// releasedInBlocks gives node n1 of cluster c1 blocks scaled by sc, places
// instance i1 on it and releases it: its address cools in n1's blocks.
func releasedInBlocks(t *testing.T, st *engine.Client, sc engine.BlockScaling) (engine.Owner, engine.AllocateResult) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", sc); err != nil {
		t.Fatal(err)
	}
	i1 := engine.Owner{Kind: engine.OwnerInstance, ID: "i1", InstanceID: "i1", NodeID: "n1"}
	r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: i1})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Release(ctx, "c1", i1, 0); err != nil || !ok {
		t.Fatalf("release of i1: %v %v", ok, err)
	}
	return i1, r
}

// Seam (found by the model test): a listing shows a released block's cooling
// rows under its parked pool, "<cluster>/parked/<block>", and a listing
// filtered by that pool refused the id it had shown ("is not a pool id"). It
// lists those rows; an id of that form that is no block's is still refused.
func TestListByParkedPool(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	_, r := releasedInBlocks(t, st, scaling(4, 4))
	if err := st.ReleaseNodeBlocks(ctx, "c1", "n1"); err != nil {
		t.Fatal(err)
	}
	op := engine.OperatorOf(st)
	all, err := op.ListAllocations(ctx, engine.ListFilter{ClusterID: "c1"})
	if err != nil || len(all) != 1 || !strings.HasPrefix(all[0].PoolID, "c1/parked/") || all[0].Address != r.Address {
		t.Fatalf("the cluster's listing after the block's release: %+v, %v; want %s cooling in a parked pool", all, err, r.Address)
	}
	got, err := op.ListAllocations(ctx, engine.ListFilter{PoolID: all[0].PoolID})
	if err != nil || len(got) != 1 || got[0].Address != r.Address {
		t.Fatalf("the listing of pool %s: %+v, %v; want %s", all[0].PoolID, got, err, r.Address)
	}
	for _, id := range []string{"c1/parked/2001:db8::", "c1/parked/2001:DB8::/124", "c1/parked/2001:db8::1/64", "c1/parked/", "c1/parked/x/y"} {
		if _, err := op.ListAllocations(ctx, engine.ListFilter{PoolID: id}); engine.Code(err) != engine.CodeInvalid {
			t.Errorf("the listing of pool %q: %v, want invalid_input", id, err)
		}
	}
}

// A node's full blocks grow for whoever draws from them, not only for an
// instance placed on the node: a caller naming the node's pool (whatever
// node its owner names) and a set key listing it. They got not_found (the
// growth looked for the owner's node) or ipam_exhausted (a set never grew a
// node), and a caller whose owner named another node grew that node instead.
func TestNodeBlocksGrowForWhoeverDrawsFromThem(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	for _, n := range []string{"n1", "n2"} {
		if _, err := st.ScaleNodeBlocks(ctx, "c1", n, scaling(-1, 3)); err != nil {
			t.Fatal(err)
		}
	}
	fill := func(prefix string) {
		t.Helper()
		for i := 0; ; i++ {
			nb, err := st.GetNodeBlocks(ctx, "c1", "n1")
			if err != nil {
				t.Fatal(err)
			}
			if nb.Used == nb.Capacity {
				return
			}
			o := engine.Owner{Kind: engine.OwnerInstance, ID: fmt.Sprint(prefix, i), NodeID: "n1"}
			if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: o}); err != nil {
				t.Fatal(err)
			}
		}
	}
	blocks := func(node string) int {
		t.Helper()
		nb, err := st.GetNodeBlocks(ctx, "c1", node)
		if err != nil {
			t.Fatal(err)
		}
		return len(nb.Blocks)
	}
	inN1 := func(what string, a netip.Addr) {
		t.Helper()
		nb, _ := st.GetNodeBlocks(ctx, "c1", "n1")
		if !slices.ContainsFunc(nb.Blocks, func(b netip.Prefix) bool { return b.Contains(a) }) {
			t.Fatalf("%s: %s outside n1's blocks %v", what, a, nb.Blocks)
		}
	}
	n1 := engine.NodeBlocksPool("c1", "n1")

	fill("a")
	// The owner names node n2; the pool named is n1's: n1 grows, n2 does not.
	r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: n1, Owner: engine.Owner{Kind: engine.OwnerInstance, ID: "named", NodeID: "n2"}})
	if err != nil {
		t.Fatalf("an allocation naming n1's full blocks: %v", err)
	}
	inN1("an allocation naming n1's blocks", r.Address)
	if b1, b2 := blocks("n1"), blocks("n2"); b1 != 2 || b2 != 1 {
		t.Fatalf("after an allocation naming n1's full blocks: n1 has %d blocks (want 2), n2 %d (want 1)", b1, b2)
	}

	fill("b")
	set := engine.Owner{Kind: engine.OwnerSet, ID: "s1"}
	ms, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: set, Add: []engine.SetEntry{{Key: "k", Pools: []string{n1.ID()}}}})
	if err != nil || len(ms) != 1 {
		t.Fatalf("a set key listing n1's full blocks: %v %v", ms, err)
	}
	inN1("a set key", ms[0].Address)
	if b := blocks("n1"); b != 3 {
		t.Fatalf("after a set key in n1's full blocks: n1 has %d blocks, want 3", b)
	}

	// At max_blocks the key passes to the next pool it lists, and a key
	// listing only the node's blocks names the node.
	fill("c")
	ms, err = st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: set, Add: []engine.SetEntry{
		{Key: "next", Pools: []string{n1.ID(), engine.InstancePool("c1").ID()}}}})
	if err != nil || len(ms) != 2 || !slices.ContainsFunc(ms, func(m engine.SetMember) bool { return m.Key == "next" && m.PoolID == "c1/instance" }) {
		t.Fatalf("a key listing n1's blocks at max_blocks, then the instance pool: %+v %v", ms, err)
	}
	_, err = st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: set, Add: []engine.SetEntry{{Key: "only", Pools: []string{n1.ID()}}}})
	if engine.Code(err) != engine.CodeExhausted || !strings.Contains(err.Error(), `node "n1"`) || !strings.Contains(err.Error(), "max_blocks 3") {
		t.Fatalf("a key listing only n1's blocks at max_blocks: %v", err)
	}
}

// Changes of sets whose keys list two full nodes' blocks, in either order,
// racing instances placed on those nodes: every change and allocation
// succeeds (a change takes its nodes' scaling locks first, in node order, so
// none deadlocks), no address is handed out twice, and every address lies
// in an active block of its pool's node.
func TestSetsAndInstancesGrowFullNodesAtOnce(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	nodes := []string{"n0", "n1"}
	for _, n := range nodes {
		if _, err := st.ScaleNodeBlocks(ctx, "c1", n, scaling(-1, 16)); err != nil {
			t.Fatal(err)
		}
	}
	const sets, changes, instances = 4, 6, 24
	var wg sync.WaitGroup
	for s := range sets {
		wg.Go(func() {
			owner := engine.Owner{Kind: engine.OwnerSet, ID: fmt.Sprint("s", s)}
			a, b := engine.NodeBlocksPool("c1", nodes[s%2]).ID(), engine.NodeBlocksPool("c1", nodes[1-s%2]).ID()
			for c := range changes {
				add := []engine.SetEntry{{Key: fmt.Sprint("x", c), Pools: []string{a}}, {Key: fmt.Sprint("y", c), Pools: []string{b}}}
				if _, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: owner, Add: add}); err != nil {
					t.Errorf("set %d, change %d: %v", s, c, err)
					return
				}
			}
		})
	}
	for _, n := range nodes {
		wg.Go(func() {
			for i := range instances {
				o := engine.Owner{Kind: engine.OwnerInstance, ID: fmt.Sprintf("%s-i%d", n, i), NodeID: n}
				if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: o}); err != nil {
					t.Errorf("instance %d on %s: %v", i, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	var live, dup, outside int
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE state = 'active' AND pool_id LIKE 'c1/blocks/%'`).Scan(&live)
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM (SELECT address FROM ipam_allocations WHERE state IN ('active', 'reserved')
		GROUP BY address HAVING count(*) > 1) x`).Scan(&dup)
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations a WHERE a.state = 'active' AND a.pool_id LIKE 'c1/blocks/%'
		AND NOT EXISTS (SELECT 1 FROM ipam_node_blocks b WHERE b.cluster_id = 'c1' AND b.state = 'active'
			AND a.pool_id = 'c1/blocks/' || b.node_id AND a.address <<= b.block)`).Scan(&outside)
	if want := sets*changes*2 + len(nodes)*instances; live != want || dup != 0 || outside != 0 {
		t.Fatalf("%d live addresses in the nodes' blocks (want %d), %d handed out twice, %d outside their pool's node's blocks", live, want, dup, outside)
	}
	noDeadlocks(t, st, raw)
}

// noDeadlocks closes st and fails when PostgreSQL broke a deadlock in the
// test's database (the retry that follows would hide it): a backend reports
// its deadlocks by the time it ends.
func noDeadlocks(t *testing.T, st *engine.Client, raw *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	st.Close()
	var others int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := raw.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others); err != nil {
			t.Fatal(err)
		}
		if others == 0 || time.Now().After(deadline) {
			break
		}
	}
	var deadlocks int64
	if err := raw.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&deadlocks); err != nil {
		t.Fatal(err)
	}
	if others != 0 || deadlocks != 0 {
		t.Fatalf("%d deadlocks broken by PostgreSQL (%d connections left to report)", deadlocks, others)
	}
}

// Two placement transactions on one node, each placing a second instance
// after their first ones filled the node's blocks. Below max_blocks both
// grow the node and neither waits for the other's first placement: a growth
// took the node pool's row FOR UPDATE, and rewrote the rows of the node's
// blocks, each of which waits for the allocations in flight there, and a
// pick that found every free row held waited for them too. So each waited
// for the other's first placement: PostgreSQL broke the deadlock, the retry
// met it again, and one failed with conflict after about 11 s. At
// max_blocks, a placement that finds the node's free rows held by the other
// gets ipam_exhausted naming the node at once.
func TestPlacementsInFlightGrowAFullNodeAtOnce(t *testing.T) {
	t.Parallel()
	for _, maxBlocks := range []int{4, 1} {
		t.Run(fmt.Sprint("max_blocks ", maxBlocks), func(t *testing.T) {
			t.Parallel()
			placeTwiceOnAFullNode(t, maxBlocks)
		})
	}
}

func placeTwiceOnAFullNode(t *testing.T, maxBlocks int) {
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(-1, maxBlocks)); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		nb, err := st.GetNodeBlocks(ctx, "c1", "n1")
		if err != nil {
			t.Fatal(err)
		}
		if nb.Used == nb.Capacity-2 {
			break
		}
		if _, err := st.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: fmt.Sprint("fill", i), OrgID: "o1", EnvID: "e1", NodeID: "n1"}); err != nil {
			t.Fatal(err)
		}
	}
	errs := twoCallersTwice(t, raw, func(tx pgx.Tx, id string) error {
		_, err := st.AllocateInstance(ctx, tx, engine.InstanceRequest{ClusterID: "c1", InstanceID: id, OrgID: "o1", EnvID: "e1", NodeID: "n1"})
		return err
	})
	nb, err := st.GetNodeBlocks(ctx, "c1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	var dup int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM (SELECT address FROM ipam_allocations WHERE state IN ('active', 'reserved')
		GROUP BY address HAVING count(*) > 1) x`).Scan(&dup); err != nil || dup != 0 {
		t.Fatalf("%d addresses handed out twice (%v)", dup, err)
	}
	if maxBlocks > 1 {
		if errs[0] != nil || errs[1] != nil || len(nb.Blocks) != 2 || nb.Used != nb.Capacity/2+2 {
			t.Fatalf("below max_blocks: placement transactions %v, %v; the node %d blocks, %d of %d used (want both to commit, 2 blocks, %d used)",
				errs[0], errs[1], len(nb.Blocks), nb.Used, nb.Capacity, nb.Capacity/2+2)
		}
		noDeadlocks(t, st, raw)
		return
	}
	committed := 0
	for _, err := range errs {
		if err == nil {
			committed++
		} else if engine.Code(err) != engine.CodeExhausted || !strings.Contains(err.Error(), `node "n1"`) {
			t.Errorf("at max_blocks: a placement transaction failed with %v, want ipam_exhausted naming node n1", err)
		}
	}
	if len(nb.Blocks) != 1 || nb.Used != nb.Capacity-2+2*int64(committed) {
		t.Fatalf("at max_blocks, %d placement transactions committed: the node has %d blocks, %d of %d used (want 1 block, %d used)",
			committed, len(nb.Blocks), nb.Used, nb.Capacity, nb.Capacity-2+2*int64(committed))
	}
	noDeadlocks(t, st, raw)
}

// Two placement transactions in a mixed fleet: each places an instance on a
// node without blocks (the cluster's instance pool), then one on a full node
// of its own whose growth carves a fresh block. The carve used to wait for the
// other transaction's allocation from the cluster's instance pool, each for
// the other's, until PostgreSQL broke the deadlock.
func TestPlacementsInFlightCarveFreshBlocksInAMixedFleet(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	// A small instance prefix (sixteen /124 blocks), whose counter the carves
	// keep below the blocks: a /64's midpoint lies beyond the ordinals a
	// counter can reach, so its carves never touch it.
	mkCluster(t, st, "c1", "2001:db8::/48", "2001:db8::/120", "2001:db8:0:1::/120")
	ctx := context.Background()
	// A first block elsewhere, as in any cluster that has blocks.
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n0", scaling(-1, 4)); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"na", "nb"} {
		if _, err := st.ScaleNodeBlocks(ctx, "c1", node, scaling(-1, 4)); err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			nb, err := st.GetNodeBlocks(ctx, "c1", node)
			if err != nil {
				t.Fatal(err)
			}
			if nb.Used == nb.Capacity {
				break
			}
			if _, err := st.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: fmt.Sprint(node, "-fill", i), OrgID: "o1", EnvID: "e1", NodeID: node}); err != nil {
				t.Fatal(err)
			}
		}
	}
	errs := twoCallersTwice(t, raw, func(tx pgx.Tx, id string) error {
		node := "plain" // no blocks: the cluster's instance pool
		if strings.HasSuffix(id, "2") {
			node = "n" + id[:1] // its own full node: a fresh block
		}
		_, err := st.AllocateInstance(ctx, tx, engine.InstanceRequest{ClusterID: "c1", InstanceID: id, OrgID: "o1", EnvID: "e1", NodeID: node})
		return err
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("placement transactions: %v, %v (want both to commit)", errs[0], errs[1])
	}
	for _, node := range []string{"na", "nb"} {
		nb, err := st.GetNodeBlocks(ctx, "c1", node)
		if err != nil {
			t.Fatal(err)
		}
		if len(nb.Blocks) != 2 || nb.Used != nb.Capacity/2+1 {
			t.Fatalf("node %s: %d blocks, %d of %d used (want 2 blocks, %d used)", node, len(nb.Blocks), nb.Used, nb.Capacity, nb.Capacity/2+1)
		}
	}
	noDeadlocks(t, st, raw)
}

// A cluster whose instance counter handed out addresses past the half of a
// small instance prefix before its first blocks keeps them and the rest of
// their block boundary: the first carve lowers the counter under the next
// block boundary above them, not under the half, so the cluster's pool is not
// exhausted at once; the blocks and the pool never meet.
func TestFirstCarveKeepsWhatTheCounterHandedOut(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "2001:db8::/120", "2001:db8:0:1::/120")
	for i := range 150 {
		if _, err := st.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: fmt.Sprint("early", i), OrgID: "o1", EnvID: "e1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(-1, 4)); err != nil {
		t.Fatal(err)
	}
	more := 0
	for ; ; more++ {
		_, err := st.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: fmt.Sprint("late", more), OrgID: "o1", EnvID: "e1"})
		if engine.Code(err) == engine.CodeExhausted {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// 150 handed out, ordinals 1 to 150 (consecutive when nothing else
	// allocates), so a stripe's next ordinal is at most 182 and the counter
	// keeps up to the /124 boundary at 192: ordinals 1 to 191. Cut at the
	// half, it would hand out none; below the block (ordinal 240), 89.
	if 150+more != 191 {
		t.Fatalf("after the first carve the cluster's pool handed out %d more, want %d (up to the /124 boundary above what it had handed out)", more, 191-150)
	}
	rep, err := engine.OperatorOf(st).Check(ctx, "c1")
	if err != nil || len(rep.Violations) != 0 {
		t.Fatalf("check: %v\n%s", err, listViolations(rep.Violations))
	}
	for i := range 3 { // more blocks, carved above the counter
		if _, err := st.ScaleNodeBlocks(ctx, "c1", fmt.Sprint("m", i), scaling(-1, 4)); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err = engine.OperatorOf(st).Check(ctx, "c1"); err != nil || len(rep.Violations) != 0 {
		t.Fatalf("check after more blocks: %v\n%s", err, listViolations(rep.Violations))
	}
}

// Seam (found by a day-2 trial): a node's blocks destroyed and created again
// while an instance's address cooled in them gave the node a fresh block, the
// old one parked until its cooldowns passed, so the instance placed again on
// its node got another address, against "the same instance re-created
// meanwhile gets it back". A node takes its own cooling blocks back first,
// with their cooling rows; another node still waits out their cooldowns.
func TestNodeTakesItsOwnParkedBlockBack(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	sc := scaling(4, 4)
	i1, r := releasedInBlocks(t, st, sc)
	before, err := st.GetNodeBlocks(ctx, "c1", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ReleaseNodeBlocks(ctx, "c1", "n1"); err != nil {
		t.Fatal(err)
	}
	// Another node, inside the cooldown, gets a block of its own.
	other, err := st.ScaleNodeBlocks(ctx, "c1", "n2", sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range other.Blocks {
		if b.Contains(r.Address) {
			t.Fatalf("node n2 got block %s, where %s of n1's instance is cooling", b, r.Address)
		}
	}
	again, err := st.ScaleNodeBlocks(ctx, "c1", "n1", sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Blocks) == 0 || again.Blocks[0] != before.Blocks[0] {
		t.Fatalf("n1 created its blocks again and got %v, not its cooling block %v back", again.Blocks, before.Blocks)
	}
	got, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: i1})
	if err != nil {
		t.Fatal(err)
	}
	if got.Address != r.Address {
		t.Fatalf("instance i1 placed again on its node got %s, not its cooling address %s", got.Address, r.Address)
	}
	var parked int64
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_pools WHERE kind = 'parked'`).Scan(&parked); err != nil {
		t.Fatal(err)
	}
	if parked != 0 {
		t.Fatalf("%d parked pools left after the block came back", parked)
	}
	// Every address of the block is there to hand out.
	for i := 0; i < 15; i++ {
		if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"),
			Owner: engine.Owner{Kind: engine.OwnerInstance, ID: fmt.Sprintf("j%d", i), InstanceID: fmt.Sprintf("j%d", i), NodeID: "n1"}}); err != nil {
			t.Fatalf("allocation %d on n1: %v", i, err)
		}
	}
	rep, err := engine.OperatorOf(st).Check(ctx, "")
	if err != nil || !rep.OK() {
		t.Fatalf("check: %v %v", err, rep.Violations)
	}
}

// A node taking back one of several released blocks takes the one that
// parked a cooling address, so that its instance gets the address back,
// whichever of the node's blocks that is.
func TestNodeTakesBackTheBlockHoldingCoolingAddresses(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	ctx := context.Background()
	for which := range 2 {
		cid := fmt.Sprintf("c%d", which)
		mkCluster(t, st, cid, fmt.Sprintf("2001:db8:%d::/48", which), "", "")
		two, err := st.ScaleNodeBlocks(ctx, cid, "n1", scaling(20, 4))
		if err != nil {
			t.Fatal(err)
		}
		if len(two.Blocks) != 2 {
			t.Fatalf("blocks %v, want 2", two.Blocks)
		}
		block := two.Blocks[which]
		i1 := engine.Owner{Kind: engine.OwnerInstance, ID: "i1", InstanceID: "i1", NodeID: "n1"}
		r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools(cid), Owner: i1, Address: block.Addr().Next()})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := st.Release(ctx, cid, i1, 0); err != nil || !ok {
			t.Fatalf("release of i1: %v %v", ok, err)
		}
		if err := st.ReleaseNodeBlocks(ctx, cid, "n1"); err != nil {
			t.Fatal(err)
		}
		one, err := st.ScaleNodeBlocks(ctx, cid, "n1", scaling(4, 4))
		if err != nil {
			t.Fatal(err)
		}
		if len(one.Blocks) != 1 || one.Blocks[0] != block {
			t.Fatalf("n1 took back %v, not %s, where its instance's address cools", one.Blocks, block)
		}
		got, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools(cid), Owner: i1})
		if err != nil {
			t.Fatal(err)
		}
		if got.Address != r.Address {
			t.Fatalf("instance i1 got %s, not its cooling address %s", got.Address, r.Address)
		}
	}
}
