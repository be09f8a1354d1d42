package engine_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// An operator releases one allocation into its cooldown, with the owner
// kind's release event carrying the reason; what a Terraform state
// confirmed is refused unless forced, and the refusal writes nothing;
// releasing it again is a no-op that says so.
func TestReleaseAllocation(t *testing.T) {
	f := newOpsFixture(t)
	events := func(typ string) []engine.Event {
		t.Helper()
		evs, err := engine.OperatorOf(f.st).ListEvents(f.ctx, engine.EventFilter{ClusterID: "c1", Types: []string{typ}})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	state := func(addr string) string {
		t.Helper()
		var s string
		if err := f.raw.QueryRow(f.ctx, "SELECT state FROM ipam_allocations WHERE address = $1::inet", addr).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("by address", func(t *testing.T) {
		a := f.alloc("c1/instance", engine.Owner{Kind: engine.OwnerInstance, ID: "i1", InstanceID: "i1"})
		r, err := engine.OperatorOf(f.st).ReleaseAllocation(f.ctx, engine.ReleaseRequest{Address: a.Address, Reason: "instance i1 was deleted by hand"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Address != a.Address || r.State != engine.StateCooling || r.ReusableAt.IsZero() || !r.ConfirmedAt.IsZero() {
			t.Fatalf("released %+v", r)
		}
		if s := state(a.Address.String()); s != engine.StateCooling {
			t.Fatalf("the row is %s, want cooling", s)
		}
		evs := events("instance.released")
		if len(evs) != 1 || evs[0].Data["reason"] != "instance i1 was deleted by hand" || evs[0].Data["released_by"] != "operator" ||
			evs[0].Data["forced"] != nil || evs[0].Actor != "terraform" {
			t.Fatalf("events %+v", evs)
		}
		// Released already: a no-op that says so, by address or by owner,
		// writing no event (as Release of a released owner is a no-op).
		for _, req := range []engine.ReleaseRequest{{Address: a.Address, Reason: "again"},
			{ClusterID: "c1", OwnerKind: engine.OwnerInstance, OwnerID: "i1", Reason: "again"}} {
			again, err := engine.OperatorOf(f.st).ReleaseAllocation(f.ctx, req)
			if err != nil || !again.AlreadyReleased || again.Address != a.Address || again.State != engine.StateCooling ||
				!again.ReusableAt.Equal(r.ReusableAt) {
				t.Fatalf("a second release: %+v %v, want the released allocation, AlreadyReleased", again, err)
			}
		}
		if evs := events("instance.released"); len(evs) != 1 {
			t.Fatalf("a second release wrote an event: %+v", evs)
		}
		// What was never allocated is still not found.
		if _, err := engine.OperatorOf(f.st).ReleaseAllocation(f.ctx, engine.ReleaseRequest{ClusterID: "c1", OwnerKind: engine.OwnerInstance, OwnerID: "never",
			Reason: "typo"}); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("releasing an owner never allocated: %v, want not_found", err)
		}
	})

	t.Run("confirmed by a Terraform state", func(t *testing.T) {
		o := engine.Owner{Kind: engine.OwnerNode, ID: "n1", NodeID: "n1"}
		a := f.alloc("c1/node", o)
		if _, err := f.st.GetActive(f.ctx, "c1", engine.OwnerNode, "n1"); err != nil { // a refresh confirms it
			t.Fatal(err)
		}
		req := engine.ReleaseRequest{ClusterID: "c1", OwnerKind: engine.OwnerNode, OwnerID: "n1", Reason: "node n1 was decommissioned"}
		_, err := engine.OperatorOf(f.st).ReleaseAllocation(f.ctx, req)
		var ce *engine.ConfirmedError
		if !errors.As(err, &ce) || !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), `node "n1"`) ||
			!strings.Contains(err.Error(), "Terraform state confirmed it") {
			t.Fatalf("releasing a confirmed allocation: %v, want a conflict naming the owner and the confirmation", err)
		}
		if s := state(a.Address.String()); s != engine.StateActive {
			t.Fatalf("the refused release left the row %s", s)
		}
		if evs := events("node.released"); len(evs) != 0 {
			t.Fatalf("the refused release wrote events: %+v", evs)
		}
		req.Force = true
		r, err := engine.OperatorOf(f.st).ReleaseAllocation(f.ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if r.ConfirmedAt.IsZero() || state(a.Address.String()) != engine.StateCooling {
			t.Fatalf("a forced release: %+v", r)
		}
		evs := events("node.released")
		if len(evs) != 1 || evs[0].Data["forced"] != true {
			t.Fatalf("the forced release's event: %+v", evs)
		}
		// The event records the row's times exactly, as the one-statement
		// release's event does: the check's cooldown audit reads them.
		recorded := func(key string) time.Time {
			s, _ := evs[0].Data[key].(string)
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				t.Fatalf("the forced release's event: %s %q: %v", key, s, err)
			}
			return at
		}
		if got := recorded("reusable_at"); !got.Equal(r.ReusableAt) {
			t.Fatalf("the forced release's event says reusable at %s, the row at %s", got, r.ReusableAt)
		}
		if got := recorded("confirmed_at"); !got.Equal(r.ConfirmedAt) {
			t.Fatalf("the forced release's event says confirmed at %s, the row at %s", got, r.ConfirmedAt)
		}
	})

	t.Run("created by a Terraform configuration", func(t *testing.T) {
		// A create's state holds the allocation before any refresh confirms
		// it: its origin says a configuration made it.
		o := engine.Owner{Kind: engine.OwnerNode, ID: "n2", NodeID: "n2"}
		a := f.alloc("c1/node", o)
		f.exec(`UPDATE ipam_allocations SET origin = '/work/nodes', origin_generation = generation WHERE owner_id = 'n2'`)
		req := engine.ReleaseRequest{ClusterID: "c1", OwnerKind: engine.OwnerNode, OwnerID: "n2", Reason: "looks unused"}
		_, err := engine.OperatorOf(f.st).ReleaseAllocation(f.ctx, req)
		var ce *engine.ConfirmedError
		if !errors.As(err, &ce) || !ce.Created || !strings.Contains(err.Error(), "a Terraform configuration created it") {
			t.Fatalf("releasing a fresh create: %v, want a conflict saying a configuration created it", err)
		}
		if s := state(a.Address.String()); s != engine.StateActive {
			t.Fatalf("the refused release left the row %s", s)
		}
		req.Force = true
		r, err := engine.OperatorOf(f.st).ReleaseAllocation(f.ctx, req)
		if err != nil || !r.Forced || !r.ConfirmedAt.IsZero() {
			t.Fatalf("a forced release of a fresh create: %+v %v", r, err)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		for _, c := range []struct {
			req   engine.ReleaseRequest
			field string
		}{
			{engine.ReleaseRequest{ClusterID: "c1", OwnerKind: "node", OwnerID: "n9"}, "reason"},
			{engine.ReleaseRequest{Reason: "x", OwnerKind: "node", OwnerID: "n9"}, "cluster_id"},
			{engine.ReleaseRequest{Reason: "x", ClusterID: "c1"}, "owner_id"},
			{engine.ReleaseRequest{Reason: "x", ClusterID: "c1", OwnerKind: "vm", OwnerID: "n9"}, "owner_kind"},
			{engine.ReleaseRequest{Reason: "x", ClusterID: "c1", OwnerKind: "node", OwnerID: "n 9"}, "owner_id"},
			{engine.ReleaseRequest{Reason: "x", ClusterID: "c1", OwnerKind: "set", OwnerID: "s1"}, "owner_id"},
			{engine.ReleaseRequest{Reason: "x", ClusterID: "c 1", OwnerKind: "node", OwnerID: "n9"}, "cluster_id"},
		} {
			_, err := engine.OperatorOf(f.st).ReleaseAllocation(f.ctx, c.req)
			var ie *engine.InvalidError
			if !errors.As(err, &ie) || ie.Field != c.field {
				t.Errorf("%+v: %v, want invalid_input naming %s", c.req, err, c.field)
			}
		}
		if _, err := engine.OperatorOf(f.st).ReleaseAllocation(f.ctx, engine.ReleaseRequest{Reason: "x", ClusterID: "c1", OwnerKind: "node", OwnerID: "n9"}); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("an owner without an allocation: %v, want not_found", err)
		}
	})

	// What holds an address that is no allocation: a plan's hold, named in
	// the not_found (lookup shows it reserved), by address and by owner.
	t.Run("a plan-time hold", func(t *testing.T) {
		o := engine.Owner{Kind: engine.OwnerNode, ID: "planned", NodeID: "planned"}
		h, err := f.st.Reserve(f.ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: o}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range []engine.ReleaseRequest{{Address: h.Address, Reason: "x"}, {ClusterID: "c1", OwnerKind: "node", OwnerID: "planned", Reason: "x"}} {
			_, err := engine.OperatorOf(f.st).ReleaseAllocation(f.ctx, req)
			if !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "a plan-time hold of actor") ||
				!strings.Contains(err.Error(), "holds "+h.Address.String()+" until") || !strings.Contains(err.Error(), "which is not an allocation") {
				t.Errorf("releasing %+v, which a plan holds: %v, want not_found naming the hold", req, err)
			}
		}
		if s := state(h.Address.String()); s != engine.StateReserved {
			t.Errorf("the hold is %s after the refused releases, want reserved", s)
		}
	})
}

// An operator's release of an owner with nothing active names the owner's
// latest released allocation (already released). Meanwhile the owner may be
// given that address back (its own cooling address comes first). With the
// release paused at each of its statement boundaries while that allocation
// runs, it must answer as the database was at one moment: already released
// at that address (before the allocation), or released at that address
// (after it); not an older release, and not not_found.
func TestOperatorReleaseAnswersFromOneMoment(t *testing.T) {
	t.Parallel()
	e := newExploreEnv(t)
	latest := netip.MustParseAddr("203.0.113.2")
	fx := exploreFixture{name: "e0 released twice", setup: func(e *exploreEnv) {
		e.t.Helper()
		fixtureV4(false, true).setup(e) // e0 active in the first block
		for i, claim := range []netip.Addr{{}, latest} {
			if i > 0 {
				if _, err := e.st.Allocate(ctxBG, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"),
					Owner: envOwner("e0"), Address: claim}); err != nil {
					e.t.Fatal(err)
				}
			}
			if ok, err := e.st.Release(ctxBG, "c1", envOwner("e0"), 0); err != nil || !ok {
				e.t.Fatalf("release e0: %v %v", ok, err)
			}
		}
	}}
	var got engine.ReleaseResult
	var gotErr error
	release := exploreStep{name: "ipamctl release of e0", run: func(ctx context.Context, e *exploreEnv) (exploreAck, error) {
		got, gotErr = engine.OperatorOf(e.st).ReleaseAllocation(ctx, engine.ReleaseRequest{ClusterID: "c1",
			OwnerKind: engine.OwnerEnvIPv4, OwnerID: "e0", Reason: "test"})
		// Released now: it took what the allocation acknowledged, as an
		// operator's release may.
		return exploreAck{forced: gotErr == nil && !got.AlreadyReleased}, gotErr
	}}
	alloc := allocStep("allocate e0 (its latest address back)", engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"),
		Owner: envOwner("e0")})
	k := countBoundaries(e, fx, release)
	for i := 0; i <= k; i++ {
		if msg := exploreRun(e, fx, release, alloc, int32(i)); msg != "" {
			t.Errorf("paused before statement %d of %d:\n%s", i+1, k, msg)
		}
		if gotErr != nil || got.Address != latest {
			t.Errorf("paused before statement %d of %d, the owner given %s back meanwhile: answered %+v (already released %v), %v; "+
				"want %s, released now or already", i+1, k, latest, got.Address, got.AlreadyReleased, gotErr, latest)
		}
	}
}
