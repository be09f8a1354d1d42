package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func env(id string) engine.Owner {
	return engine.Owner{Kind: engine.OwnerEnvIPv4, ID: id, EnvID: id, OrgID: "org-" + id}
}

// A pool found full counts its active allocations and its live plan-time
// holds apart: a plan that finds the pool full finds, among others, the
// holds of its own other new addresses, which are not allocations.
func TestExhaustedCountsHoldsApart(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	// A /30: .1 and .2.
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "tiny", Cooldown: time.Hour, CIDRs: prefixes("192.0.2.0/30")}); err != nil {
		t.Fatal(err)
	}
	pool := engine.OperatorPool("c1", "tiny")
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: pool, Owner: env("e0")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, engine.AllocateRequest{Pool: pool, Owner: env("e1")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, call := range []string{"plan", "apply"} {
		var err error
		if call == "plan" {
			_, err = st.Reserve(ctx, engine.AllocateRequest{Pool: pool, Owner: env("e2")}, time.Hour)
		} else {
			_, err = st.Allocate(ctx, engine.AllocateRequest{Pool: pool, Owner: env("e2")})
		}
		var ex *engine.ExhaustedError
		if !errors.As(err, &ex) || ex.Size != 2 || ex.Active != 1 || ex.Held != 1 || ex.Cooling != 0 ||
			!strings.Contains(err.Error(), "size 2, 1 active, 1 held by plan-time holds, 0 cooling") {
			t.Fatalf("%s in a pool of one allocation and one hold: %#v (%v), want 1 active and 1 held", call, ex, err)
		}
	}
}

func TestIPv4PoolOrderAndGaps(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	p, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: prefixes("198.51.100.0/29", "203.0.113.8/31", "192.0.2.7/32"), Exclude: prefixes("198.51.100.2/31")})
	if err != nil {
		t.Fatal(err)
	}
	// /29: .1 .4 .5 .6 (network .0, broadcast .7, gap .2-.3); /31: both; /32: itself.
	want := []string{"198.51.100.1", "198.51.100.4", "198.51.100.5", "198.51.100.6", "203.0.113.8", "203.0.113.9", "192.0.2.7"}
	if p.Size != int64(len(want)) || p.Family != 4 || p.ID != "c1/v4" {
		t.Fatalf("pool %+v", p)
	}
	var got []string
	for i := range want {
		r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: env(fmt.Sprint("e", i))})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Address.String())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("order %v\nwant  %v", got, want)
	}
	_, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: env("late")})
	var ex *engine.ExhaustedError
	if !errors.As(err, &ex) || ex.Size != 7 || ex.Active != 7 {
		t.Fatalf("exhausted: %v", err)
	}
	// One active IPv4 per environment: a second pool does not give e0 another.
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4b", CIDRs: prefixes("192.0.2.64/28")}); err != nil {
		t.Fatal(err)
	}
	_, err = st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4b"), Owner: env("e0")})
	if engine.Code(err) != engine.CodeOwnerConflict || !strings.Contains(err.Error(), "c1/v4") {
		t.Fatalf("second IPv4 for an environment: %v", err)
	}
	var events int
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM ipam_events WHERE type = 'env.ipv4_addon_enabled' AND org_id = 'org-e0' AND env_id = 'e0'`).Scan(&events)
	if events != 1 {
		t.Fatalf("%d enable events for e0", events)
	}
	if _, err := st.Release(ctx, "c1", env("e0"), 0); err != nil {
		t.Fatal(err)
	}
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM ipam_ipv4_allocations WHERE env_id = 'e0' AND state = 'cooling' AND cooldown_until > now() + interval '50 minutes'`).Scan(&events)
	if events != 1 {
		t.Fatal("the operator view does not show e0's cooling address")
	}
}

func TestIPv4ExactClaims(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour, CIDRs: prefixes("198.51.100.0/28"), Exclude: prefixes("198.51.100.9/32")}); err != nil {
		t.Fatal(err)
	}
	claim := func(owner, addr string) error {
		_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: env(owner), Address: netip.MustParseAddr(addr)})
		return err
	}
	if err := claim("a", "198.51.100.5"); err != nil {
		t.Fatal(err)
	}
	if err := claim("b", "198.51.100.5"); engine.Code(err) != engine.CodeAddressInUse || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("in use: %v", err)
	}
	// Sequential: the scenario goes on with owner b's claims after these.
	for _, tc := range []struct{ name, addr string }{
		{"excluded", "198.51.100.9"},
		{"network address", "198.51.100.0"},
		{"broadcast address", "198.51.100.15"},
		{"outside the pool", "10.0.0.1"},
	} {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			var ie *engine.InvalidError
			if err := claim("b", tc.addr); !errors.As(err, &ie) || ie.Field != "address" {
				t.Fatalf("%s: %v, want invalid address", tc.addr, err)
			}
		})
	}
	_, _ = st.Release(ctx, "c1", env("a"), 0)
	if err := claim("b", "198.51.100.5"); engine.Code(err) != engine.CodeAddressCooling {
		t.Fatalf("cooling: %v", err)
	}
	// The same environment takes its own cooling address back.
	if err := claim("a", "198.51.100.5"); err != nil {
		t.Fatalf("own cooling address: %v", err)
	}
}

func TestPoolValidationAndPlacement(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	mkCluster(t, st, "c2", "2001:db9::/48", "", "")
	ctx := context.Background()
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "pub", CIDRs: prefixes("198.51.100.0/24")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "priv", CIDRs: prefixes("10.0.0.0/24")}); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name  string
		p     engine.Pool
		field string
		msg   string
	}{
		{"mixed families", engine.Pool{ClusterID: "c1", Name: "mixed", CIDRs: prefixes("192.0.2.0/24", "2001:db8:5::/64")}, "cidrs", "different address families"},
		{"overlapping blocks", engine.Pool{ClusterID: "c1", Name: "overlap", CIDRs: prefixes("192.0.2.0/24", "192.0.2.128/25")}, "cidrs", "overlap"},
		{"exclusion outside", engine.Pool{ClusterID: "c1", Name: "excl", CIDRs: prefixes("192.0.2.0/24"), Exclude: prefixes("192.0.3.1/32")}, "exclude", "not inside"},
		{"inside the instance prefix", engine.Pool{ClusterID: "c1", Name: "v6", CIDRs: prefixes("2001:db8:0:1:ffff::/80")}, "cidrs", "instance prefix"},
		{"overlapping another pool", engine.Pool{ClusterID: "c1", Name: "dup", CIDRs: prefixes("198.51.100.128/25")}, "cidrs", `pool "c1/pub"`},
		{"public IPv4 of another cluster", engine.Pool{ClusterID: "c2", Name: "steal", CIDRs: prefixes("198.51.100.0/25")}, "cidrs", "public IPv4"},
		{"reserved name", engine.Pool{ClusterID: "c1", Name: "node", CIDRs: prefixes("192.0.2.0/24")}, "name", "cluster's own pool"},
		{"unknown cluster", engine.Pool{ClusterID: "nope", Name: "x", CIDRs: prefixes("192.0.2.0/24")}, "cluster_id", "does not exist"},
	}
	// Sequential, not parallel: c2/priv is created after them
	// (parallel subtests would run after the rest of the test).
	for _, tc := range bad {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			_, err := st.CreatePool(ctx, tc.p)
			var ie *engine.InvalidError
			if !errors.As(err, &ie) || ie.Field != tc.field || !strings.Contains(ie.Msg, tc.msg) {
				t.Errorf("%s: %v; want %s: ...%s...", tc.p.Name, err, tc.field, tc.msg)
			}
		})
	}
	// Private IPv4 blocks may repeat across clusters.
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c2", Name: "priv", CIDRs: prefixes("10.0.0.0/24")}); err != nil {
		t.Fatal(err)
	}
}

func TestPoolGrowAndRefusedShrink(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	p := engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour, CIDRs: prefixes("198.51.100.0/30")}
	if _, err := st.CreatePool(ctx, p); err != nil {
		t.Fatal(err)
	}
	a, _ := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: env("a")})
	b, _ := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: env("b")})
	_, _ = st.Release(ctx, "c1", env("b"), 0)
	if _, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: env("c")}); engine.Code(err) != engine.CodeExhausted {
		t.Fatalf("want exhausted, got %v", err)
	}
	// Grow in place: a block in front is preferred from now on.
	p.CIDRs = prefixes("192.0.2.0/30", "198.51.100.0/30")
	got, err := st.UpdatePool(ctx, p)
	if err != nil || got.Size != 4 {
		t.Fatalf("grow: %+v %v", got, err)
	}
	c, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", "v4"), Owner: env("c")})
	if err != nil || c.Address.String() != "192.0.2.1" {
		t.Fatalf("after growth: %v %v", c.Address, err)
	}
	// Shrinking away the block holding a (active) and b (cooling) is refused, listing both.
	p.CIDRs = prefixes("192.0.2.0/30")
	_, err = st.UpdatePool(ctx, p)
	if err == nil || !strings.Contains(err.Error(), a.Address.String()+" (active") || !strings.Contains(err.Error(), b.Address.String()+" (cooling") {
		t.Fatalf("shrink: %v", err)
	}
	// Excluding a free address is fine.
	p.CIDRs = prefixes("192.0.2.0/30", "198.51.100.0/30")
	p.Exclude = prefixes("192.0.2.2/32")
	if got, err = st.UpdatePool(ctx, p); err != nil || got.Size != 3 {
		t.Fatalf("exclude: %+v %v", got, err)
	}
}

// 16 goroutines allocate and release over a small pool with gaps and a short
// cooldown; the event history proves no reuse inside the cooldown, and that
// addresses did pass from one owner to another.
func TestIPv4ConcurrentChurn(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	const cooldown = 300 * time.Millisecond
	p, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: cooldown,
		CIDRs: prefixes("198.51.100.0/27", "203.0.113.0/28"), Exclude: prefixes("198.51.100.8/29", "203.0.113.4/30")})
	if err != nil {
		t.Fatal(err)
	}
	layoutGaps := []netip.Prefix{netip.MustParsePrefix("198.51.100.8/29"), netip.MustParsePrefix("203.0.113.4/30")}
	var wg sync.WaitGroup
	var mu sync.Mutex
	allocs := 0
	start := time.Now()
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker cycles through three owners and moves on to three
			// new ones every ten rounds, for at least four cooldowns: the
			// owners it leaves behind let their addresses cool past the
			// cooldown, so that other owners, finding the pool exhausted,
			// take them (owners that come back sooner take their own).
			for i := 0; i < 30 || time.Since(start) < 4*cooldown; i++ {
				o := env(fmt.Sprintf("w%d-%d", w, i%3+3*(i/10)))
				r, err := st.Allocate(ctx, engine.AllocateRequest{Pool: p.Ref(), Owner: o})
				if engine.Code(err) == engine.CodeExhausted {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				for _, g := range layoutGaps {
					if g.Contains(r.Address) {
						t.Errorf("gap address %s handed out", r.Address)
					}
				}
				mu.Lock()
				allocs++
				mu.Unlock()
				if _, err := st.Release(ctx, "c1", o, r.Generation); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if allocs < 100 {
		t.Fatalf("only %d allocations succeeded", allocs)
	}
	// Every re-allocation of an address to another owner comes at least a
	// cooldown after its release (the same owner may take its own back).
	var violations, crossOwner int
	err = raw.QueryRow(ctx, `WITH e AS (
			SELECT address, type, at, owner_id, lag(type) OVER w AS prev_type, lag(at) OVER w AS prev_at,
				lag(owner_id) OVER w AS prev_owner
			FROM ipam_events WHERE pool_id = $1 AND type LIKE 'env.ipv4%' WINDOW w AS (PARTITION BY address ORDER BY at, id))
		SELECT count(*) FILTER (WHERE at < prev_at + $2::interval), count(*)
		FROM e WHERE type = 'env.ipv4_addon_enabled' AND prev_type = 'env.ipv4_addon_disabled' AND owner_id <> prev_owner`,
		p.ID, "300 milliseconds").Scan(&violations, &crossOwner)
	if err != nil || violations != 0 {
		t.Fatalf("%d reuses inside the cooldown (%v)", violations, err)
	}
	if crossOwner == 0 {
		t.Fatal("no address passed to another owner: the test proves nothing about cooldown")
	}
	var dupActive, multiEnv int
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM (SELECT address FROM ipam_allocations WHERE state = 'active' GROUP BY address HAVING count(*) > 1) x`).Scan(&dupActive)
	_ = raw.QueryRow(ctx, `SELECT count(*) FROM (SELECT env_id FROM ipam_allocations WHERE state = 'active' GROUP BY env_id HAVING count(*) > 1) x`).Scan(&multiEnv)
	if dupActive != 0 || multiEnv != 0 {
		t.Fatalf("duplicates: %d addresses, %d environments", dupActive, multiEnv)
	}
}

// An environment's IPv4 add-on draws from an IPv4 pool only: an allocation, a
// plan-time hold and a claim of an environment in an IPv6 pool are refused on
// pool_id, and nothing is written.
func TestEnvIPv4FromAnIPv6PoolIsRefused(t *testing.T) {
	st, raw := newStore(t, "tf")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v6", CIDRs: prefixes("2001:db8:0:9::/120")}); err != nil {
		t.Fatal(err)
	}
	env := engine.Owner{Kind: engine.OwnerEnvIPv4, ID: "prod", EnvID: "prod", OrgID: "acme"}
	pool := engine.OperatorPool("c1", "v6")
	check := func(what string, err error) {
		t.Helper()
		var ie *engine.InvalidError
		if !errors.As(err, &ie) || ie.Field != "pool_id" || !strings.Contains(err.Error(), "IPv4 pool") {
			t.Fatalf("%s: want invalid_input on pool_id naming an IPv4 pool, got %v", what, err)
		}
	}
	_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: pool, Owner: env})
	check("allocate", err)
	_, err = st.Reserve(ctx, engine.AllocateRequest{Pool: pool, Owner: env}, time.Hour)
	check("plan-time hold", err)
	_, err = st.Allocate(ctx, engine.AllocateRequest{Pool: pool, Owner: env, Address: netip.MustParseAddr("2001:db8:0:9::5")})
	check("claim", err)
	var n int
	if err := raw.QueryRow(ctx, `SELECT count(*) FROM ipam_allocations WHERE owner_kind = 'env_ipv4'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows written for the environment: %d %v", n, err)
	}
}

// An operator pool made without a cooldown gets DefaultPoolCooldown, as a
// cluster made without cooldowns gets its defaults: a released public
// address never goes to another owner at once by omission. NoCooldown asks
// for none, and reads back as itself.
func TestPoolCooldownDefault(t *testing.T) {
	st, raw := newStore(t, "tf")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	for i, c := range []struct {
		name      string
		cooldown  time.Duration
		stored    string
		readsBack time.Duration
	}{
		{"unset", 0, "24:00:00", engine.DefaultPoolCooldown},
		{"none", engine.NoCooldown, "00:00:00", engine.NoCooldown},
		{"hour", time.Hour, "01:00:00", time.Hour},
	} {
		p, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: c.name, Cooldown: c.cooldown, CIDRs: prefixes(fmt.Sprintf("10.%d.0.0/30", i))})
		if err != nil {
			t.Fatal(err)
		}
		var stored string
		if err := raw.QueryRow(ctx, `SELECT cooldown::text FROM ipam_pools WHERE id = $1`, p.ID).Scan(&stored); err != nil || stored != c.stored {
			t.Errorf("%s: stored cooldown %q (%v), want %q", c.name, stored, err, c.stored)
		}
		got, err := st.GetPool(ctx, p.ID)
		if err != nil || got.Cooldown != c.readsBack {
			t.Errorf("%s: reads back %v (%v), want %v", c.name, got.Cooldown, err, c.readsBack)
		}
		// What GetPool gives, UpdatePool keeps.
		if up, err := st.UpdatePool(ctx, got); err != nil || up.Cooldown != c.readsBack {
			t.Errorf("%s: after an update of what it read: %v (%v), want %v", c.name, up.Cooldown, err, c.readsBack)
		}
	}
}

// The default flag moved from one pool to another in one apply: Terraform
// updates both at once, in either order. The pool made default first waits
// for the other to let the flag go, and both updates succeed; a pool made
// default while the other keeps it is refused after that wait, naming it.
func TestDefaultMovedBetweenPoolsInEitherOrder(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "")
	ctx := context.Background()
	mkCluster(t, st, "c1", "2001:db8:1::/48", "", "")
	a, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "a", Cooldown: time.Hour, CIDRs: prefixes("192.0.2.0/28"), Default: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "b", Cooldown: time.Hour, CIDRs: prefixes("192.0.2.16/28")})
	if err != nil {
		t.Fatal(err)
	}
	// b made default first, a let go a second later.
	done := make(chan error, 1)
	go func() {
		nb := b
		nb.Default = true
		_, err := st.UpdatePool(ctx, nb)
		done <- err
	}()
	time.Sleep(time.Second)
	na := a
	na.Default = false
	if _, err := st.UpdatePool(ctx, na); err != nil {
		t.Fatalf("a lets the flag go: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("b made default while a let it go: %v", err)
	}
	if got, err := st.GetPool(ctx, b.ID); err != nil || !got.Default {
		t.Fatalf("b after the move: %+v %v, want the default", got, err)
	}
	// a made default again while b keeps the flag: refused, naming b.
	na.Default = true
	if _, err := st.UpdatePool(ctx, na); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), `pool "c1/b" is already the default IPv4 pool`) {
		t.Fatalf("a made default while b keeps it: %v, want invalid_input naming b", err)
	}
}
