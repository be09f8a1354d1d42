package engine_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// checkListings is the model test's check of the listing's reads
// (ListAllocations), on whatever state the round left: every filter's
// listing is the full listing's rows that the filter keeps, in the
// listing's order, and a limit keeps the first rows of the listing. The
// filters read through different statements (the owner indexes and the
// instance label index for an instance, the labels index for an org or an
// env, the first rows' keys for a limit, the category's pools), and the
// full listing reads the table: each is checked against it. Each call
// checks a twelfth of the filters, the call numbered part the part-th
// twelfth (modulo 12), so that the calls of a run check them all.
//
// The reads are separate statements, each at its own time, and a hold's
// expiry or a cooldown's end between them changes what they list. So the
// full listing is read again after the others; when the two differ (a row
// left the listing, or its Reusable or HoldExpired changed), a time that
// mattered passed, and the check runs again. A row leaves the listing only
// once, so two equal full listings bracket reads that saw the same rows.
func (m *model) checkListings(ctx context.Context, part int) []string {
	op := engine.OperatorOf(m.sts[0])
	list := func(f engine.ListFilter) ([]engine.AllocationView, error) { return op.ListAllocations(ctx, f) }
	for attempt := 0; ; attempt++ {
		all, err := list(engine.ListFilter{})
		if err != nil {
			return []string{"list: " + err.Error()}
		}
		bad := listingsAgree(all, list, part)
		again, err := list(engine.ListFilter{})
		if err != nil {
			return []string{"list: " + err.Error()}
		}
		if slices.Equal(viewKeys(all), viewKeys(again)) {
			return bad
		}
		if attempt == 2 {
			return append(bad, "listing: the full listing changed between its reads three times in a row")
		}
	}
}

// listingsAgree checks the part-th twelfth of the filtered and limited
// listings against all, the full listing.
func listingsAgree(all []engine.AllocationView, list func(engine.ListFilter) ([]engine.AllocationView, error), part int) []string {
	var bad []string
	if !slices.IsSortedFunc(all, listingOrder) {
		bad = append(bad, "listing: the full listing is not in the listing's order:\n  "+strings.Join(viewKeys(all), "\n  "))
	}
	var filters []engine.ListFilter
	for _, st := range engine.ListStates {
		filters = append(filters, engine.ListFilter{State: st})
	}
	for _, c := range engine.Categories {
		filters = append(filters, engine.ListFilter{Category: c})
	}
	for _, kind := range engine.OwnerKinds {
		filters = append(filters, engine.ListFilter{OwnerKind: kind})
	}
	filters = append(filters, engine.ListFilter{Unmanaged: true})
	// The values some rows have (spread over the listing).
	seen := map[string]bool{}
	add := func(f engine.ListFilter) {
		if key := fmt.Sprintf("%+v", f); !seen[key] {
			seen[key] = true
			filters = append(filters, f)
		}
	}
	step := max(1, len(all)/12)
	for i := 0; i < len(all); i += step {
		v := all[i]
		add(engine.ListFilter{ClusterID: v.ClusterID})
		add(engine.ListFilter{ClusterID: v.ClusterID, PoolID: v.PoolID})
		// An owner kind with a cluster and a state, and as terraform
		// query lists: active and unmanaged, in any cluster.
		add(engine.ListFilter{ClusterID: v.ClusterID, OwnerKind: v.Owner.Kind, State: v.State})
		add(engine.ListFilter{OwnerKind: v.Owner.Kind, State: engine.StateActive, Unmanaged: true})
		// One owner's addresses (ipamctl list --kind K --owner ID), in
		// its cluster and in any.
		add(engine.ListFilter{ClusterID: v.ClusterID, OwnerKind: v.Owner.Kind, OwnerID: v.Owner.ID})
		add(engine.ListFilter{OwnerKind: v.Owner.Kind, OwnerID: v.Owner.ID})
		if o := v.Owner; o.InstanceID != "" {
			add(engine.ListFilter{InstanceID: o.InstanceID})
			add(engine.ListFilter{ClusterID: v.ClusterID, InstanceID: o.InstanceID, State: v.State})
		}
		if o := v.Owner; o.OrgID != "" || o.EnvID != "" {
			add(engine.ListFilter{ClusterID: v.ClusterID, OrgID: o.OrgID, EnvID: o.EnvID})
			add(engine.ListFilter{EnvID: o.EnvID})
		}
		if v.Owner.NodeID != "" {
			add(engine.ListFilter{NodeID: v.Owner.NodeID})
		}
	}
	for i, f := range filters {
		if i%12 != part%12 {
			continue
		}
		got, err := list(f)
		if err != nil {
			bad = append(bad, fmt.Sprintf("list %+v: %v", f, err))
			continue
		}
		var want []engine.AllocationView
		for _, v := range all {
			if listingKeeps(f, v) {
				want = append(want, v)
			}
		}
		if !slices.IsSortedFunc(got, listingOrder) || !sameRows(got, want) {
			bad = append(bad, fmt.Sprintf("list %+v:\n got  %s\n want %s", f, viewKeys(got), viewKeys(want)))
		}
		// A limit keeps the listing's first rows.
		for _, n := range []int{1, 3, len(want) / 2} {
			if n < 1 || n >= len(want) {
				continue
			}
			f.Limit = n
			got, err := list(f)
			if err != nil {
				bad = append(bad, fmt.Sprintf("list %+v: %v", f, err))
				continue
			}
			if !slices.EqualFunc(got, want[:n], func(a, b engine.AllocationView) bool { return listingOrder(a, b) == 0 }) ||
				!sameRows(got, keptOf(want, got)) {
				bad = append(bad, fmt.Sprintf("list %+v:\n got  %s\n want the first %d of %s", f, viewKeys(got), n, viewKeys(want)))
			}
		}
	}
	return bad
}

// listingKeeps is what a filter keeps, as ListFilter says: empty fields
// match everything; the addresses destroyed pools left cooling (tombstones)
// have no category, and are cooling.
func listingKeeps(f engine.ListFilter, v engine.AllocationView) bool {
	o := v.Owner
	for _, c := range []struct{ want, have string }{
		{f.ClusterID, v.ClusterID}, {f.Category, v.Category}, {f.PoolID, v.PoolID}, {f.OwnerKind, o.Kind}, {f.OwnerID, o.ID},
		{f.OrgID, o.OrgID}, {f.EnvID, o.EnvID}, {f.NodeID, o.NodeID}, {f.InstanceID, o.InstanceID}, {f.State, listedState(v)},
	} {
		if c.want != "" && c.want != c.have {
			return false
		}
	}
	return !f.Unmanaged || !v.StateHeld
}

// listedState is the state a row is listed in: a plan-time hold past its
// own time that still keeps a cooldown is listed as cooling.
func listedState(v engine.AllocationView) string {
	if v.State == engine.StateReserved && v.HoldExpired {
		return engine.StateCooling
	}
	return v.State
}

// listingOrder is the listing's order: the allocations by cluster, pool and
// ordinal, then the tombstones by cluster, pool and address. Rows equal in
// it may come in either order.
func listingOrder(a, b engine.AllocationView) int {
	if a.Tombstone != b.Tombstone {
		if a.Tombstone {
			return 1
		}
		return -1
	}
	if c := cmp.Or(cmp.Compare(a.ClusterID, b.ClusterID), cmp.Compare(a.PoolID, b.PoolID)); c != 0 || !a.Tombstone {
		return cmp.Or(c, cmp.Compare(a.Ordinal, b.Ordinal))
	}
	return a.Address.Compare(b.Address)
}

// viewKey is what the check compares of a listed row: which row, its state
// and the flags that time changes.
func viewKey(v engine.AllocationView) string {
	return fmt.Sprintf("%s/%s %s %s:%s %s g%d reusable=%t expired=%t tomb=%t", v.ClusterID, v.PoolID, v.Address, v.Owner.Kind, v.Owner.ID,
		v.State, v.Generation, v.Reusable, v.HoldExpired, v.Tombstone)
}

func viewKeys(vs []engine.AllocationView) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = viewKey(v)
	}
	return out
}

// sameRows: the two listings hold the same rows, in any order.
func sameRows(a, b []engine.AllocationView) bool {
	ka, kb := viewKeys(a), viewKeys(b)
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// keptOf is the rows of want that got has (by viewKey), so that a limited
// listing's rows can be checked to be the full listing's, whichever of the
// rows equal in the order it kept.
func keptOf(want, got []engine.AllocationView) []engine.AllocationView {
	has := map[string]bool{}
	for _, v := range got {
		has[viewKey(v)] = true
	}
	var out []engine.AllocationView
	for _, v := range want {
		if has[viewKey(v)] {
			out = append(out, v)
		}
	}
	return out
}
