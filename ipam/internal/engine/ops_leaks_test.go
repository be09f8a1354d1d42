package engine_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

func TestParseInventory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, kind string
		want           map[string][]string
	}{
		{"lines with a comment and blanks", "i1\n\n# comment\n i2 \n", "instance", map[string][]string{"instance": {"i1", "i2"}}},
		{"JSON list", `["i1", "i2"]`, "instance", map[string][]string{"instance": {"i1", "i2"}}},
		{"JSON object, every kind", `{"instance": ["i1"], "node": ["n1", "n2"]}`, "", map[string][]string{"instance": {"i1"}, "node": {"n1", "n2"}}},
		{"JSON object, one kind", `{"instance": ["i1"], "node": ["n1"]}`, "node", map[string][]string{"node": {"n1"}}},
	} {
		t.Run("valid/"+tc.name, func(t *testing.T) {
			t.Parallel()
			inv, err := engine.ParseInventory(strings.NewReader(tc.in), tc.kind, false)
			if err != nil {
				t.Fatalf("%q: %v", tc.in, err)
			}
			if len(inv) != len(tc.want) {
				t.Errorf("%q: kinds %v", tc.in, inv.Kinds())
			}
			for kind, ids := range tc.want {
				for _, id := range ids {
					if !inv.Has(kind, id) {
						t.Errorf("%q: %s %s missing", tc.in, kind, id)
					}
				}
				if len(inv[kind]) != len(ids) {
					t.Errorf("%q: %s has %d ids", tc.in, kind, len(inv[kind]))
				}
			}
		})
	}
	for _, tc := range []struct{ name, in, kind, want string }{
		{"lines without a kind", "i1\n", "", "say which owner kind"},
		{"empty", "", "instance", "lists no instance at all"},
		{"JSON object, empty list", `{"instance": []}`, "", "lists no instance at all"},
		{"JSON object, unknown kind", `{"vm": ["x"]}`, "", `"vm" is not an owner kind`},
		{"bad id", "ok\nbad id\n", "instance", "line 2"},
		{"JSON object without the kind", `{"node": ["n1"]}`, "instance", `lists no owners of kind "instance"`},
		{"unknown kind", "i1", "vm", `"vm" is not an owner kind`},
	} {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := engine.ParseInventory(strings.NewReader(tc.in), tc.kind, false)
			if engine.Code(err) != engine.CodeInvalid || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q (kind %q): %v, want %q", tc.in, tc.kind, err, tc.want)
			}
		})
	}
	t.Run("explicitly empty", func(t *testing.T) {
		t.Parallel()
		if inv, err := engine.ParseInventory(strings.NewReader(""), "instance", true); err != nil || inv["instance"] == nil {
			t.Errorf("explicitly empty: %v %v", inv, err)
		}
	})
}

func leakOwners(rep engine.LeakReport) string {
	var out []string
	for _, l := range rep.Leaks {
		out = append(out, l.OwnerID)
	}
	return strings.Join(out, ",")
}

func outcomes(res []engine.ReclaimResult) string {
	var out []string
	for _, r := range res {
		out = append(out, r.Leak.OwnerID+":"+r.Outcome)
	}
	return strings.Join(out, ",")
}

// A report of leaks is only advice: reclaim checks each allocation again
// right before releasing it and refuses every live one.
func TestInventoryLeaksAndSafeReclaim(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	gens := map[string]int64{}
	for _, i := range []string{"i1", "i2", "i3", "i4", "i5", "i6"} {
		gens[i] = f.alloc("c1/instance", instance(i)).Generation
	}
	f.alloc("c1/node", node("n1"))
	inv := func(ids ...string) engine.Inventory {
		inv, err := engine.ParseInventory(strings.NewReader(strings.Join(ids, "\n")), "instance", false)
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}
	rep, err := engine.OperatorOf(f.st).FindInventoryLeaks(f.ctx, "c1", inv("i1", "i2"))
	if err != nil {
		t.Fatal(err)
	}
	// Only instances are judged: the inventory says nothing about nodes.
	if got := leakOwners(rep); got != "i3,i4,i5,i6" || rep.Kind != "inventory" || strings.Join(rep.OwnerKinds, ",") != "instance" {
		t.Fatalf("leaks %q, report %+v", got, rep)
	}
	if l := rep.Leaks[0]; l.Generation != gens["i3"] || l.Category != "instance" || l.OrgID != "org" || l.Actor != "terraform" || l.LastSeenAt == nil ||
		!strings.Contains(l.Reason, `"i3" is not in the inventory`) {
		t.Fatalf("leak %+v", l)
	}
	// The report survives its JSON form.
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(rep); err != nil {
		t.Fatal(err)
	}
	rep, err = engine.ReadLeakReport(&buf)
	if err != nil {
		t.Fatal(err)
	}

	// Meanwhile: i3 turns out to exist, i4 was released and handed out again
	// (a new generation), and Terraform saw i6.
	f.release(instance("i4"))
	again := f.alloc("c1/instance", instance("i4")).Generation
	f.exec(`UPDATE ipam_allocations SET last_seen_at = now() + interval '1 second' WHERE owner_id = 'i6'`)

	dry, err := engine.OperatorOf(f.st).Reclaim(f.ctx, rep, engine.ReclaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(dry); got != "i3:would_reclaim,i4:refused,i5:would_reclaim,i6:refused" {
		t.Fatalf("dry run without inventory: %s", got)
	}
	if !strings.Contains(dry[0].Reason, "not re-checked") {
		t.Errorf("dry run reason %q", dry[0].Reason)
	}
	if _, err := engine.OperatorOf(f.st).Reclaim(f.ctx, rep, engine.ReclaimOptions{Apply: true}); engine.Code(err) != engine.CodeInvalid {
		t.Fatalf("apply without a current inventory: %v", err)
	}
	res, err := engine.OperatorOf(f.st).Reclaim(f.ctx, rep, engine.ReclaimOptions{Apply: true, Inventory: inv("i1", "i2", "i3")})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res); got != "i3:refused,i4:refused,i5:reclaimed,i6:refused" {
		t.Fatalf("apply: %s", got)
	}
	for i, want := range []string{`"i3" is in the current inventory`, fmt.Sprintf("handed out again since the report (generation %d, reported %d)", again, gens["i4"]), "", "Terraform has seen"} {
		if !strings.Contains(res[i].Reason, want) {
			t.Errorf("%s: reason %q, want %q", res[i].Leak.OwnerID, res[i].Reason, want)
		}
	}
	if res[2].ReusableAt == nil {
		t.Errorf("reclaimed without reusable time: %+v", res[2])
	}
	var states []string
	rows, _ := f.raw.Query(f.ctx, `SELECT owner_id || ':' || state FROM ipam_allocations WHERE pool_id = 'c1/instance' ORDER BY owner_id`)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		states = append(states, s)
	}
	if got := strings.Join(states, ","); got != "i1:active,i2:active,i3:active,i4:active,i5:cooling,i6:active" {
		t.Fatalf("after reclaim: %s", got)
	}
	evs, err := engine.OperatorOf(f.st).ListEvents(f.ctx, engine.EventFilter{Types: []string{engine.EventReclaimed}})
	if err != nil || len(evs) != 1 || evs[0].Owner.ID != "i5" || evs[0].Actor != "terraform" || evs[0].Data["reusable_at"] == nil || evs[0].Data["report_kind"] != "inventory" {
		t.Fatalf("reclaimed events: %+v %v", evs, err)
	}
	if s, _ := evs[0].Data["reusable_at"].(string); s != res[2].ReusableAt.Format(time.RFC3339Nano) {
		t.Fatalf("the reclaim's event says reusable at %q, the row at %s", s, res[2].ReusableAt.Format(time.RFC3339Nano))
	}
	// Applying the same report again releases nothing more.
	res, err = engine.OperatorOf(f.st).Reclaim(f.ctx, rep, engine.ReclaimOptions{Apply: true, Inventory: inv("i1", "i2", "i3")})
	if err != nil || outcomes(res) != "i3:refused,i4:refused,i5:refused,i6:refused" {
		t.Fatalf("again: %s %v", outcomes(res), err)
	}
	// An inventory that does not speak for the leak's kind cannot clear it.
	nodes, _ := engine.ParseInventory(strings.NewReader("n1"), "node", false)
	rep2, _ := engine.OperatorOf(f.st).FindInventoryLeaks(f.ctx, "", inv("i1"))
	res, err = engine.OperatorOf(f.st).Reclaim(f.ctx, rep2, engine.ReclaimOptions{Apply: true, Inventory: nodes})
	if err != nil || len(res) == 0 || res[0].Outcome != "refused" || !strings.Contains(res[0].Reason, "lists no owners of kind instance") {
		t.Fatalf("wrong kind: %+v %v", res, err)
	}
	// An instance a Terraform configuration created (its origin recorded),
	// not yet refreshed, is not the inventory's to judge: the dry run says
	// so, and an apply releases nothing.
	f.alloc("c1/instance", instance("i8"))
	f.exec(`UPDATE ipam_allocations SET origin = '/work/static', origin_generation = generation WHERE owner_id = 'i8'`)
	rep3, err := engine.OperatorOf(f.st).FindInventoryLeaks(f.ctx, "c1", inv("i1", "i2", "i3", "i4", "i6"))
	if err != nil || leakOwners(rep3) != "i8" {
		t.Fatalf("leaks with i8: %q %v", leakOwners(rep3), err)
	}
	for _, opt := range []engine.ReclaimOptions{{}, {Apply: true, Inventory: inv("i1")}} {
		res, err = engine.OperatorOf(f.st).Reclaim(f.ctx, rep3, opt)
		if err != nil || outcomes(res) != "i8:refused" || !strings.Contains(res[0].Reason, "a Terraform state holds it") {
			t.Fatalf("reclaim (apply %v) of an instance a Terraform state holds: %+v %v", opt.Apply, res, err)
		}
	}
}

func TestStaleLeaks(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.alloc("c1/node", node("n1"))
	f.alloc("c1/node", node("n2"))
	f.alloc("c1/v4", env("prod"))
	f.alloc("c1/instance", instance("fresh"))
	f.alloc("c1/instance", instance("sched"))
	// n1 and n2 were read by a refresh, prod was made by a configuration
	// (its origin), sched by the scheduler (neither): age alone never
	// makes the scheduler's allocation a leak.
	f.exec(`UPDATE ipam_allocations SET allocated_at = now() - interval '60 days', last_seen_at = now() - interval '40 days',
		confirmed_at = now() - interval '59 days' WHERE owner_id IN ('n1', 'n2')`)
	f.exec(`UPDATE ipam_allocations SET allocated_at = now() - interval '60 days', last_seen_at = now() - interval '40 days',
		origin = '/work/cfg', origin_generation = generation WHERE owner_id = 'prod'`)
	f.exec(`UPDATE ipam_allocations SET allocated_at = now() - interval '60 days', last_seen_at = now() - interval '60 days'
		WHERE owner_id = 'sched'`)
	f.exec(`UPDATE ipam_allocations SET last_seen_at = NULL WHERE owner_id = 'prod'`) // never seen: allocation time counts
	rep, err := engine.OperatorOf(f.st).FindStaleLeaks(f.ctx, "", nil, 30)
	if err != nil {
		t.Fatal(err)
	}
	if got := leakOwners(rep); got != "n1,n2,prod" || rep.StaleDays != 30 || !strings.Contains(rep.Leaks[0].Reason, "30 days") {
		t.Fatalf("stale: %q %+v", got, rep)
	}
	if rep, _ := engine.OperatorOf(f.st).FindStaleLeaks(f.ctx, "c1", []string{"env_ipv4"}, 30); leakOwners(rep) != "prod" {
		t.Fatalf("stale env_ipv4: %q", leakOwners(rep))
	}
	if rep, _ := engine.OperatorOf(f.st).FindStaleLeaks(f.ctx, "", nil, 50); leakOwners(rep) != "prod" {
		t.Fatalf("stale 50 days: %q", leakOwners(rep))
	}
	if _, err := engine.OperatorOf(f.st).FindStaleLeaks(f.ctx, "", nil, 0); engine.Code(err) != engine.CodeInvalid {
		t.Fatalf("0 days: %v", err)
	}
	// A Terraform refresh of n1 after the report keeps it.
	if _, err := f.st.GetActive(f.ctx, "c1", "node", "n1"); err != nil {
		t.Fatal(err)
	}
	res, err := engine.OperatorOf(f.st).Reclaim(f.ctx, rep, engine.ReclaimOptions{Apply: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res); got != "n1:refused,n2:reclaimed,prod:reclaimed" {
		t.Fatalf("reclaim stale: %s (%+v)", got, res)
	}
	// A stale report with the seen time moved back but not stale any more.
	f.alloc("c1/node", node("n3"))
	f.exec(`UPDATE ipam_allocations SET last_seen_at = now() - interval '40 days', confirmed_at = now() - interval '40 days'
		WHERE owner_id = 'n3'`)
	rep, _ = engine.OperatorOf(f.st).FindStaleLeaks(f.ctx, "", []string{"node"}, 30)
	f.exec(`UPDATE ipam_allocations SET last_seen_at = now() - interval '2 days' WHERE owner_id = 'n3'`)
	res, err = engine.OperatorOf(f.st).Reclaim(f.ctx, rep, engine.ReclaimOptions{Apply: true})
	if err != nil || outcomes(res) != "n3:refused" || !strings.Contains(res[0].Reason, "not stale") {
		t.Fatalf("no longer stale: %+v %v", res, err)
	}
	// A report that names the scheduler's allocation anyway (written by
	// hand, or by an older version) releases nothing.
	sched, err := f.st.GetActive(f.ctx, "c1", "instance", "sched")
	if err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE ipam_allocations SET confirmed_at = NULL, last_seen_at = now() - interval '60 days' WHERE owner_id = 'sched'`)
	rep.Leaks = []engine.Leak{{AllocationID: sched.ID, ClusterID: "c1", PoolID: sched.PoolID, Address: sched.Address.String(),
		Generation: sched.Generation, OwnerKind: "instance", OwnerID: "sched"}}
	res, err = engine.OperatorOf(f.st).Reclaim(f.ctx, rep, engine.ReclaimOptions{Apply: true})
	if err != nil || outcomes(res) != "sched:refused" || !strings.Contains(res[0].Reason, "does not refresh") {
		t.Fatalf("the scheduler's allocation in a stale report: %+v %v", res, err)
	}
}

func TestReadLeakReportRejectsOtherJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"version 2", `{"version": 2, "kind": "stale"}`, "format version 2"},
		{"unknown kind", `{"version": 1, "kind": "guess", "generated_at": "2026-01-01T00:00:00Z"}`, `kind "guess"`},
		{"stale without days", `{"version": 1, "kind": "stale", "generated_at": "2026-01-01T00:00:00Z"}`, "without stale_days"},
		{"empty leak", `{"version": 1, "kind": "inventory", "generated_at": "2026-01-01T00:00:00Z", "leaks": [{}]}`, "leak #1"},
		{"unknown field", `{"version": 1, "kind": "inventory", "generated_at": "2026-01-01T00:00:00Z", "something": "else"}`, "unknown field"},
		{"not JSON", `not json`, "not a leak report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := engine.ReadLeakReport(strings.NewReader(tc.in))
			var ie *engine.InvalidError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.in, err, tc.want)
			}
		})
	}
}

// Members of an address set are judged by their set: an inventory of kind
// set lists set ids, not member owner ids.
func TestSetMemberLeaks(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.alloc("c1/instance", instance("m1"))
	f.alloc("c1/instance", instance("m2"))
	f.exec(`UPDATE ipam_allocations SET owner_kind = 'set', owner_id = 's1#' || owner_id, set_owner = 's1' WHERE owner_id = 'm1'`)
	f.exec(`UPDATE ipam_allocations SET owner_kind = 'set', owner_id = 's2#' || owner_id, set_owner = 's2' WHERE owner_id = 'm2'`)
	sets, err := engine.ParseInventory(strings.NewReader(`{"set": ["s2"]}`), "", false)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := engine.OperatorOf(f.st).FindInventoryLeaks(f.ctx, "c1", sets)
	if err != nil || len(rep.Leaks) != 1 || rep.Leaks[0].SetID != "s1" || rep.Leaks[0].OwnerID != "s1#m1" ||
		!strings.Contains(rep.Leaks[0].Reason, `set "s1" is not in the inventory`) {
		t.Fatalf("set leaks: %+v %v", rep.Leaks, err)
	}
	live, _ := engine.ParseInventory(strings.NewReader("s1\ns2"), "set", false)
	res, err := engine.OperatorOf(f.st).Reclaim(f.ctx, rep, engine.ReclaimOptions{Apply: true, Inventory: live})
	if err != nil || outcomes(res) != "s1#m1:refused" || !strings.Contains(res[0].Reason, `set "s1" is in the current inventory`) {
		t.Fatalf("reclaim a live set: %+v %v", res, err)
	}
	res, err = engine.OperatorOf(f.st).Reclaim(f.ctx, rep, engine.ReclaimOptions{Apply: true, Inventory: sets})
	if err != nil || outcomes(res) != "s1#m1:reclaimed" {
		t.Fatalf("reclaim a gone set: %+v %v", res, err)
	}
}
