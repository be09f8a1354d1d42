package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// A confirmed allocation is taken over by a create only after a plan of the
// same actor marked it as being replaced: keeping its address, or, for
// another address, releasing it into cooldown for its owner; the replaced
// object's destroy then releases nothing. Another actor's create, or any
// change to the allocation, ends nothing but is refused as before.
func TestMarkedReplacementIsTakenOver(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	req := engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")}
	a, err := st.Allocate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetActive(ctx, "c1", engine.OwnerNode, "n1"); err != nil { // a refresh confirms it
		t.Fatal(err)
	}
	if _, err := st.Allocate(ctx, req); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("a create of a confirmed owner, unmarked: %v, want owner_conflict", err)
	}

	// Another actor cannot mark it.
	other, err := engine.Open(ctx, engine.Config{DatabaseURL: testdbURLOf(t, st), Actor: "team-b"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.MarkReplacement(ctx, "c1", node("n1"), a.Generation, time.Hour); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("another actor's mark: %v, want not found", err)
	}
	if _, err := st.MarkReplacement(ctx, "c1\n", node("n1"), a.Generation, time.Hour); engine.Code(err) != engine.CodeInvalid {
		t.Fatalf("a bad cluster id: %v", err)
	}

	// Another generation (the object replaced is not this allocation's) is
	// no mark.
	if _, err := st.MarkReplacement(ctx, "c1", node("n1"), a.Generation+7, time.Hour); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a mark of another generation: %v, want not found", err)
	}

	// Keep: the plan shows the address, the create adopts it, the stale
	// destroy releases nothing.
	if _, err := st.MarkReplacement(ctx, "c1", node("n1"), a.Generation, time.Hour); err != nil {
		t.Fatal(err)
	}
	if h, err := st.Reserve(ctx, req, time.Hour); err != nil || h.Address != a.Address {
		t.Fatalf("the plan of the create half: %+v %v, want %s", h, err, a.Address)
	}
	if _, err := other.Allocate(ctx, req); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("another actor's create of a marked owner: %v, want owner_conflict", err)
	}
	b, err := st.Allocate(ctx, req)
	if err != nil || !b.Adopted || b.Address != a.Address {
		t.Fatalf("the create half: %+v %v", b, err)
	}
	if ok, err := st.Release(ctx, "c1", node("n1"), a.Generation); err != nil || ok {
		t.Fatalf("the replaced object's destroy released: %v %v", ok, err)
	}
	// The adoption ended the mark: another create is refused again.
	if _, err := st.GetActive(ctx, "c1", engine.OwnerNode, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, `UPDATE ipam_allocations SET confirmed_at = now() WHERE owner_id = 'n1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Allocate(ctx, req); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("a create after the mark was used: %v, want owner_conflict", err)
	}

	// Move: a claimed address elsewhere; the plan takes no hold and releases
	// nothing, the create releases the old address into cooldown for n1.
	if _, err := st.MarkReplacement(ctx, "c1", node("n1"), b.Generation, time.Hour); err != nil {
		t.Fatal(err)
	}
	moved := req
	moved.Address = netip.MustParseAddr("2001:db8::9")
	if _, err := st.Reserve(ctx, moved, time.Hour); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("the plan of a moving create half: %v, want owner_conflict (known after apply)", err)
	}
	c, err := st.Allocate(ctx, moved)
	if err != nil || c.Address != moved.Address {
		t.Fatalf("the moving create half: %+v %v", c, err)
	}
	var state, owner string
	if err := raw.QueryRow(ctx, `SELECT state, owner_id FROM ipam_allocations WHERE address = $1`,
		netip.PrefixFrom(a.Address, 128)).Scan(&state, &owner); err != nil || state != engine.StateCooling || owner != "n1" {
		t.Fatalf("the old address: %s of %s (%v), want cooling for n1", state, owner, err)
	}
	if ok, err := st.Release(ctx, "c1", node("n1"), b.Generation); err != nil || ok {
		t.Fatalf("the replaced object's destroy released: %v %v", ok, err)
	}
	if got, err := st.GetActive(ctx, "c1", engine.OwnerNode, "n1"); err != nil || got.Address != moved.Address || got.Generation <= b.Generation {
		t.Fatalf("after the replaced object's destroy: %+v %v, want %s active past generation %d", got, err, moved.Address, b.Generation)
	}

	// An expired mark is no mark.
	if _, err := st.GetActive(ctx, "c1", engine.OwnerNode, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, `UPDATE ipam_allocations SET confirmed_at = now() WHERE owner_id = 'n1' AND state = 'active'`); err != nil {
		t.Fatal(err)
	}
	cur, err := st.GetActive(ctx, "c1", engine.OwnerNode, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkReplacement(ctx, "c1", node("n1"), cur.Generation, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(ctx, `UPDATE ipam_allocations SET replace_until = now() - interval '1 second' WHERE owner_id = 'n1' AND state = 'active'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Allocate(ctx, moved); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("a create after the mark expired: %v, want owner_conflict", err)
	}
}

// An unconfirmed allocation (a killed apply's) is adopted only from the
// origin that made it: another working directory of the same actor is
// another configuration, refused at plan (Reserve) and at apply; the same
// origin, or an allocation with none recorded, adopts as before.
func TestOriginDecidesAdoption(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	open := func(origin string) *engine.Client { return openOrigin(t, st, "", origin) }
	a, b := open("/work/a"), open("/work/b")
	req := engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n1")}
	first, err := a.Allocate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var origin string
	if err := raw.QueryRow(ctx, `SELECT origin FROM ipam_allocations WHERE owner_id = 'n1'`).Scan(&origin); err != nil || origin != "/work/a" {
		t.Fatalf("recorded origin %q (%v), want /work/a", origin, err)
	}
	if _, err := b.Reserve(ctx, req, time.Hour); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("another origin's plan: %v, want owner_conflict", err)
	}
	if _, err := b.Allocate(ctx, req); engine.Code(err) != engine.CodeOwnerConflict || !strings.Contains(err.Error(), `"/work/a"`) {
		t.Fatalf("another origin's create: %v, want owner_conflict naming /work/a", err)
	}
	if h, err := a.Reserve(ctx, req, time.Hour); err != nil || h.Address != first.Address {
		t.Fatalf("the same origin's plan: %+v %v", h, err)
	}
	again, err := a.Allocate(ctx, req)
	if err != nil || !again.Adopted || again.Address != first.Address {
		t.Fatalf("the same origin's create: %+v %v", again, err)
	}
	// The adoption recorded the origin again, for its new generation.
	if _, err := b.Allocate(ctx, req); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("another origin's create after the adoption: %v, want owner_conflict", err)
	}
	// Given the first origin, the other directory adopts.
	if r, err := open("/work/a").Allocate(ctx, req); err != nil || !r.Adopted {
		t.Fatalf("another directory given the origin: %+v %v", r, err)
	}
	// A client without an origin (the Go API, same actor) neither adopts
	// nor releases without its generation what a configuration made.
	if _, err := st.Allocate(ctx, req); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("a client without an origin creating a configuration's owner: %v, want owner_conflict", err)
	}
	for name, c := range map[string]*engine.Client{"another origin": b, "no origin": st} {
		if _, err := c.Release(ctx, "c1", node("n1"), 0); engine.Code(err) != engine.CodeOwnerConflict {
			t.Fatalf("a release without generation from %s: %v, want owner_conflict", name, err)
		}
	}
	// No origin recorded (an allocation of the Go API): the actor decides.
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n2")}); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("n2")}); err != nil || !r.Adopted {
		t.Fatalf("an allocation with no origin: %+v %v", r, err)
	}
	if _, err := engine.Open(ctx, engine.Config{DatabaseURL: testdbURLOf(t, st), Origin: "a\x00b"}); engine.Code(err) != engine.CodeInvalid {
		t.Fatalf("an origin with a NUL byte: %v", err)
	}
}

// A node's instance blocks and an address set's members are replaced like
// an address: confirmed, a create of the same actor takes them over only
// after a plan marked them (at the generation the replaced object read);
// taking over moves the generation on, so the replaced object's destroy,
// carrying the older one, releases nothing; a destroy carrying the current
// generation releases them.
func TestMarkedBlocksAndSetsAreTakenOver(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()

	nb, err := st.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ConfirmNodeBlocks(ctx, "c1", "n1"); err != nil { // a refresh confirms them
		t.Fatal(err)
	}
	if _, err := st.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4)); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("a create of confirmed blocks, unmarked: %v, want owner_conflict", err)
	}
	if err := st.MarkNodeBlocksReplacement(ctx, "c1", "n1", nb.Generation+1, time.Hour); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a mark of another generation: %v, want not found", err)
	}
	if err := st.MarkNodeBlocksReplacement(ctx, "c1", "n1", nb.Generation, time.Hour); err != nil {
		t.Fatal(err)
	}
	taken, err := st.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4))
	if err != nil {
		t.Fatalf("a create of marked blocks: %v", err)
	}
	if taken.Generation <= nb.Generation || !slices.Equal(taken.Blocks, nb.Blocks) {
		t.Fatalf("taken over: generation %d blocks %v, want past %d and the same %v", taken.Generation, taken.Blocks, nb.Generation, nb.Blocks)
	}
	// The mark is spent: a second create is refused again once confirmed.
	if err := st.ConfirmNodeBlocks(ctx, "c1", "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4)); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("a second create after the take-over: %v, want owner_conflict", err)
	}
	if ok, err := st.ReleaseNodeBlocksAt(ctx, "c1", "n1", nb.Generation); err != nil || ok {
		t.Fatalf("the replaced object's destroy: released %v, %v; want nothing released", ok, err)
	}
	if got, err := st.GetNodeBlocks(ctx, "c1", "n1"); err != nil || !slices.Equal(got.Blocks, nb.Blocks) {
		t.Fatalf("n1's blocks after the stale destroy: %v %v", got.Blocks, err)
	}
	if ok, err := st.ReleaseNodeBlocksAt(ctx, "c1", "n1", taken.Generation); err != nil || !ok {
		t.Fatalf("the destroy of the new object: released %v, %v", ok, err)
	}

	// An address set: each member at its own generation.
	labels := engine.Owner{ID: "vm-1"}
	members, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: labels,
		Add: []engine.SetEntry{{Key: "a", Family: 6}, {Key: "b", Family: 6}}})
	if err != nil {
		t.Fatal(err)
	}
	gens := map[string]int64{}
	for _, m := range members {
		gens[m.Key] = m.Generation
	}
	if _, err := st.GetSet(ctx, "c1", "vm-1"); err != nil { // a refresh confirms them
		t.Fatal(err)
	}
	again := engine.SetChange{ClusterID: "c1", Owner: labels, Add: []engine.SetEntry{{Key: "a", Family: 6}, {Key: "b", Family: 6}}}
	if _, err := st.ApplySet(ctx, again); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("a create of a confirmed set, unmarked: %v, want owner_conflict", err)
	}
	if err := st.MarkSetReplacement(ctx, "c1", "vm-1", gens, time.Hour); err != nil {
		t.Fatal(err)
	}
	now, err := st.ApplySet(ctx, again)
	if err != nil {
		t.Fatalf("a create of a marked set: %v", err)
	}
	for i, m := range now {
		if m.Address != members[i].Address || m.Generation <= gens[m.Key] {
			t.Fatalf("member %s taken over: %s at %d, want %s past %d", m.Key, m.Address, m.Generation, members[i].Address, gens[m.Key])
		}
	}
	if err := st.ReleaseSetAt(ctx, "c1", "vm-1", gens); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetSet(ctx, "c1", "vm-1"); err != nil || len(got) != 2 {
		t.Fatalf("the set after the replaced object's destroy: %d members %v, want both", len(got), err)
	}
	if err := st.ReleaseSetAt(ctx, "c1", "vm-1", map[string]int64{"a": now[0].Generation}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetSet(ctx, "c1", "vm-1"); err != nil || len(got) != 1 || got[0].Key != "b" {
		t.Fatalf("the set after releasing a at its generation: %+v %v, want b alone", got, err)
	}
}

// A node's instance blocks with an instance in them can be replaced
// destroy-first: the destroy half, carrying the generation a replacement's
// plan marked, releases nothing (the blocks and the instance stay), and the
// create half takes them over. Unmarked, a destroy of blocks in use is
// refused, as is one without a generation (an operator's release) or of
// another actor.
func TestMarkedBlocksInUseAreLeftForTheReplacement(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	nb, err := st.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ConfirmNodeBlocks(ctx, "c1", "n1"); err != nil {
		t.Fatal(err)
	}
	i1 := engine.Owner{Kind: engine.OwnerInstance, ID: "i1", InstanceID: "i1", NodeID: "n1"}
	a, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: i1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseNodeBlocksAt(ctx, "c1", "n1", nb.Generation); engine.Code(err) != engine.CodeConflict {
		t.Fatalf("an unmarked destroy of blocks in use: %v, want conflict", err)
	}
	other := openClient(t, engine.Config{DatabaseURL: testdbURLOf(t, st), Actor: "ops"})
	if err := st.MarkNodeBlocksReplacement(ctx, "c1", "n1", nb.Generation, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ReleaseNodeBlocksAt(ctx, "c1", "n1", nb.Generation); engine.Code(err) != engine.CodeConflict {
		t.Fatalf("another actor's destroy of marked blocks in use: %v, want conflict", err)
	}
	if err := st.ReleaseNodeBlocks(ctx, "c1", "n1"); engine.Code(err) != engine.CodeConflict {
		t.Fatalf("a release without a generation of marked blocks in use: %v, want conflict", err)
	}
	if ok, err := st.ReleaseNodeBlocksAt(ctx, "c1", "n1", nb.Generation); err != nil || ok {
		t.Fatalf("the destroy half of a marked replacement: released %v, %v; want nothing released and no error", ok, err)
	}
	taken, err := st.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4))
	if err != nil {
		t.Fatalf("the create half: %v", err)
	}
	if taken.Generation <= nb.Generation || !slices.Equal(taken.Blocks, nb.Blocks) || taken.Used != 1 {
		t.Fatalf("taken over: generation %d blocks %v used %d, want past %d, the same %v and i1's address",
			taken.Generation, taken.Blocks, taken.Used, nb.Generation, nb.Blocks)
	}
	if got, err := st.GetActive(ctx, "c1", engine.OwnerInstance, "i1"); err != nil || got.Address != a.Address {
		t.Fatalf("i1 after the replacement: %+v %v, want %s", got, err, a.Address)
	}
}

// A replacement mark holds only for the configuration that made it: once
// configuration A (one origin) has planned a replacement of its node, a
// create of the same owner by configuration B (the same actor, another
// origin) is still refused, and A's own create takes the allocation over.
func TestReplacementMarkHoldsForItsOrigin(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	open := func(origin string) *engine.Client { return openOrigin(t, st, "terraform", origin) }
	a, b := open("/work/a"), open("/work/b")
	req := engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("web-1")}
	first, err := a.Allocate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetActive(ctx, "c1", engine.OwnerNode, "web-1"); err != nil { // A's refresh confirms it
		t.Fatal(err)
	}
	if _, err := a.MarkReplacement(ctx, "c1", node("web-1"), first.Generation, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Allocate(ctx, req); engine.Code(err) != engine.CodeOwnerConflict {
		t.Fatalf("B's create while A's plan marks the replacement: %v, want owner_conflict", err)
	}
	if got, err := a.Allocate(ctx, req); err != nil || got.Address != first.Address || got.Generation <= first.Generation {
		t.Fatalf("A's create half of its replacement: %+v %v, want %s taken over", got, err, first.Address)
	}
}

// A plan-time hold is its planning configuration's: while it is live,
// another configuration of the same actor may neither renew it (its plan),
// nor confirm it (its create, claiming the held address on the fast path or
// not), nor take it on the full path: owner_conflict naming the hold. Once
// it expired, the other configuration takes the owner; the first one's next
// Reserve (its saved plan's apply re-planning) is refused with the same
// owner_conflict and names, once per plan run, the address its plan showed
// (Hold.Lost), so the plan can show it again and the create fail with the
// refusal.
func TestHoldIsItsConfigurations(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	open := func(origin, run string) *engine.Client {
		c, err := engine.Open(ctx, engine.Config{DatabaseURL: testdbURLOf(t, st), Actor: "terraform", Origin: origin, PlanRun: run})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	a, b := open("/work/a", "run-1"), open("/work/b", "")
	req := engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("web-1")}
	h, err := a.Reserve(ctx, req, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	held := func(what string, err error) {
		t.Helper()
		var oc *engine.OwnerConflictError
		if !errors.As(err, &oc) || !oc.Held || !strings.Contains(err.Error(), `"/work/a"`) {
			t.Fatalf("%s during A's live hold: %v, want owner_conflict naming A's hold", what, err)
		}
	}
	_, err = b.Reserve(ctx, req, time.Hour)
	held("B's plan", err)
	claim := req
	claim.Address = h.Address
	_, err = b.Allocate(ctx, claim)
	held("B's create claiming the held address", err)
	b.ForceFullPath(true)
	_, err = b.Allocate(ctx, claim)
	held("B's create on the full path", err)
	_, err = b.Allocate(ctx, req)
	held("B's create without a claim", err)
	if got, err := a.Reserve(ctx, req, time.Hour); err != nil || got.Address != h.Address {
		t.Fatalf("A's plan again: %+v %v, want its hold %s", got, err, h.Address)
	}

	if _, err := raw.Exec(ctx, `UPDATE ipam_allocations SET reserved_until = now() - interval '1 second',
		reusable_at = now() - interval '1 second' WHERE state = 'reserved'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Allocate(ctx, req); err != nil {
		t.Fatalf("B's create after A's hold expired: %v", err)
	}
	for _, try := range []string{"the apply's re-plan", "again in the same run"} {
		got, err := a.Reserve(ctx, req, time.Hour)
		if engine.Code(err) != engine.CodeOwnerConflict || got.Lost == nil || got.Lost.Address != h.Address || !got.Lost.Block.IsValid() ||
			!strings.Contains(got.Lost.TakenBy, "/work/b") {
			t.Fatalf("A's Reserve (%s) after B took the owner: %+v %v, want owner_conflict and Lost %s taken by B", try, got, err, h.Address)
		}
	}
	if got, err := open("/work/a", "run-2").Reserve(ctx, req, time.Hour); engine.Code(err) != engine.CodeOwnerConflict || got.Lost != nil {
		t.Fatalf("A's plan of a later run: %+v %v, want owner_conflict and no Lost", got, err)
	}
	if got, err := open("/work/c", "run-1").Reserve(ctx, req, time.Hour); engine.Code(err) != engine.CodeOwnerConflict || got.Lost != nil {
		t.Fatalf("a third configuration's plan: %+v %v, want owner_conflict and no Lost (the hold was not its)", got, err)
	}
}

// The manager is written by the statement that allocates: an allocation
// carries its configuration's origin the moment it commits, on the fast
// path and the full path alike, so two configurations (two origins, one
// actor) creating one owner at the same moment never both succeed: the
// loser finds the winner's origin and is refused.
func TestConcurrentCreatesOfTwoOriginsNeverBothSucceed(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	open := func(origin string) *engine.Client { return openOrigin(t, st, "terraform", origin) }
	a, b := open("/work/it's-a"), open(`C:\work\b`)
	// Recorded at once, by either path.
	for i, full := range []bool{false, true} {
		a.ForceFullPath(full)
		r, err := a.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node(fmt.Sprintf("solo%d", i))})
		a.ForceFullPath(false)
		if err != nil {
			t.Fatal(err)
		}
		var origin string
		if err := raw.QueryRow(ctx, `SELECT coalesce(origin, '') FROM ipam_allocations WHERE id = $1 AND origin_generation = generation`,
			r.ID).Scan(&origin); err != nil || origin != "/work/it's-a" {
			t.Fatalf("origin recorded with the allocation (full path %v): %q %v", full, origin, err)
		}
	}
	both := 0
	for round := range 100 {
		req := engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node(fmt.Sprintf("n%d", round))}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []*engine.Client{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = c.Allocate(ctx, req)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil && engine.Code(err) != engine.CodeOwnerConflict {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if errs[0] == nil && errs[1] == nil {
			both++
		}
	}
	if both > 0 {
		t.Fatalf("in %d of 100 rounds both configurations' creates of one owner succeeded", both)
	}
}

// openOrigin opens a second client on st's database, as actor with origin:
// another configuration.
func openOrigin(t *testing.T, st *engine.Client, actor, origin string) *engine.Client {
	t.Helper()
	c, err := engine.Open(context.Background(), engine.Config{DatabaseURL: testdbURLOf(t, st), Actor: actor, Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A replacement of an address set keeps each key where it is, also a key
// whose address is in a later pool of its list while an earlier one has
// room again: the create half of a create-first replacement takes the
// marked member over in its own pool, and that of a destroy-first one
// takes the key's cooling address back, instead of moving it to the first
// pool with room. A plan's hold of a key in a later pool is found again by
// the apply's re-plan, as the plan showed it.
func TestSetReplacementKeepsAKeyInALaterPool(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	for _, p := range []engine.Pool{
		{ClusterID: "c1", Name: "a", Cooldown: engine.NoCooldown, CIDRs: []netip.Prefix{netip.MustParsePrefix("198.51.100.8/29")}},
		{ClusterID: "c1", Name: "b", Cooldown: time.Hour, CIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.8/29")}},
	} {
		if _, err := st.CreatePool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// Pool a full of environments' addresses, so that the key lands in b.
	var filler []engine.Owner
	for i := 0; ; i++ {
		o := env(fmt.Sprintf("e%d", i))
		_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "a"), Owner: o})
		if engine.Code(err) == engine.CodeExhausted {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		filler = append(filler, o)
	}
	labels := engine.Owner{ID: "vm-1"}
	add := engine.SetChange{ClusterID: "c1", Owner: labels, Add: []engine.SetEntry{{Key: "pub", Pools: []string{"c1/a", "c1/b"}}}}
	members, err := st.ApplySet(ctx, add)
	if err != nil {
		t.Fatal(err)
	}
	if members[0].PoolID != "c1/b" {
		t.Fatalf("the key went to %s, want c1/b (c1/a is full)", members[0].PoolID)
	}
	if _, err := st.GetSet(ctx, "c1", "vm-1"); err != nil { // a refresh confirms it
		t.Fatal(err)
	}
	if ok, err := st.Release(ctx, "c1", filler[0], 0); err != nil || !ok { // pool a has room again
		t.Fatalf("release %s: %v %v", filler[0].ID, ok, err)
	}
	if err := st.MarkSetReplacement(ctx, "c1", "vm-1", map[string]int64{"pub": members[0].Generation}, time.Hour); err != nil {
		t.Fatal(err)
	}
	held, err := st.ReserveSetEntry(ctx, "c1", labels, add.Add[0], time.Hour)
	if err != nil || held.Address != members[0].Address {
		t.Fatalf("the replacement's plan: %s %v, want the key's own %s", held.Address, err, members[0].Address)
	}
	now, err := st.ApplySet(ctx, add)
	if err != nil || len(now) != 1 || now[0].Address != members[0].Address || now[0].Generation <= members[0].Generation {
		t.Fatalf("the replacement's create: %+v %v, want %s taken over in c1/b", now, err, members[0].Address)
	}

	// Destroy first: the key cools for its owner, and the create takes it back.
	if err := st.ReleaseSetAt(ctx, "c1", "vm-1", map[string]int64{"pub": now[0].Generation}); err != nil {
		t.Fatal(err)
	}
	again, err := st.ApplySet(ctx, add)
	if err != nil || len(again) != 1 || again[0].Address != members[0].Address {
		t.Fatalf("the create after the destroy: %+v %v, want the key's cooling %s back", again, err, members[0].Address)
	}

	// A plan holds a new key in b (a full again), a makes room, and the
	// apply's re-plan finds the hold the plan showed.
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "a"), Owner: filler[0]}); err != nil {
		t.Fatal(err)
	}
	plan := engine.SetEntry{Key: "egress", Pools: []string{"c1/a", "c1/b"}}
	planned, err := st.ReserveSetEntry(ctx, "c1", labels, plan, time.Hour)
	if err != nil || planned.PoolID != "c1/b" {
		t.Fatalf("the plan's hold: %+v %v, want one in c1/b", planned, err)
	}
	if ok, err := st.Release(ctx, "c1", filler[1], 0); err != nil || !ok {
		t.Fatalf("release %s: %v %v", filler[1].ID, ok, err)
	}
	if replanned, err := st.ReserveSetEntry(ctx, "c1", labels, plan, time.Hour); err != nil || replanned.Address != planned.Address {
		t.Fatalf("the apply's re-plan: %s %v, want the plan's %s", replanned.Address, err, planned.Address)
	}
}

// A generation names one allocation of its owner, ever: a release that
// carries a generation its state read long ago releases nothing, even when
// the owner has since been handed another address. Before, generations
// counted hand-outs per row, so an owner whose first address (a fresh row:
// generation 1) was released and who then got another fresh address (the
// pool's next one, its org having changed; or a claim) held generation 1
// again, and lost the new allocation to the old state's destroy. The same
// holds for a node's blocks, released and made again.
func TestStaleGenerationReleasesNothingOnAnotherAddress(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	// Not even two owners share one: i0's first address and i1's are both
	// fresh rows of the pool's one-statement take.
	i0, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: instance("i0")})
	if err != nil {
		t.Fatal(err)
	}
	o := instance("i1")
	var held []engine.AllocateResult
	for _, step := range []struct {
		org   string
		claim bool
	}{{"a", false}, {"b", false}, {"b", true}} {
		// Another org: not given its cooling address back (a fresh one);
		// or a claim of a fresh one.
		o.OrgID = step.org
		req := engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: o}
		if step.claim {
			req.Address = held[len(held)-1].Address.Next().Next()
		}
		r, err := st.Allocate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if r.Generation == i0.Generation {
			t.Errorf("i1's %s and i0's %s have one generation, %d", r.Address, i0.Address, r.Generation)
		}
		for _, old := range held {
			if r.Address == old.Address || r.Generation == old.Generation {
				t.Errorf("the owner's allocation %s at generation %d after %s at %d: want another address and generation",
					r.Address, r.Generation, old.Address, old.Generation)
			}
			if ok, err := st.Release(ctx, "c1", o, old.Generation); err != nil || ok {
				t.Fatalf("a stale release of %s at generation %d: released %v, %v; want nothing released", old.Address, old.Generation, ok, err)
			}
		}
		if got, err := st.GetActive(ctx, "c1", o.Kind, o.ID); err != nil || got.Address != r.Address {
			t.Fatalf("after the stale releases the owner holds %s (%v), want %s", got.Address, err, r.Address)
		}
		if ok, err := st.Release(ctx, "c1", o, r.Generation); err != nil || !ok {
			t.Fatalf("releasing %s: %v %v", r.Address, ok, err)
		}
		held = append(held, r)
	}
	// The owner's first address, cooled and then taken by another owner:
	// the owner has no row left, so its next allocation is a fresh one
	// again, as its first was.
	i2 := instance("i2")
	first, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: i2})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Release(ctx, "c1", i2, first.Generation); err != nil || !ok {
		t.Fatalf("releasing i2's first allocation: %v %v", ok, err)
	}
	age(t, raw, "c1/instance", engine.DefaultInstanceCooldown+time.Hour)
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: instance("i3"), Address: first.Address}); err != nil {
		t.Fatal(err)
	}
	second, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: i2})
	if err != nil || second.Generation == first.Generation {
		t.Fatalf("i2's second allocation: %s at generation %d (%v), its first's was %d", second.Address, second.Generation, err, first.Generation)
	}
	if ok, err := st.Release(ctx, "c1", i2, first.Generation); err != nil || ok {
		t.Fatalf("a stale release of i2's first allocation: released %v, %v; want nothing released", ok, err)
	}

	old, err := st.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.ReleaseNodeBlocksAt(ctx, "c1", "n1", old.Generation); err != nil || !ok {
		t.Fatalf("releasing the first blocks: %v %v", ok, err)
	}
	now, err := st.CreateNodeBlocks(ctx, "c1", "n1", scaling(4, 4))
	if err != nil {
		t.Fatal(err)
	}
	if now.Generation == old.Generation {
		t.Errorf("the node's blocks created again have the first blocks' generation %d", now.Generation)
	}
	if ok, err := st.ReleaseNodeBlocksAt(ctx, "c1", "n1", old.Generation); err != nil || ok {
		t.Fatalf("the first blocks' stale release: released %v, %v; want nothing released", ok, err)
	}
	if got, err := st.GetNodeBlocks(ctx, "c1", "n1"); err != nil || !slices.Equal(got.Blocks, now.Blocks) {
		t.Fatalf("n1's blocks after the stale release: %v %v, want %v", got.Blocks, err, now.Blocks)
	}
}
