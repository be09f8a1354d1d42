package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// An operator expires a plan's hold (ipamctl expire-hold): the hold's own
// time ends now, recorded with the reason, and from then on it is an
// expired hold to every path. Another configuration may take its owner,
// another owner its address, and the plan that took it is told that it
// lost it; a hold that kept its owner's cooldown keeps it. Expiring again
// does nothing and says so; what is no hold is not found.
func TestExpireHold(t *testing.T) {
	sts, raw := seamStores(t, "terraform", "ci")
	tf, ci := sts[0], sts[1]
	ctx := context.Background()
	mkCluster(t, tf, "c1", "2001:db8::/48", "", "")
	if _, err := tf.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: prefixes("198.51.100.0/29")}); err != nil {
		t.Fatal(err)
	}
	v4 := testdb.Pool("c1/v4")
	op := engine.OperatorOf(tf)
	events := func() []engine.Event {
		t.Helper()
		evs, err := op.ListEvents(ctx, engine.EventFilter{ClusterID: "c1", Types: []string{engine.EventHoldExpired}})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	env := func(id string) engine.Owner {
		return engine.Owner{Kind: engine.OwnerEnvIPv4, ID: id, OrgID: "acme", EnvID: id}
	}

	// A CI plan (actor ci) holds env e1's address, which blocks another
	// actor's configuration from declaring e1 for an hour.
	h, err := ci.Reserve(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e1")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e1")}); !errors.Is(err, engine.ErrOwnerConflict) {
		t.Fatalf("another actor's create while the plan holds e1: %v, want owner_conflict", err)
	}
	t0 := time.Now()
	r, err := op.ExpireHold(ctx, engine.HoldRequest{Address: h.Address, Reason: "CI plan abandoned"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Address != h.Address || r.State != engine.StateReserved || !r.HoldExpired || !r.Reusable || r.AlreadyExpired ||
		r.Until.Before(t0.Add(50*time.Minute)) || r.Category != engine.CategoryIPv4 || r.Actor != "ci" {
		t.Fatalf("expired %+v", r)
	}
	evs := events()
	if len(evs) != 1 || evs[0].Data["reason"] != "CI plan abandoned" || evs[0].Data["expired_by"] != "operator" ||
		evs[0].Data["holder_actor"] != "ci" || evs[0].Address != h.Address || evs[0].Actor != "terraform" {
		t.Fatalf("events %+v", evs)
	}
	// Again, by owner: nothing to do, and no event.
	again, err := op.ExpireHold(ctx, engine.HoldRequest{ClusterID: "c1", OwnerKind: engine.OwnerEnvIPv4, OwnerID: "e1", Reason: "again"})
	if err != nil || !again.AlreadyExpired || again.Address != h.Address || !again.Until.Equal(r.ReusableAt) {
		t.Fatalf("expiring again: %+v %v, want AlreadyExpired at %s", again, err, r.ReusableAt)
	}
	if evs := events(); len(evs) != 1 {
		t.Fatalf("expiring again wrote an event: %+v", evs)
	}

	// Now the other configuration takes the owner, and the CI plan's
	// re-plan is told its hold was lost (no new hold), so its apply fails
	// rather than apply another address.
	a, err := tf.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e1")})
	if err != nil {
		t.Fatalf("another actor's create after the expiry: %v", err)
	}
	if _, err := ci.Reserve(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e1")}, time.Hour); !errors.Is(err, engine.ErrOwnerConflict) {
		t.Fatalf("the CI plan again after its owner was taken: %v, want owner_conflict", err)
	}
	if _, err := op.ExpireHold(ctx, engine.HoldRequest{Address: a.Address, Reason: "x"}); !errors.Is(err, engine.ErrNotFound) ||
		!strings.Contains(err.Error(), "is the active allocation of env_ipv4 \"e1\"") || !strings.Contains(err.Error(), "ipamctl release") {
		t.Fatalf("expiring an allocation: %v, want not_found naming it", err)
	}

	// Another owner takes an expired hold's address at once: a claim of it.
	h2, err := ci.Reserve(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e2")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e3"), Address: h2.Address}); engine.Code(err) != engine.CodeAddressInUse {
		t.Fatalf("a claim of a held address: %v, want address_in_use", err)
	}
	if _, err := op.ExpireHold(ctx, engine.HoldRequest{ClusterID: "c1", OwnerKind: engine.OwnerEnvIPv4, OwnerID: "e2", Reason: "plan abandoned"}); err != nil {
		t.Fatal(err)
	}
	if got, err := tf.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e3"), Address: h2.Address}); err != nil || got.Address != h2.Address {
		t.Fatalf("a claim of the expired hold's address: %+v %v", got, err)
	}

	// A hold on its owner's own cooling address keeps the cooldown: the
	// address goes to no one else before it ends.
	b, err := tf.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e4")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := tf.Release(ctx, "c1", env("e4"), 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	hb, err := tf.Reserve(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e4")}, time.Hour)
	if err != nil || hb.Address != b.Address {
		t.Fatalf("a plan of e4 after its release: %+v %v, want its cooling address %s", hb, err, b.Address)
	}
	rb, err := op.ExpireHold(ctx, engine.HoldRequest{Address: b.Address, ClusterID: "c1", Reason: "x"})
	if err != nil || !rb.HoldExpired || rb.Reusable || rb.ReusableAt.Before(t0.Add(50*time.Minute)) {
		t.Fatalf("expiring a hold that kept a cooldown: %+v %v, want it cooling still", rb, err)
	}
	if _, err := tf.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: env("e5"), Address: b.Address}); engine.Code(err) != engine.CodeAddressCooling {
		t.Fatalf("a claim of it by another owner: %v, want address_cooling", err)
	}
	// Listed as cooling, as lookup says, where the cooling are listed.
	views, err := op.ListAllocations(ctx, engine.ListFilter{ClusterID: "c1", State: engine.StateCooling})
	if err != nil || !slices.ContainsFunc(views, func(v engine.AllocationView) bool {
		return v.Address == b.Address && v.State == engine.StateCooling
	}) {
		t.Fatalf("the cooling allocations: %+v %v, want %s cooling", views, err, b.Address)
	}

	// What names no hold, and bad input, writing nothing.
	if _, err := op.ExpireHold(ctx, engine.HoldRequest{ClusterID: "c1", OwnerKind: "node", OwnerID: "never", Reason: "x"}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("an owner with no hold: %v, want not_found", err)
	}
	for _, c := range []struct {
		req   engine.HoldRequest
		field string
	}{
		{engine.HoldRequest{Address: h.Address}, "reason"},
		{engine.HoldRequest{Reason: "x"}, "owner_id"},
		{engine.HoldRequest{Reason: "x", OwnerKind: "node", OwnerID: "n1"}, "cluster_id"},
		{engine.HoldRequest{Reason: "x", Address: h.Address, OwnerID: "n1"}, "address"},
		{engine.HoldRequest{Reason: "x", ClusterID: "c1", OwnerKind: "vm", OwnerID: "n1"}, "owner_kind"},
	} {
		var ie *engine.InvalidError
		if _, err := op.ExpireHold(ctx, c.req); !errors.As(err, &ie) || ie.Field != c.field {
			t.Errorf("%+v: %v, want invalid_input naming %s", c.req, err, c.field)
		}
	}
	if n := seamCount(t, raw, `SELECT count(*) FROM ipam_events WHERE type = $1`, engine.EventHoldExpired); n != 3 {
		t.Errorf("%d hold_expired events, want 3", n)
	}
}

// A plan extends its hold when less than half its time is left, judged by
// the hold's own time. A hold on its owner's own cooling address keeps the
// cooldown in reusable_at, which the plan's first look read as the hold's
// time: a hold whose cooldown outlasted its reservation_ttl was returned,
// unextended, by every plan, and once its own time was over another
// configuration took the owner (found by the linearizability test, with an
// operator's expiry).
func TestAPlanExtendsAHoldThatKeptACooldown(t *testing.T) {
	sts, raw := seamStores(t, "terraform", "ci")
	tf, ci := sts[0], sts[1]
	ctx := context.Background()
	v4, e1, a := cooledE1(t, tf)
	h, err := tf.Reserve(ctx, engine.AllocateRequest{Pool: v4, Owner: e1}, 10*time.Minute)
	if err != nil || h.Address != a.Address {
		t.Fatalf("a plan of e1 after its release: %+v %v, want its cooling address", h, err)
	}
	// Nine minutes later (less than half the time left), the next plan.
	seamClock(t, raw, 9*time.Minute)
	if _, err := tf.Reserve(ctx, engine.AllocateRequest{Pool: v4, Owner: e1}, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Ten minutes after the first plan, the hold must still be live.
	seamClock(t, raw, 10*time.Minute+30*time.Second)
	if n := seamCount(t, raw, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'e1' AND state = 'reserved' AND reserved_until > ipam_now()`); n != 1 {
		t.Fatalf("the hold the second plan returned is not live ten minutes after the first plan (%d live holds)", n)
	}
	if _, err := ci.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: e1}); !errors.Is(err, engine.ErrOwnerConflict) {
		t.Fatalf("another actor declaring e1 while a plan holds it: %v, want owner_conflict", err)
	}
}

// heldE1 is the fixture of the hold explorer tests: cluster c1 with the
// IPv4 pool c1/v4 (198.51.100.0/29, one hour cooldown), and env e1 held by
// a plan of origin on 198.51.100.1 for ttl, then the clock moved on by
// later (0: not).
func heldE1(name, origin string, ttl, later time.Duration) exploreFixture {
	return exploreFixture{name: name, setup: func(e *exploreEnv) {
		e.t.Helper()
		e.cluster("c1", "2001:db8:1::/48")
		if _, err := e.st.CreatePool(ctxBG, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
			CIDRs: []netip.Prefix{pfx("198.51.100.0/29")}}); err != nil {
			e.t.Fatal(err)
		}
		h, err := originClient(e, origin).Reserve(ctxBG, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: envOwner("e1")}, ttl)
		if err != nil || h.Address != netip.MustParseAddr("198.51.100.1") {
			e.t.Fatalf("plan: %+v %v", h, err)
		}
		if later > 0 {
			e.clock(later)
		}
	}}
}

// A plan of configuration B extends its expired hold on e1 while
// configuration A (the same actor) declares e1, which drops another
// manager's hold once its time is over. Paused at each statement boundary
// of either, in both orders, one of them wins: B's plan holds the address
// (A is refused with owner_conflict), or A has it (B's plan is refused).
// A's drop read the hold as expired early in its transaction and wrote by
// the row's key alone, so it dropped the hold B's plan had just extended
// and answered (found by the linearizability test, with an operator's
// expiry).
func TestAnExtendedHoldIsNotTakenOver(t *testing.T) {
	t.Parallel()
	e := newExploreEnv(t)
	pool := engine.OperatorPool("c1", "v4")
	fx := heldE1("e1 held by /cfg/b, expired", "/cfg/b", time.Minute, 2*time.Minute)
	var plan engine.Hold
	var planErr, createErr error
	var created engine.AllocateResult
	planB := exploreStep{name: "a plan of /cfg/b holds e1 again", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		plan, planErr = originClient(e, "/cfg/b").Reserve(ctx, engine.AllocateRequest{Pool: pool, Owner: envOwner("e1")}, time.Hour)
		return exploreAck{}, planErr
	}}
	createA := exploreStep{name: "/cfg/a creates e1", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		created, createErr = originClient(e, "/cfg/a").Allocate(ctx, engine.AllocateRequest{Pool: pool, Owner: envOwner("e1")})
		if createErr != nil {
			return exploreAck{}, createErr
		}
		return exploreAck{held: []engine.Allocation{created.Allocation}, origin: "/cfg/a"}, nil
	}}
	for _, pair := range [][2]exploreStep{{planB, createA}, {createA, planB}} {
		k := countBoundaries(e, fx, pair[0])
		for i := 0; i <= k; i++ {
			msg := exploreRun(e, fx, pair[0], pair[1], int32(i))
			var live bool
			if err := e.raw.QueryRow(ctxBG, `SELECT EXISTS (SELECT 1 FROM ipam_allocations WHERE owner_id = 'e1' AND state = 'reserved'
				AND reserved_until > ipam_now() AND origin = '/cfg/b')`).Scan(&live); err != nil {
				t.Fatal(err)
			}
			switch {
			case planErr == nil && createErr == nil:
				msg += fmt.Sprintf("\n  both won: /cfg/b's plan holds %s, and /cfg/a created e1 on %s", plan.Address, created.Address)
			case planErr == nil && !live:
				msg += fmt.Sprintf("\n  /cfg/b's plan was told it holds %s, and no live hold of /cfg/b is left", plan.Address)
			case planErr != nil && createErr != nil:
				msg += fmt.Sprintf("\n  neither won: %v; %v", planErr, createErr)
			}
			if msg != "" {
				t.Errorf("%s first, paused before its statement %d of %d:\n%s", pair[0].name, i+1, k, msg)
			}
		}
	}
}

// An operator expires a plan's hold while the plan's apply confirms it:
// paused at each statement boundary of either, in both orders, the apply's
// allocation is active and in no reuse queue, and the expiry answers the
// hold it expired or that there is none (not_found), never an allocation
// it changed.
func TestAHoldExpiredWhileItsPlanIsApplied(t *testing.T) {
	t.Parallel()
	e := newExploreEnv(t)
	pool := engine.OperatorPool("c1", "v4")
	planned := netip.MustParseAddr("198.51.100.1")
	fx := heldE1("e1 held by /cfg/a", "/cfg/a", time.Hour, 0)
	var expired engine.ExpireHoldResult
	var expireErr error
	expire := exploreStep{name: "ipamctl expire-hold of e1", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		expired, expireErr = engine.OperatorOf(e.st).ExpireHold(ctx, engine.HoldRequest{ClusterID: "c1", OwnerKind: engine.OwnerEnvIPv4,
			OwnerID: "e1", Reason: "test"})
		return exploreAck{}, expireErr
	}}
	apply := originAllocStep("the apply of /cfg/a confirms e1", "/cfg/a", engine.AllocateRequest{Pool: pool, Owner: envOwner("e1"), Address: planned})
	for _, pair := range [][2]exploreStep{{expire, apply}, {apply, expire}} {
		k := countBoundaries(e, fx, pair[0])
		for i := 0; i <= k; i++ {
			msg := exploreRun(e, fx, pair[0], pair[1], int32(i))
			var queued int
			if err := e.raw.QueryRow(ctxBG, `SELECT count(*) FROM ipam_allocations WHERE state = 'active' AND reusable_at IS NOT NULL`).Scan(&queued); err != nil {
				t.Fatal(err)
			}
			if queued > 0 {
				msg += fmt.Sprintf("\n  %d active allocations are in the reuse queue", queued)
			}
			if expireErr == nil && (expired.State != engine.StateReserved || !expired.HoldExpired) {
				msg += fmt.Sprintf("\n  the expiry answered %+v, not an expired hold", expired.Allocation)
			}
			if expireErr != nil && !errors.Is(expireErr, engine.ErrNotFound) {
				msg += fmt.Sprintf("\n  the expiry failed: %v", expireErr)
			}
			if msg != "" {
				t.Errorf("%s first, paused before its statement %d of %d:\n%s", pair[0].name, i+1, k, msg)
			}
		}
	}
}

// A plan of /cfg/a for e1, whose hold on 198.51.100.1 expired, while env
// e2 claims that address (taking the expired hold, a loss for e1): paused
// at each statement boundary of either, in both orders, the plan extends
// its hold (and the claim is refused), or is told the loss (hold_lost) and
// holds nothing. The plan read the loss in its first round trip only: a
// claim between that read and its transaction left it holding a new
// address, untold, while its saved plan still showed the lost one (found
// by the linearizability test, a known anomaly until then).
func TestAPlanIsToldOfAHoldLostAfterItsFirstLook(t *testing.T) {
	t.Parallel()
	e := newExploreEnv(t)
	pool := engine.OperatorPool("c1", "v4")
	planned := netip.MustParseAddr("198.51.100.1")
	fx := heldE1("e1 held by /cfg/a on 198.51.100.1, expired", "/cfg/a", time.Minute, 2*time.Minute)
	var plan engine.Hold
	var planErr, claimErr error
	planA := exploreStep{name: "a plan of /cfg/a holds e1 again", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		plan, planErr = originClient(e, "/cfg/a").Reserve(ctx, engine.AllocateRequest{Pool: pool, Owner: envOwner("e1")}, time.Hour)
		return exploreAck{}, planErr
	}}
	claim := originAllocStep("/cfg/b claims 198.51.100.1 for e2", "/cfg/b", engine.AllocateRequest{Pool: pool, Owner: envOwner("e2"), Address: planned})
	claimStep := exploreStep{name: claim.name, run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		ack, err := claim.run(ctx, e)
		claimErr = err
		return ack, err
	}}
	for _, pair := range [][2]exploreStep{{planA, claimStep}, {claimStep, planA}} {
		k := countBoundaries(e, fx, pair[0])
		for i := 0; i <= k; i++ {
			msg := exploreRun(e, fx, pair[0], pair[1], int32(i))
			var holds int
			if err := e.raw.QueryRow(ctxBG, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'e1' AND state = 'reserved'
				AND reserved_until > ipam_now()`).Scan(&holds); err != nil {
				t.Fatal(err)
			}
			switch {
			case claimErr == nil && !errors.Is(planErr, engine.ErrHoldLost):
				msg += fmt.Sprintf("\n  e2 took e1's expired hold, and the plan was not told: %+v %v", plan.Allocation, planErr)
			case claimErr == nil && holds != 0:
				msg += fmt.Sprintf("\n  the plan was told its hold was lost, and e1 holds %d addresses", holds)
			case claimErr != nil && (planErr != nil || plan.Address != planned):
				msg += fmt.Sprintf("\n  the claim was refused (%v), and the plan did not keep its hold: %+v %v", claimErr, plan.Allocation, planErr)
			}
			if msg != "" {
				t.Errorf("%s first, paused before its statement %d of %d:\n%s", pair[0].name, i+1, k, msg)
			}
		}
	}
}

// A plan that took back its owner's cooling address, abandoned and
// expired: another configuration that declares the owner drops the hold
// and gets that address back, the owner's own cooling one, as any request
// of the owner does. It got a new address, and the owner's old one cooled
// unused for the rest of its cooldown.
func TestAnotherConfigurationGetsTheOwnersCoolingAddressBack(t *testing.T) {
	ctx := context.Background()
	a, b, _ := twoConfigurations(t, 24*time.Hour)
	v4 := testdb.Pool("c1/v4")
	shop := engine.Owner{Kind: engine.OwnerEnvIPv4, ID: "shop", OrgID: "acme", EnvID: "shop"}
	for _, take := range []func(engine.AllocateRequest) (engine.Allocation, error){
		func(r engine.AllocateRequest) (engine.Allocation, error) {
			x, err := b.Allocate(ctx, r)
			return x.Allocation, err
		},
		func(r engine.AllocateRequest) (engine.Allocation, error) {
			h, err := b.Reserve(ctx, r, time.Hour)
			return h.Allocation, err
		},
	} {
		first, err := a.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: shop})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := a.Release(ctx, "c1", shop, 0); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if h, err := a.Reserve(ctx, engine.AllocateRequest{Pool: v4, Owner: shop}, time.Hour); err != nil || h.Address != first.Address {
			t.Fatalf("a plan of /cfg/a: %+v %v, want its cooling %s", h, err, first.Address)
		}
		if _, err := engine.OperatorOf(a).ExpireHold(ctx, engine.HoldRequest{ClusterID: "c1", OwnerKind: shop.Kind, OwnerID: shop.ID,
			Reason: "abandoned"}); err != nil {
			t.Fatal(err)
		}
		got, err := take(engine.AllocateRequest{Pool: v4, Owner: shop})
		if err != nil || got.Address != first.Address {
			t.Fatalf("/cfg/b declares shop after /cfg/a's hold expired: %+v %v, want its own cooling address %s back", got.Address, err, first.Address)
		}
		if got.State == engine.StateReserved {
			if _, err := b.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: shop, Address: got.Address}); err != nil {
				t.Fatal(err)
			}
		}
		if ok, err := b.Release(ctx, "c1", shop, 0); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if _, err := a.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: shop}); err != nil { // the next round's first
			t.Fatal(err)
		}
		if ok, err := a.Release(ctx, "c1", shop, 0); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
}

// The refusals that name a plan's hold on its owner's own cooling address
// say when the hold's own time ends, not the cooldown it kept: another
// owner's claim (address_in_use) and another configuration of the owner
// (owner_conflict, told to wait for the hold to expire). They named the
// cooldown's end: a day instead of reservation_ttl.
func TestARefusalNamesTheHoldsOwnTime(t *testing.T) {
	ctx := context.Background()
	a, b, _ := twoConfigurations(t, 24*time.Hour)
	v4 := testdb.Pool("c1/v4")
	shop := engine.Owner{Kind: engine.OwnerEnvIPv4, ID: "shop", OrgID: "acme", EnvID: "shop"}
	first, err := a.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: shop})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Release(ctx, "c1", shop, 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := a.Reserve(ctx, engine.AllocateRequest{Pool: v4, Owner: shop}, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	soon := func(when time.Time) bool {
		return when.After(time.Now().Add(8*time.Minute)) && when.Before(time.Now().Add(12*time.Minute))
	}
	_, err = b.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: engine.Owner{Kind: engine.OwnerEnvIPv4, ID: "other", OrgID: "acme", EnvID: "other"},
		Address: first.Address})
	var iu *engine.AddressInUseError
	if !errors.As(err, &iu) || !soon(iu.Until) {
		t.Errorf("another owner's claim of the held address: %v, want address_in_use until the hold's end, in about 10 minutes", err)
	}
	_, err = b.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: shop})
	m := regexp.MustCompile(`holds it until (\S+),`).FindStringSubmatch(fmt.Sprint(err))
	var when time.Time
	if m != nil {
		when, _ = time.Parse(time.RFC3339, m[1])
	}
	if !errors.Is(err, engine.ErrOwnerConflict) || !soon(when) {
		t.Errorf("another configuration declaring shop: %v, want owner_conflict naming the hold's end, in about 10 minutes", err)
	}
}

// A saved plan applied after another configuration of the same actor took
// its owner claims the planned address while the owner holds another: the
// refusal names the configuration that manages the owner now, and does not
// tell to release that configuration's address (it said "release it
// first").
func TestAClaimRefusedForAnotherConfigurationsOwnerNamesIt(t *testing.T) {
	ctx := context.Background()
	a, b, _ := twoConfigurations(t, time.Hour)
	v4 := testdb.Pool("c1/v4")
	shop := engine.Owner{Kind: engine.OwnerEnvIPv4, ID: "shop", OrgID: "acme", EnvID: "shop"}
	got, err := b.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: shop, Address: netip.MustParseAddr("198.51.100.2")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: shop, Address: netip.MustParseAddr("198.51.100.1")})
	if !errors.Is(err, engine.ErrOwnerConflict) || strings.Contains(err.Error(), "release it first") || !strings.Contains(err.Error(), `"/cfg/b"`) ||
		!strings.Contains(err.Error(), got.Address.String()) {
		t.Fatalf("/cfg/a claims 198.51.100.1 for shop, which /cfg/b holds at %s: %v, want owner_conflict naming /cfg/b", got.Address, err)
	}
}

// A set key's plan is told of its lost hold as an owner's plan is
// (Reserve): after another owner took the expired hold's address, the first
// plan of the key gets hold_lost naming it and takes no hold, the next one
// a new hold; after another configuration took the key, the plan of the
// hold's configuration gets owner_conflict with the lost hold in
// SetMember.Lost, once.
func TestASetKeysPlanIsToldOfItsLostHold(t *testing.T) {
	ctx := context.Background()
	a, b, url := twoConfigurations(t, time.Hour)
	labels := engine.Owner{ID: "vm", OrgID: "acme", EnvID: "prod"}
	key := engine.SetEntry{Key: "public", Pools: []string{"c1/v4"}}
	expire := func() {
		t.Helper()
		if _, err := engine.OperatorOf(a).ExpireHold(ctx, engine.HoldRequest{ClusterID: "c1", OwnerKind: engine.OwnerSet, OwnerID: "vm#public",
			Reason: "abandoned"}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := a.ReserveSetEntry(ctx, "c1", labels, key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expire()
	if _, err := b.Allocate(ctx, engine.AllocateRequest{Pool: testdb.Pool("c1/v4"), Address: h.Address,
		Owner: engine.Owner{Kind: engine.OwnerEnvIPv4, ID: "thief", OrgID: "acme", EnvID: "thief"}}); err != nil {
		t.Fatal(err)
	}
	m, err := a.ReserveSetEntry(ctx, "c1", labels, key, time.Hour)
	var hl *engine.HoldLostError
	if !errors.As(err, &hl) || hl.Lost.Address != h.Address || m.Lost == nil || m.Lost.PoolID != "c1/v4" {
		t.Fatalf("the key's plan after another owner took its hold's address: %+v %v, want hold_lost naming %s", m.Lost, err, h.Address)
	}
	if n := seamCountURL(t, url, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'vm#public'`); n != 0 {
		t.Fatalf("the plan told of the loss left %d rows of the key, want none", n)
	}
	h2, err := a.ReserveSetEntry(ctx, "c1", labels, key, time.Hour)
	if err != nil || h2.Address == h.Address {
		t.Fatalf("the next plan: %+v %v, want a new hold", h2.Address, err)
	}
	// Another configuration takes the key once this hold expires.
	expire()
	if _, err := b.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: labels, Add: []engine.SetEntry{key}}); err != nil {
		t.Fatal(err)
	}
	m, err = a.ReserveSetEntry(ctx, "c1", labels, key, time.Hour)
	if !errors.Is(err, engine.ErrOwnerConflict) || m.Lost == nil || m.Lost.Address != h2.Address {
		t.Fatalf("the key's plan after another configuration took it: %+v %v, want owner_conflict with the lost %s", m.Lost, err, h2.Address)
	}
	if m, err := a.ReserveSetEntry(ctx, "c1", labels, key, time.Hour); !errors.Is(err, engine.ErrOwnerConflict) || m.Lost != nil {
		t.Fatalf("the key's next plan: %+v %v, want owner_conflict, the loss told once", m.Lost, err)
	}
}

func seamCountURL(t *testing.T, url, sql string) int64 {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	return seamCount(t, c, sql)
}

// twoConfigurations opens clients of actor terraform for configurations
// /cfg/a and /cfg/b on a new database (its URL), with cluster c1 and its
// IPv4 pool c1/v4 (198.51.100.0/29) of the cooldown given.
func twoConfigurations(t *testing.T, cooldown time.Duration) (a, b *engine.Client, url string) {
	t.Helper()
	url = testdb.New(t)
	open := func(origin string) *engine.Client {
		st, err := engine.Open(context.Background(), engine.Config{DatabaseURL: url, Actor: "terraform", Origin: origin})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	a, b = open("/cfg/a"), open("/cfg/b")
	mkCluster(t, a, "c1", "2001:db8::/48", "", "")
	if _, err := a.CreatePool(context.Background(), engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: cooldown,
		CIDRs: prefixes("198.51.100.0/29")}); err != nil {
		t.Fatal(err)
	}
	return a, b, url
}

// An expired hold that kept its owner's cooldown is cooling: usage counts
// it, and its next-reusable time is the cooldown's end. Usage counted it
// and showed no time ("-"; null in JSON and the data source), since the
// time was read from released rows only (found by a trial as an operator).
func TestUsageTellsWhenAnExpiredHoldsCooldownEnds(t *testing.T) {
	sts, _ := seamStores(t, "terraform")
	tf := sts[0]
	ctx := context.Background()
	v4, e1, _ := cooledE1(t, tf)
	h, err := tf.Reserve(ctx, engine.AllocateRequest{Pool: v4, Owner: e1}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	op := engine.OperatorOf(tf)
	if _, err := op.ExpireHold(ctx, engine.HoldRequest{Address: h.Address, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	u, err := op.PoolUsage(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range u.Pools {
		if p.PoolID != "c1/v4" {
			continue
		}
		q := p.CooldownQueue
		if p.Cooling != 1 || q.Count != 1 || q.NextReusableAt == nil || !q.NextReusableAt.Equal(h.ReusableAt) {
			t.Fatalf("usage of c1/v4: cooling %d, queue %+v (next %v); want 1 cooling, reusable at %v", p.Cooling, q, q.NextReusableAt, h.ReusableAt)
		}
		return
	}
	t.Fatal("no usage of c1/v4")
}

// cooledE1 makes cluster c1 with the IPv4 pool c1/v4 (198.51.100.0/29, a
// day's cooldown), and env e1's allocation there, released: it cools for
// e1. It returns the pool, the owner and the allocation.
func cooledE1(t *testing.T, st *engine.Client) (engine.PoolRef, engine.Owner, engine.Allocation) {
	t.Helper()
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: 24 * time.Hour,
		CIDRs: prefixes("198.51.100.0/29")}); err != nil {
		t.Fatal(err)
	}
	v4 := testdb.Pool("c1/v4")
	e1 := engine.Owner{Kind: engine.OwnerEnvIPv4, ID: "e1", OrgID: "acme", EnvID: "e1"}
	a, err := st.Allocate(ctx, engine.AllocateRequest{Pool: v4, Owner: e1})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Release(ctx, "c1", e1, 0); err != nil || !ok {
		t.Fatal(ok, err)
	}
	return v4, e1, a.Allocation
}
