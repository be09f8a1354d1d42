package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

func violations(t *testing.T, f *opsFixture, cluster string) []engine.Violation {
	t.Helper()
	rep, err := engine.OperatorOf(f.st).Check(f.ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	return rep.Violations
}

// findViolation returns the first violation of an invariant whose text
// contains want.
func findViolation(vs []engine.Violation, invariant, want string) bool {
	for _, v := range vs {
		if v.Invariant == invariant && strings.Contains(v.String(), want) {
			return true
		}
	}
	return false
}

// A database that went through allocation, release, reuse after cooldown, an
// exact IPv4 claim and a reclaim breaks no invariant.
func TestCheckHealthyDatabase(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	for _, i := range []string{"i1", "i2", "i3"} {
		f.alloc("c1/instance", instance(i))
	}
	f.alloc("c1/node", node("n1"))
	f.release(instance("i2"))
	age(t, f.raw, "c1/instance", 25*time.Hour)
	f.alloc("c1/v4", env("e1"))
	if _, err := f.st.Allocate(f.ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: env("e2"), Address: netip.MustParseAddr("198.51.100.5")}); err != nil {
		t.Fatal(err)
	}
	f.release(env("e1"))
	f.alloc("c1/v4", env("e1")) // its own cooling address back: allowed inside the cooldown
	// Fill the 2-address node pool (a /127) of another cluster, release,
	// let the cooldown pass (rows and event history alike), reuse.
	mkCluster(t, f.st, "c2", "2001:db9::/48", "2001:db9::/127", "")
	first := f.alloc("c2/node", node("a"))
	f.alloc("c2/node", node("b"))
	if _, err := f.st.Release(f.ctx, "c2", node("a"), 0); err != nil {
		t.Fatal(err)
	}
	age(t, f.raw, "c2/node", 31*24*time.Hour)
	f.exec(`UPDATE ipam_events SET at = at - interval '31 days',
		data = jsonb_set(data, '{reusable_at}', to_jsonb(to_char((now() - interval '1 day') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')))
		WHERE cluster_id = 'c2' AND type = 'node.released'`)
	if c := f.alloc("c2/node", node("c")); c.Address != first.Address {
		t.Fatalf("c got %s, want a's cooled-down %s", c.Address, first.Address)
	}
	if _, err := f.st.Reserve(f.ctx, engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance("planned")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	rep, err := engine.OperatorOf(f.st).Check(f.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Rows < 10 || len(rep.Invariants) != len(engine.Invariants) {
		t.Fatalf("healthy database: %d rows, violations %v", rep.Rows, rep.Violations)
	}
	if rep, err := engine.OperatorOf(f.st).Check(f.ctx, "c2"); err != nil || !rep.OK() || rep.ClusterID != "c2" {
		t.Fatalf("check c2: %+v %v", rep, err)
	}
	if _, err := engine.OperatorOf(f.st).Check(f.ctx, "nope"); engine.Code(err) != engine.CodeNotFound {
		t.Fatalf("unknown cluster: %v", err)
	}
}

func TestCheckFindsCorruption(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	for _, i := range []string{"i1", "i2", "i3", "i4"} {
		f.alloc("c1/instance", instance(i))
	}
	f.alloc("c1/v4", env("e1"))
	f.alloc("c1/v4", env("e2"))
	f.release(instance("i4"))

	// An active address moved outside its pool, past the row trigger that
	// refuses it (migration 12): check still reads what the data says.
	f.exec(`ALTER TABLE ipam_allocations DISABLE TRIGGER ipam_allocations_in_pool_update`)
	f.exec(`UPDATE ipam_allocations SET address = '2001:db8:0:7::1' WHERE owner_id = 'i1'`)
	// A second IPv4 for environment e1, past the owner index: same env label, other owner id.
	f.exec(`UPDATE ipam_allocations SET env_id = 'e1' WHERE owner_id = 'e2'`)
	// i4's cooling address handed to i5 at once, behind the allocator's back.
	f.exec(`UPDATE ipam_allocations SET state = 'active', owner_id = 'i5', instance_id = 'i5', generation = generation + 1,
		released_at = NULL, reusable_at = NULL, cooling_until = NULL WHERE owner_id = 'i4'`)
	f.exec(`INSERT INTO ipam_events (id, type, cluster_id, pool_id, allocation_id, address, owner_kind, owner_id, actor)
		SELECT gen_random_uuid(), 'instance.allocated', cluster_id, pool_id, id, address, 'instance', 'i5', 'rogue'
		FROM ipam_allocations WHERE owner_id = 'i5'`)
	vs := violations(t, f, "")
	for _, want := range []struct{ invariant, text string }{
		{engine.InvariantInPool, "address 2001:db8:0:7::1"},
		{engine.InvariantInPool, "outside its pool (2001:db8:0:1::/64)"},
		{engine.InvariantIPv4PerEnv, `environment "e1" holds 2 active IPv4 addresses`},
		{engine.InvariantIPv4PerEnv, `held by env_ipv4 owner "e2" but labelled with environment "e1"`},
		{engine.InvariantCooldown, `handed to instance "i5"`},
		{engine.InvariantCooldown, `but instance "i4" released it`},
	} {
		if !findViolation(vs, want.invariant, want.text) {
			t.Errorf("no %s violation saying %q in:\n%s", want.invariant, want.text, listViolations(vs))
		}
	}
	if findViolation(vs, engine.InvariantCounters, "") || findViolation(vs, engine.InvariantUniqueAddress, "") {
		t.Errorf("unexpected violations:\n%s", listViolations(vs))
	}

	// Counters moved back: they would hand out i2 and i3's ordinals again.
	f.exec(`UPDATE ipam_pool_stripes SET next_ordinal = stripe WHERE pool_id = 'c1/instance'`)
	// A stripe knocked out of its residue class, and one missing.
	f.exec(`UPDATE ipam_pool_stripes SET next_ordinal = 7 WHERE pool_id = 'c1/node' AND stripe = 5`)
	f.exec(`DELETE FROM ipam_pool_stripes WHERE pool_id = 'c1/node' AND stripe = 31`)
	// The same address active twice in a cluster, once the unique constraint is gone.
	f.exec(`ALTER TABLE ipam_allocations DROP CONSTRAINT ipam_allocations_address_cluster_id_key`)
	f.exec(`UPDATE ipam_allocations SET address = (SELECT address FROM ipam_allocations WHERE owner_id = 'i2') WHERE owner_id = 'i3'`)
	vs = violations(t, f, "c1")
	for _, want := range []struct{ invariant, text string }{
		{engine.InvariantCounters, "is at or beyond stripe 2's next ordinal 2"},
		{engine.InvariantCounters, "stripe 5 is at ordinal 7, outside its residue class"},
		{engine.InvariantCounters, "the pool has 32 stripes but 31 counters"},
		{engine.InvariantUniqueAddress, "active 2 times, held by instance i2, instance i3"},
	} {
		if !findViolation(vs, want.invariant, want.text) {
			t.Errorf("no %s violation saying %q in:\n%s", want.invariant, want.text, listViolations(vs))
		}
	}
}

// An exact claim lies beyond the counters by design; its event says so.
func TestCheckExemptsMarkedExactClaims(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.alloc("c1/instance", instance("i1"))
	if _, err := f.st.Allocate(f.ctx, engine.AllocateRequest{Pool: engine.InstancePool("c1"), Owner: instance("i2"),
		Address: netip.MustParseAddr("2001:db8:0:1::1000")}); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE ipam_events SET data = data || '{"exact": true}' WHERE owner_id = 'i2'`)
	if vs := violations(t, f, ""); len(vs) != 0 {
		t.Fatalf("violations:\n%s", listViolations(vs))
	}
}

func listViolations(vs []engine.Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}

// A hand-out inside another owner's cooldown is a violation even when the
// event just before it is not that release: here the releasing owner held the
// address again for a while (a plan-time hold that expired) before another
// owner got it.
func TestCheckCooldownLooksPastTheLastEvent(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	a := f.alloc("c1/instance", instance("a"))
	f.release(instance("a"))
	// a's own hold on its cooling address, then the hold expires and is dropped.
	f.exec(`INSERT INTO ipam_events (id, type, cluster_id, pool_id, allocation_id, address, owner_kind, owner_id, actor)
		VALUES (gen_random_uuid(), 'allocation.reserved', 'c1', 'c1/instance', $1, $2, 'instance', 'a', 'terraform')`,
		a.ID, netip.PrefixFrom(a.Address, 128))
	f.exec(`INSERT INTO ipam_events (id, type, cluster_id, pool_id, allocation_id, address, owner_kind, owner_id, actor)
		VALUES (gen_random_uuid(), 'allocation.hold_dropped', 'c1', 'c1/instance', $1, $2, 'instance', 'a', 'terraform')`,
		a.ID, netip.PrefixFrom(a.Address, 128))
	// b gets it, still inside a's 24 h cooldown.
	f.exec(`UPDATE ipam_allocations SET state = 'active', owner_id = 'b', instance_id = 'b', released_at = NULL, reusable_at = NULL, cooling_until = NULL WHERE owner_id = 'a'`)
	f.exec(`INSERT INTO ipam_events (id, type, cluster_id, pool_id, allocation_id, address, owner_kind, owner_id, actor)
		VALUES (gen_random_uuid(), 'instance.allocated', 'c1', 'c1/instance', $1, $2, 'instance', 'b', 'terraform')`,
		a.ID, netip.PrefixFrom(a.Address, 128))
	vs := violations(t, f, "c1")
	if !findViolation(vs, engine.InvariantCooldown, `handed to instance "b"`) || !findViolation(vs, engine.InvariantCooldown, `instance "a" released it`) {
		t.Fatalf("no cooldown violation in:\n%s", listViolations(vs))
	}
	// a taking its own address back is not one.
	if findViolation(vs, engine.InvariantCooldown, `handed to instance "a"`) {
		t.Fatalf("the owner's own hold is reported:\n%s", listViolations(vs))
	}
}

// The cooldown audit judges each hand-out against the latest release of its
// address before it (in time, then id, order) that recorded a reusable
// time, and only when another owner released it. Random histories of a few
// addresses and owners, many events at the same instant, are checked
// against that rule written out here.
func TestCheckCooldownJudgesTheLatestReleaseBefore(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	type event struct {
		id          uuid.UUID
		at          time.Time
		typ, owner  string
		addr        netip.Prefix
		release     bool
		reusable    time.Time // release: zero when it records none
		wantFlagged bool
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var evs []event
	for i := 0; i < 150; i++ { // fewer flagged than the 100 a check lists per invariant
		e := event{id: uuid.New(), at: base.Add(time.Duration(rng.IntN(40)) * time.Hour),
			owner: []string{"a", "b", "c"}[rng.IntN(3)],
			addr:  netip.PrefixFrom(netip.MustParseAddr(fmt.Sprintf("2001:db8:0:1::%x", 16+rng.IntN(4))), 128)}
		switch rng.IntN(5) {
		case 0, 1:
			e.typ = []string{"instance.allocated", "allocation.reserved"}[rng.IntN(2)]
		case 2, 3:
			e.typ, e.release = []string{"instance.released", "allocation.reclaimed"}[rng.IntN(2)], true
			e.reusable = e.at.Add(time.Duration(rng.IntN(12)) * time.Hour)
		default:
			e.typ, e.release = "allocation.hold_dropped", true // records no reusable time: not judged
		}
		evs = append(evs, e)
	}
	before := func(a, b event) bool {
		return a.at.Before(b.at) || (a.at.Equal(b.at) && bytes.Compare(a.id[:], b.id[:]) < 0)
	}
	want := map[string]bool{}
	for i, h := range evs {
		if h.release {
			continue
		}
		var latest *event
		for j, r := range evs {
			if r.release && !r.reusable.IsZero() && r.addr == h.addr && before(r, h) && (latest == nil || before(*latest, r)) {
				latest = &evs[j]
			}
		}
		if latest != nil && latest.reusable.After(h.at) && latest.owner != h.owner {
			evs[i].wantFlagged = true
			want[h.id.String()] = true
		}
	}
	for _, e := range evs {
		data := "{}"
		if !e.reusable.IsZero() {
			data = fmt.Sprintf(`{"reusable_at": %q}`, e.reusable.Format(time.RFC3339))
		}
		f.exec(`INSERT INTO ipam_events (id, at, type, cluster_id, pool_id, address, owner_kind, owner_id, actor, data)
			VALUES ($1, $2, $3, 'c1', 'c1/instance', $4, 'instance', $5, 'test', $6)`, e.id, e.at, e.typ, e.addr, e.owner, data)
	}
	got := map[string]bool{}
	for _, v := range violations(t, f, "c1") {
		if v.Invariant != engine.InvariantCooldown {
			continue
		}
		for id := range want {
			if strings.Contains(v.Detail, id) {
				got[id] = true
			}
		}
		if !slices.ContainsFunc(evs, func(e event) bool { return e.wantFlagged && strings.Contains(v.Detail, e.id.String()) }) {
			t.Errorf("flagged, but no later release of another owner was cooling: %s", v)
		}
	}
	for id := range want {
		if !got[id] {
			t.Errorf("hand-out %s inside another owner's cooldown not flagged", id)
		}
	}
	if len(want) == 0 {
		t.Fatal("the random history has no hand-out to flag: the test checks nothing")
	}
}

// A cluster's instance counter ends below its lowest node block and not
// below its blocks' half (a carve lowers it under the half, under what the
// counter had handed out past it, or under its block; an earlier version
// lowered it under each block); any other top is a violation.
func TestCheckInstanceCounterBelowTheBlocks(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "2001:db8::/120", "2001:db8:0:1::/120")
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", scaling(-1, 4)); err != nil {
		t.Fatal(err)
	}
	check := func(top int) []engine.Violation {
		t.Helper()
		if top >= 0 {
			if _, err := raw.Exec(ctx, `UPDATE ipam_pool_stripes SET last_ordinal = $1 WHERE pool_id = 'c1/instance'`, top); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := engine.OperatorOf(st).Check(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		return rep.Violations
	}
	// The blocks' half starts at ::80 (ordinal 128); the one block is ::f0/124.
	if vs := check(-1); len(vs) != 0 {
		t.Fatalf("after the first carve:\n%s", listViolations(vs))
	}
	if vs := check(239); len(vs) != 0 {
		t.Fatalf("a top below the lowest block, as an earlier version left it:\n%s", listViolations(vs))
	}
	if vs := check(200); len(vs) != 0 {
		t.Fatalf("a top between the two:\n%s", listViolations(vs))
	}
	for _, top := range []int{240, 100} {
		if vs := check(top); !findViolation(vs, engine.InvariantCounters,
			fmt.Sprintf("stripe 0 ends at ordinal %d, but the pool's last ordinal is from 127 (below its node blocks' half) to 239 (below its lowest block)", top)) {
			t.Fatalf("a top of %d: no violation naming it in:\n%s", top, listViolations(vs))
		}
	}
	if _, err := raw.Exec(ctx, `UPDATE ipam_pool_stripes SET last_ordinal = 150 WHERE pool_id = 'c1/instance' AND stripe = 3`); err != nil {
		t.Fatal(err)
	}
	if vs := check(-1); !findViolation(vs, engine.InvariantCounters, "stripe 3 ends at ordinal 150, but stripe 0 at 100: the stripes end together") {
		t.Fatalf("stripes ending apart: no violation naming them in:\n%s", listViolations(vs))
	}
}
