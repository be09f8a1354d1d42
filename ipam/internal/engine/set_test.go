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

func setFixture(t *testing.T) (*engine.Client, context.Context) {
	t.Helper()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	for _, p := range []engine.Pool{
		{ClusterID: "c1", Name: "small", Cooldown: time.Hour, CIDRs: prefixes("198.51.100.0/30")}, // 2 usable
		{ClusterID: "c1", Name: "big", Cooldown: time.Hour, CIDRs: prefixes("203.0.113.0/24"), Default: true},
	} {
		if _, err := st.CreatePool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	return st, ctx
}

func TestAddressSetFallbackFamiliesAndEdits(t *testing.T) {
	t.Parallel()
	st, ctx := setFixture(t)
	owner := engine.Owner{ID: "vm-1", OrgID: "acme", InstanceID: "vm-1"}
	members, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: owner, Add: []engine.SetEntry{
		{Key: "overlay", Family: 6},
		{Key: "a", Pools: []string{"c1/small", "c1/big"}},
		{Key: "b", Pools: []string{"c1/small", "c1/big"}},
		{Key: "c", Pools: []string{"c1/small", "c1/big"}}, // small is full by now: falls back to big
		{Key: "pinned", Address: netip.MustParseAddr("203.0.113.77")},
		{Key: "v4", Family: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range members {
		got[m.Key] = m.PoolID + " " + m.Address.String() + " " + m.CIDR().String()
	}
	want := map[string]string{
		"overlay": "c1/instance 2001:db8:0:1::1 2001:db8:0:1::1/64",
		"a":       "c1/small 198.51.100.1 198.51.100.1/30",
		"b":       "c1/small 198.51.100.2 198.51.100.2/30",
		"c":       "c1/big 203.0.113.1 203.0.113.1/24",
		"pinned":  "c1/big 203.0.113.77 203.0.113.77/24",
		"v4":      "c1/big 203.0.113.2 203.0.113.2/24",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
	// Remove one key and add another: the others keep their addresses.
	members, err = st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: owner, Remove: []string{"b"},
		Add: []engine.SetEntry{{Key: "d", Pools: []string{"c1/small", "c1/big"}}}})
	if err != nil {
		t.Fatal(err)
	}
	after := map[string]string{}
	for _, m := range members {
		after[m.Key] = m.Address.String()
	}
	if len(after) != 6 || after["a"] != "198.51.100.1" || after["c"] != "203.0.113.1" || after["d"] != "203.0.113.3" {
		t.Fatalf("after edit: %v (b's address cools down, so d falls back to big)", after)
	}
}

func TestAddressSetExactClaimsAndAllOrNothing(t *testing.T) {
	t.Parallel()
	st, ctx := setFixture(t)
	other := engine.Owner{ID: "vm-2"}
	if _, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: other, Add: []engine.SetEntry{
		{Key: "x", Address: netip.MustParseAddr("203.0.113.10")}, {Key: "y", Address: netip.MustParseAddr("203.0.113.11")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: other, Remove: []string{"y"}}); err != nil {
		t.Fatal(err)
	}
	owner := engine.Owner{ID: "vm-1"}
	cases := []struct {
		name string
		e    engine.SetEntry
		code string
		text string
	}{
		{"in use", engine.SetEntry{Key: "k", Address: netip.MustParseAddr("203.0.113.10")}, engine.CodeAddressInUse, `"vm-2#x"`},
		{"cooling", engine.SetEntry{Key: "k", Address: netip.MustParseAddr("203.0.113.11")}, engine.CodeAddressCooling, "until"},
		{"outside the listed pools", engine.SetEntry{Key: "k", Pools: []string{"c1/small"}, Address: netip.MustParseAddr("203.0.113.12")}, engine.CodeInvalid, "outside every listed pool"},
		{"in no pool", engine.SetEntry{Key: "k", Address: netip.MustParseAddr("192.0.2.1")}, engine.CodeInvalid, "in no pool"},
	}
	// Sequential: every case changes the set of vm-1 and checks it is still
	// empty after, and the cooling case needs vm-2's "y" still cooling, which
	// the scenario below takes back.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A good key beside the bad one: nothing of the change may land.
			_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: owner, Add: []engine.SetEntry{{Key: "good", Family: 4}, tc.e}})
			if engine.Code(err) != tc.code || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("%+v: %v; want %s mentioning %s", tc.e, err, tc.code, tc.text)
			}
			if m, err := st.GetSet(ctx, "c1", "vm-1"); err != nil || len(m) != 0 {
				t.Fatalf("a failed change left %d members behind (%v)", len(m), err)
			}
		})
	}
	// The same owner takes its own cooling address back.
	if _, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: other, Add: []engine.SetEntry{{Key: "y", Address: netip.MustParseAddr("203.0.113.11")}}}); err != nil {
		t.Fatalf("own cooling address: %v", err)
	}
	// Every listed pool full: the error names them all.
	var entries []engine.SetEntry
	for i := range 300 {
		entries = append(entries, engine.SetEntry{Key: fmt.Sprint("k", i), Pools: []string{"c1/small", "c1/big"}})
	}
	_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "hog"}, Add: entries})
	var ex *engine.ExhaustedError
	if !errors.As(err, &ex) || !strings.Contains(err.Error(), "c1/small") || !strings.Contains(err.Error(), "c1/big") {
		t.Fatalf("all pools full: %v", err)
	}
	if m, _ := st.GetSet(ctx, "c1", "hog"); len(m) != 0 {
		t.Fatalf("partial set of %d members", len(m))
	}
}

// Many owners claim sets from the same pools at once: no duplicates, no
// partial sets, and no capacity lost. Two sets whose picks wait for each
// other's rows meet a deadlock, and one of them is refused with
// ipam_exhausted though both may have fitted (the documented answer of a
// wait that meets a deadlock, DESIGN.md), so how many succeed at once
// varies; each refused set, applied again alone afterwards, must then get
// the room that is left, so that the pools end with exactly as many full
// sets as they hold. (Counting the concurrent successes alone failed about
// one run in ten.)
func TestAddressSetsConcurrent(t *testing.T) {
	t.Parallel()
	st, ctx := setFixture(t)
	const owners, keys = 24, 12 // 288 > the 254 + 2 IPv4 addresses: some sets must fail whole
	apply := func(o int) error {
		var entries []engine.SetEntry
		for k := range keys {
			entries = append(entries, engine.SetEntry{Key: fmt.Sprint("k", k), Pools: []string{"c1/small", "c1/big"}})
		}
		_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: fmt.Sprint("vm-", o)}, Add: entries})
		if err != nil && engine.Code(err) != engine.CodeExhausted {
			t.Error(err)
		}
		return err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var refused []int
	for o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if apply(o) != nil {
				mu.Lock()
				refused = append(refused, o)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	succeeded := owners - len(refused)
	slices.Sort(refused)
	for _, o := range refused {
		if apply(o) == nil {
			succeeded++
		}
	}
	seen := map[netip.Addr]string{}
	full := 0
	for o := range owners {
		m, err := st.GetSet(ctx, "c1", fmt.Sprint("vm-", o))
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 0 && len(m) != keys {
			t.Fatalf("vm-%d holds a partial set of %d", o, len(m))
		}
		if len(m) == keys {
			full++
		}
		for _, x := range m {
			if prev, dup := seen[x.Address]; dup {
				t.Fatalf("%s held by %s and vm-%d", x.Address, prev, o)
			}
			seen[x.Address] = fmt.Sprint("vm-", o)
		}
	}
	if full != succeeded || full != 256/keys {
		t.Fatalf("%d full sets, %d successes (%d refused at once, then applied again alone), want %d",
			full, succeeded, len(refused), 256/keys)
	}
}

// A set's configuration manages its members whoever made them (a set
// imported from another actor): removing a key, or the whole set, releases
// them, though a release that names no holder keeps to its own actor.
func TestSetOfAnotherActorIsReleasedByItsConfiguration(t *testing.T) {
	t.Parallel()
	other, _ := newStore(t, "scheduler")
	ctx := context.Background()
	mkCluster(t, other, "c1", "2001:db8::/48", "", "")
	labels := engine.Owner{ID: "vm-9"}
	if _, err := other.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: labels,
		Add: []engine.SetEntry{{Key: "a", Family: 6}, {Key: "b", Family: 6}, {Key: "c", Family: 6}}}); err != nil {
		t.Fatal(err)
	}
	tf, err := engine.Open(ctx, engine.Config{DatabaseURL: testdbURLOf(t, other), Actor: "terraform"})
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	if _, err := tf.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: labels, Remove: []string{"a"}}); err != nil {
		t.Fatalf("removing a key of an imported set: %v", err)
	}
	if err := tf.ReleaseSet(ctx, "c1", "vm-9"); err != nil {
		t.Fatalf("releasing an imported set: %v", err)
	}
	if m, err := tf.GetSet(ctx, "c1", "vm-9"); err != nil || len(m) != 0 {
		t.Fatalf("the set after its release: %d members %v", len(m), err)
	}
}

// A set's refresh never answers a member that an operator's reclaim
// released while the refresh recorded it: the record finds the member gone
// under its lock, and the refresh reads the set again.
func TestSetRefreshLeavesOutAMemberReleasedDuringItsRecord(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	owner := engine.Owner{ID: "vm-1", OrgID: "acme", InstanceID: "vm-1"}
	if _, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: owner, Add: []engine.SetEntry{
		{Key: "a", Family: 6}, {Key: "b", Family: 6},
	}}); err != nil {
		t.Fatal(err)
	}
	// The reclaim of member a, in flight: its row locked, released at commit.
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `UPDATE ipam_allocations SET state = 'cooling', released_at = now(),
		reusable_at = now() + interval '1 hour', generation = generation + 1
		WHERE set_owner = 'vm-1' AND owner_id = 'vm-1#a' AND state = 'active'`); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		members []engine.SetMember
		err     error
	}
	done := make(chan answer, 1)
	go func() {
		m, err := st.GetSet(ctx, "c1", "vm-1")
		done <- answer{m, err}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var waiting bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND datname = current_database())`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the refresh's record never waited for the reclaim's lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	var keys []string
	for _, m := range got.members {
		keys = append(keys, m.Key)
	}
	if strings.Join(keys, ",") != "b" {
		t.Errorf("the refresh answered members %v; want only b (a was released while it ran)", keys)
	}
}

// The pools one key lists fit one interface: a key listing pools of two
// families, or of two MTUs, is refused on addresses whichever path takes it
// (the set's apply, a plan-time hold), and nothing is written.
func TestAddressSetKeyPoolsAgree(t *testing.T) {
	t.Parallel()
	st, ctx := setFixture(t)
	for _, p := range []engine.Pool{
		{ClusterID: "c1", Name: "v6", CIDRs: prefixes("2001:db8:0:9::/120")},
		{ClusterID: "c1", Name: "jumbo", MTU: 9000, CIDRs: prefixes("192.0.2.0/24")},
	} {
		if _, err := st.CreatePool(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	owner := engine.Owner{ID: "vm-1", OrgID: "acme", InstanceID: "vm-1"}
	for _, c := range []struct {
		pools []string
		want  string
	}{
		{[]string{"c1/small", "c1/v6"}, "c1/small (IPv4) and c1/v6 (IPv6) are listed together but are of different families"},
		{[]string{"c1/big", "c1/jumbo"}, "c1/big (mtu unset, gateway unset) and c1/jumbo (mtu 9000, gateway unset) are listed together but differ"},
	} {
		e := engine.SetEntry{Key: "pub", Pools: c.pools}
		_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: owner, Add: []engine.SetEntry{e}})
		_, herr := st.ReserveSetEntry(ctx, "c1", owner, e, time.Hour)
		for _, err := range []error{err, herr} {
			var ie *engine.InvalidError
			if !errors.As(err, &ie) || ie.Field != "addresses" || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v: want invalid addresses saying %q, got %v", c.pools, c.want, err)
			}
		}
	}
	if ms, err := st.GetSet(ctx, "c1", "vm-1"); err == nil && len(ms) > 0 {
		t.Fatalf("members written: %v", ms)
	}
}

// A kept key's new request that its address still satisfies is stored
// (Restate), the address and its generation untouched: pools reordered, a
// pool it is not in dropped, a family. One it does not satisfy is refused,
// and nothing of the change lands.
func TestAddressSetRestateKeepsTheAddress(t *testing.T) {
	t.Parallel()
	st, ctx := setFixture(t)
	owner := engine.Owner{ID: "vm-1", OrgID: "acme"}
	members, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: owner, Add: []engine.SetEntry{
		{Key: "a", Pools: []string{"c1/small", "c1/big"}},
	}})
	if err != nil || len(members) != 1 {
		t.Fatal(members, err)
	}
	before := members[0]
	for _, req := range []engine.SetEntry{
		{Key: "a", Pools: []string{"c1/big", "c1/small"}},
		{Key: "a", Pools: []string{"c1/small"}},
		{Key: "a", Family: 4},
		{Key: "a", Address: before.Address, Requested: true},
	} {
		members, err = st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: owner, Restate: []engine.SetEntry{req}})
		if err != nil || len(members) != 1 {
			t.Fatalf("restate %+v: %v %v", req, members, err)
		}
		m := members[0]
		want := engine.SetRequest{Pools: req.Pools, Family: req.Family, Address: req.Requested}
		if m.Address != before.Address || m.Generation != before.Generation || fmt.Sprint(m.Request) != fmt.Sprint(want) {
			t.Fatalf("restate %+v: %s generation %d request %+v, want %s generation %d request %+v",
				req, m.Address, m.Generation, m.Request, before.Address, before.Generation, want)
		}
	}
	// Not satisfied (its pool not listed, another exact address, another
	// family): refused, with the key named, and the add beside it undone.
	for _, req := range []engine.SetEntry{
		{Key: "a", Pools: []string{"c1/big"}},
		{Key: "a", Address: netip.MustParseAddr("198.51.100.2"), Requested: true},
		{Key: "a", Family: 6},
	} {
		_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: owner, Restate: []engine.SetEntry{req},
			Add: []engine.SetEntry{{Key: "z", Family: 4}}})
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), `key "a": its address 198.51.100.1 (pool c1/small) does not satisfy its new request`) {
			t.Fatalf("restate %+v: %v, want invalid_input naming the key", req, err)
		}
	}
	if members, err := st.GetSet(ctx, "c1", "vm-1"); err != nil || len(members) != 1 {
		t.Fatalf("after the refusals: %v %v, want key a alone", members, err)
	}
	// A key the set does not hold: a conflict (released since the plan).
	if _, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: owner, Restate: []engine.SetEntry{{Key: "gone", Family: 4}}}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("restate of a key the set does not hold: %v, want conflict", err)
	}
}
