package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// The scale of the list tests: a list attribute of this many entries is
// judged in one pass (sorting at most), and refused with a bounded error.
const manyEntries = 20000

// hosts4 are n IPv4 host prefixes from base on, step addresses apart.
func hosts4(base string, n, step int) []netip.Prefix {
	a := netip.MustParseAddr(base)
	out := make([]netip.Prefix, n)
	for i := range out {
		out[i] = netip.PrefixFrom(a, 32)
		for range step {
			a = a.Next()
		}
	}
	return out
}

// hosts6 are n IPv6 host prefixes from base on, one apart.
func hosts6(base string, n int) []netip.Prefix {
	a := netip.MustParseAddr(base)
	out := make([]netip.Prefix, n)
	for i := range out {
		out[i] = netip.PrefixFrom(a, 128)
		a = a.Next()
	}
	return out
}

// blocks30 are n consecutive IPv4 /30 blocks from base on.
func blocks30(base string, n int) []netip.Prefix {
	out := hosts4(base, n, 4)
	for i, p := range out {
		out[i] = netip.PrefixFrom(p.Addr(), 30)
	}
	return out
}

// repeat is n copies of p.
func repeat(p string, n int) []netip.Prefix {
	out := make([]netip.Prefix, n)
	for i := range out {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// unmasked are n IPv4 /24 prefixes with host bits set.
func unmasked(n int) []netip.Prefix {
	out := hosts4("10.0.0.1", n, 256)
	for i, p := range out {
		out[i] = netip.PrefixFrom(p.Addr(), 24)
	}
	return out
}

// boundedProblems checks a refusal of a list field: exactly
// engine.MaxProblems InvalidErrors, naming the field's elements at indexes
// (in order), the last one ending with "... and <more> more <kind>".
func boundedProblems(t *testing.T, err error, field string, indexes []int, more int, kind string) {
	t.Helper()
	if !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("want invalid_input, got %v", err)
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("want the problems joined, got %T: %v", err, err)
	}
	errs := j.Unwrap()
	if len(errs) != engine.MaxProblems || len(indexes) != engine.MaxProblems {
		t.Fatalf("%d problems named, want %d: %v", len(errs), engine.MaxProblems, err)
	}
	for i, e := range errs {
		var ie *engine.InvalidError
		if !errors.As(e, &ie) || ie.Field != field || !ie.Indexed || ie.Index != indexes[i] {
			t.Fatalf("problem %d: %#v, want %s[%d]", i, e, field, indexes[i])
		}
		if !strings.HasPrefix(e.Error(), fmt.Sprintf("invalid_input: %s[%d]: ", field, indexes[i])) {
			t.Errorf("problem %d does not name its element: %v", i, e)
		}
	}
	want := fmt.Sprintf("... and %s more %s (only the first %d problems are listed)", engine.Thousands(more), kind, engine.MaxProblems)
	if last := errs[len(errs)-1].(*engine.InvalidError).Msg; !strings.HasSuffix(last, want) {
		t.Errorf("the last problem does not count the rest:\n%s\nwant it to end with\n%s", last, want)
	}
	if n := len(err.Error()); n > 3000 {
		t.Errorf("the error is %d bytes long: %v", n, err)
	}
}

// Every list field of a pool with 20,000 entries, each of them at fault:
// PreparePool judges them all in one pass (sorting the blocks to find
// overlaps, a binary search per exclusion) and names the first five, the
// fifth counting the rest. The cases also cover a valid pool of 20,000
// blocks and 20,000 exclusions. No case asserts on time; the package's
// tests as a whole run in seconds, where pairwise checks would take minutes.
func TestPreparePool_20000Entries(t *testing.T) {
	t.Parallel()
	first5 := []int{0, 1, 2, 3, 4}
	for _, c := range []struct {
		name          string
		cidrs, excl   []netip.Prefix
		field, kind   string
		indexes       []int
		more          int
		inFirstDetail string
	}{
		{"exclusions outside the blocks", prefixes("203.0.113.0/24"), hosts4("10.0.0.0", manyEntries, 1),
			"exclude", "exclusions outside the pool's blocks", first5, manyEntries - 5,
			"exclusion 10.0.0.0/32 is not inside any block of the pool; an exclusion must lie inside one of its blocks (203.0.113.0/24)"},
		{"exclusions of the other family", prefixes("203.0.113.0/24"), hosts6("2001:db8::", manyEntries),
			"exclude", "exclusions of another address family", first5, manyEntries - 5,
			"exclusion 2001:db8::/128 is not of the pool's address family: the pool's blocks are IPv4"},
		{"exclusions with host bits", prefixes("10.0.0.0/8"), unmasked(manyEntries),
			"exclude", "malformed exclusions", first5, manyEntries - 5,
			"10.0.0.1/24 has host bits set; write it as 10.0.0.0/24"},
		{"exclusions outside many blocks", blocks30("10.0.0.0", manyEntries), hosts4("198.51.100.0", manyEntries, 0),
			"exclude", "exclusions outside the pool's blocks", first5, manyEntries - 5,
			"(10.0.0.0/30, 10.0.0.4/30, 10.0.0.8/30 and 19,997 more)"},
		{"blocks inside the first", append(prefixes("10.0.0.0/8"), blocks30("10.0.0.0", manyEntries-1)...), nil,
			"cidrs", "blocks overlapping another block of the pool", []int{1, 2, 3, 4, 5}, manyEntries - 6,
			"blocks 10.0.0.0/8 and 10.0.0.0/30 overlap (cidrs[0] and cidrs[1])"},
		{"one block 20,000 times", repeat("192.0.2.0/24", manyEntries), nil,
			"cidrs", "blocks overlapping another block of the pool", []int{1, 2, 3, 4, 5}, manyEntries - 6,
			"blocks 192.0.2.0/24 and 192.0.2.0/24 overlap (cidrs[0] and cidrs[1])"},
		{"blocks of two families", append(prefixes("192.0.2.0/24"), hosts6("2001:db8::", manyEntries-1)...), nil,
			"cidrs", "blocks of another address family", []int{1, 2, 3, 4, 5}, manyEntries - 6,
			"blocks 192.0.2.0/24 and 2001:db8::/128 are of different address families"},
		{"blocks with host bits", unmasked(manyEntries), nil,
			"cidrs", "malformed blocks", first5, manyEntries - 5, "has host bits set"},
		{"blocks mixing public and private", repeat("172.0.0.0/8", manyEntries), nil,
			"cidrs", "blocks mixing public and private IPv4 addresses", first5, manyEntries - 5,
			"172.0.0.0/8 mixes public and private IPv4 addresses"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := engine.Pool{ClusterID: "c1", Name: "big", CIDRs: c.cidrs, Exclude: c.excl}
			err := engine.PreparePool(&p)
			boundedProblems(t, err, c.field, c.indexes, c.more, c.kind)
			if !strings.Contains(err.Error(), c.inFirstDetail) {
				t.Errorf("the problems do not say %q:\n%v", c.inFirstDetail, err)
			}
		})
	}
	t.Run("valid: 20,000 blocks and 20,000 exclusions", func(t *testing.T) {
		blocks := blocks30("10.0.0.0", manyEntries)
		excl := make([]netip.Prefix, len(blocks))
		for i, b := range blocks {
			excl[len(excl)-1-i] = netip.PrefixFrom(b.Addr().Next(), 32) // the first host of each, in reverse order
		}
		p := engine.Pool{ClusterID: "c1", Name: "big", CIDRs: blocks, Exclude: excl}
		if err := engine.PreparePool(&p); err != nil {
			t.Fatal(err)
		}
		if p.Size != manyEntries { // each /30 keeps its second host
			t.Fatalf("size %d, want %d", p.Size, manyEntries)
		}
		l, err := engine.NewLayout(blocks, excl, netip.Addr{})
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range blocks {
			second := b.Addr().Next().Next()
			if got, ok := l.BlockOf(second); !ok || got != b {
				t.Fatalf("BlockOf(%s) = %s, want %s", second, got, b)
			}
			o, ok := l.Ordinal(second)
			if !ok || o != int64(4*i+2) || l.Excluded(o) || !l.Excluded(o-1) {
				t.Fatalf("Ordinal(%s) = %d %v, want %d, usable, after an excluded one", second, o, ok, 4*i+2)
			}
		}
	})
	t.Run("valid IPv6: 20,000 exclusions", func(t *testing.T) {
		p := engine.Pool{ClusterID: "c1", Name: "big6", CIDRs: prefixes("2001:db8:1::/64"), Exclude: hosts6("2001:db8:1::1", manyEntries)}
		if err := engine.PreparePool(&p); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkValidatePool judges a pool with 1,000 and 20,000 exclusions
// outside its block: linear, so the second costs about 20 times the first.
func BenchmarkValidatePool(b *testing.B) {
	for _, n := range []int{1000, manyEntries} {
		excl := hosts4("10.0.0.0", n, 1)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				p := engine.Pool{ClusterID: "c1", Name: "big", CIDRs: prefixes("203.0.113.0/24"), Exclude: excl}
				if err := engine.PreparePool(&p); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}

// BenchmarkValidatePoolBlocks judges a valid pool of 1,000 and 20,000
// blocks with one exclusion each: sorting, not comparing every pair.
func BenchmarkValidatePoolBlocks(b *testing.B) {
	for _, n := range []int{1000, manyEntries} {
		blocks := blocks30("10.0.0.0", n)
		excl := make([]netip.Prefix, n)
		for i, bl := range blocks {
			excl[i] = netip.PrefixFrom(bl.Addr().Next(), 32)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				p := engine.Pool{ClusterID: "c1", Name: "big", CIDRs: blocks, Exclude: excl}
				if err := engine.PreparePool(&p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The database-facing entry points with 20,000 entries: CheckPool,
// CreatePool and UpdatePool refuse 20,000 exclusions outside the pool's
// blocks with the same bounded error, writing nothing; a pool of 20,000
// blocks is placed against another one of 20,000 (the overlaps found by
// sorting, five named); and 20,000 valid exclusions are created and updated.
func TestPoolChecks_20000Entries(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	count := func(sql string) int {
		t.Helper()
		var n int
		if err := raw.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	events := count(`SELECT count(*) FROM ipam_events`)

	outside := engine.Pool{ClusterID: "c1", Name: "big", CIDRs: prefixes("203.0.113.0/24"), Exclude: hosts4("10.0.0.0", manyEntries, 1)}
	err := st.CheckPool(ctx, outside)
	boundedProblems(t, err, "exclude", []int{0, 1, 2, 3, 4}, manyEntries-5, "exclusions outside the pool's blocks")
	_, err = st.CreatePool(ctx, outside)
	boundedProblems(t, err, "exclude", []int{0, 1, 2, 3, 4}, manyEntries-5, "exclusions outside the pool's blocks")
	if n := count(`SELECT count(*) FROM ipam_pools WHERE category = 'ipv4'`); n != 0 {
		t.Fatalf("a refused pool was written: %d IPv4 pools", n)
	}
	if n := count(`SELECT count(*) FROM ipam_events`); n != events {
		t.Fatalf("the refused creation wrote %d events", n-events)
	}

	// A valid pool with 20,000 exclusions, one every other address: 20,000 runs.
	v4 := engine.Pool{ClusterID: "c1", Name: "big", CIDRs: prefixes("198.18.0.0/16"), Exclude: hosts4("198.18.0.2", manyEntries, 2)}
	created, err := st.CreatePool(ctx, v4)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(65536 - 2 - manyEntries); created.Size != want || len(created.Exclude) != manyEntries {
		t.Fatalf("size %d with %d exclusions, want %d with %d", created.Size, len(created.Exclude), want, manyEntries)
	}
	if n := count(`SELECT count(*) FROM ipam_allocations WHERE pool_id = 'c1/big'`); n != int(created.Size) {
		t.Fatalf("%d rows, want %d", n, created.Size)
	}
	events = count(`SELECT count(*) FROM ipam_events`)

	// Its update with 20,000 exclusions outside: refused, nothing changed.
	bad := v4
	bad.Exclude = append(append([]netip.Prefix{}, v4.Exclude...), hosts4("10.0.0.0", manyEntries, 1)...)
	_, err = st.UpdatePool(ctx, bad)
	boundedProblems(t, err, "exclude", []int{manyEntries, manyEntries + 1, manyEntries + 2, manyEntries + 3, manyEntries + 4}, manyEntries-5,
		"exclusions outside the pool's blocks")
	if got, err := st.GetPool(ctx, "c1/big"); err != nil || len(got.Exclude) != manyEntries || got.Size != created.Size {
		t.Fatalf("the refused update changed the pool: %v, %d exclusions, size %d", err, len(got.Exclude), got.Size)
	}
	if n := count(`SELECT count(*) FROM ipam_events`); n != events {
		t.Fatalf("the refused update wrote %d events", n-events)
	}

	// Its update to 20,000 other exclusions (the odd addresses): accepted.
	moved := v4
	moved.Exclude = hosts4("198.18.0.1", manyEntries, 2)
	updated, err := st.UpdatePool(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Size != created.Size || updated.Exclude[0] != netip.MustParsePrefix("198.18.0.1/32") {
		t.Fatalf("updated: size %d, first exclusion %s", updated.Size, updated.Exclude[0])
	}
	if n := count(`SELECT count(*) FROM ipam_allocations WHERE pool_id = 'c1/big'`); n != int(updated.Size) {
		t.Fatalf("%d rows after the update, want %d", n, updated.Size)
	}

	// A pool of 20,000 blocks inside the first but one: each of them
	// overlaps it.
	over := engine.Pool{ClusterID: "c1", Name: "over", CIDRs: hosts4("198.18.0.0", manyEntries/2, 1)}
	over.CIDRs = append(over.CIDRs, prefixes("192.0.2.0/32")...)
	over.CIDRs = append(over.CIDRs, hosts4("198.18.100.0", manyEntries/2-1, 1)...)
	err = st.CheckPool(ctx, over)
	boundedProblems(t, err, "cidrs", []int{0, 1, 2, 3, 4}, manyEntries-6, "blocks overlapping another pool")
	if !strings.Contains(err.Error(), `198.18.0.0/32 overlaps 198.18.0.0/16 of pool "c1/big"; pools of one cluster must not overlap`) {
		t.Fatalf("the overlap is not named: %v", err)
	}
}
