package engine

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestParsePrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"2a01:4f8:abcd::/48", "2a01:4f8:abcd::/48"},
		{"192.0.2.0/24", "192.0.2.0/24"},
		{"2001:db8::/128", "2001:db8::/128"},
	} {
		t.Run("valid/"+tc.in, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePrefix(tc.in)
			if err != nil || p.String() != tc.want {
				t.Errorf("ParsePrefix(%q) = %v, %v; want %s", tc.in, p, err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, in, want string }{
		{"host bits", "2001:db8::1/64", "host bits"},
		{"zone", "fe80::/64%eth0", "zones"},
		{"IPv4-mapped", "::ffff:192.0.2.0/120", "IPv4-mapped"},
		{"length 129", "2001:db8::/129", "not a valid"},
		{"garbage", "garbage", "not a valid"},
		{"empty", "", "not a valid"},
		{"leading whitespace", " 2001:db8::/48", "whitespace"},
	} {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := ParsePrefix(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParsePrefix(%q) error = %v; want it to mention %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestParseAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in string }{
		{"zone", "fe80::1%eth0"},
		{"IPv4-mapped", "::ffff:192.0.2.1"},
		{"prefix", "2001:db8::/128"},
		{"garbage", "x"},
		{"empty", ""},
	} {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := ParseAddr(tc.in); err == nil {
				t.Errorf("ParseAddr(%q) accepted", tc.in)
			}
		})
	}
	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		if a, err := ParseAddr("2001:db8::1"); err != nil || a != netip.MustParseAddr("2001:db8::1") {
			t.Errorf("ParseAddr: %v %v", a, err)
		}
	})
}

func TestDefaultSubPrefixes(t *testing.T) {
	t.Parallel()
	cases := []struct{ cluster, node, instance string }{
		{"2a01:4f8:abcd::/48", "2a01:4f8:abcd::/64", "2a01:4f8:abcd:1::/64"},
		{"2001:db8:1200::/56", "2001:db8:1200::/64", "2001:db8:1200:1::/64"},
		{"2001:db8:0:5::/64", "2001:db8:0:5::/65", "2001:db8:0:5:8000::/65"},
	}
	for _, tc := range cases {
		t.Run(tc.cluster, func(t *testing.T) {
			t.Parallel()
			n, i, err := DefaultSubPrefixes(netip.MustParsePrefix(tc.cluster))
			if err != nil || n.String() != tc.node || i.String() != tc.instance {
				t.Errorf("DefaultSubPrefixes(%s) = %s, %s, %v; want %s, %s", tc.cluster, n, i, err, tc.node, tc.instance)
			}
		})
	}
}

func TestSubPrefixOutOfRange(t *testing.T) {
	t.Parallel()
	p := netip.MustParsePrefix("2001:db8::/126")
	if _, err := SubPrefix(p, 127, 2); err == nil {
		t.Fatal("sub-prefix #2 of length /127 in a /126 accepted")
	}
	if _, err := SubPrefix(p, 125, 0); err == nil {
		t.Fatal("a /125 carved out of a /126")
	}
}

func TestLayoutIPv6(t *testing.T) {
	t.Parallel()
	gw := netip.MustParseAddr("2001:db8::5")
	l, err := NewLayout([]netip.Prefix{netip.MustParsePrefix("2001:db8::/125")}, nil, gw)
	if err != nil {
		t.Fatal(err)
	}
	// 8 addresses, minus ::0 (subnet-router anycast) and the gateway.
	if l.Size() != 6 {
		t.Fatalf("size %d, want 6", l.Size())
	}
	if !l.Excluded(0) || !l.Excluded(5) || l.Excluded(1) {
		t.Fatal("exclusions wrong")
	}
	// The layout is only read from here on: the cases share it.
	for _, tc := range []struct{ from, stride, want int64 }{
		{0, 1, 1},
		{5, 1, 6},
		{1, 4, 1},
		{0, 4, 4},
		{7, 4, 7},
	} {
		t.Run(fmt.Sprintf("NextAllowed(%d,%d)", tc.from, tc.stride), func(t *testing.T) {
			t.Parallel()
			if got := l.NextAllowed(tc.from, tc.stride); got != tc.want {
				t.Fatalf("NextAllowed(%d,%d) = %d, want %d", tc.from, tc.stride, got, tc.want)
			}
		})
	}
	a, _ := l.Addr(7)
	if a.String() != "2001:db8::7" {
		t.Fatalf("Addr(7) = %s", a)
	}
	if o, ok := l.Ordinal(netip.MustParseAddr("2001:db8::7")); !ok || o != 7 {
		t.Fatalf("Ordinal = %d %v", o, ok)
	}
	if _, ok := l.Ordinal(netip.MustParseAddr("2001:db8::8")); ok {
		t.Fatal("address outside the pool has an ordinal")
	}
}

func TestLayoutIPv4BlocksAndGaps(t *testing.T) {
	t.Parallel()
	l, err := NewLayout([]netip.Prefix{
		netip.MustParsePrefix("192.0.2.0/29"),
		netip.MustParsePrefix("198.51.100.7/32"),
		netip.MustParsePrefix("203.0.113.0/31"),
	}, []netip.Prefix{netip.MustParsePrefix("192.0.2.2/31")}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for o := int64(0); o <= l.LastOrdinal(); o++ {
		if !l.Excluded(o) {
			a, _ := l.Addr(o)
			got = append(got, a.String())
		}
	}
	want := "192.0.2.1 192.0.2.4 192.0.2.5 192.0.2.6 198.51.100.7 203.0.113.0 203.0.113.1"
	if strings.Join(got, " ") != want {
		t.Fatalf("usable = %v\nwant %s", got, want)
	}
	if l.Size() != 7 {
		t.Fatalf("size %d", l.Size())
	}
}

func TestLayoutRejects(t *testing.T) {
	t.Parallel()
	v4 := netip.MustParsePrefix("192.0.2.0/24")
	v6 := netip.MustParsePrefix("2001:db8::/64")
	for _, tc := range []struct {
		name            string
		blocks, exclude []netip.Prefix
	}{
		{"mixed families", []netip.Prefix{v4, v6}, nil},
		{"overlapping blocks", []netip.Prefix{v4, netip.MustParsePrefix("192.0.2.128/25")}, nil},
		{"exclusion outside the pool", []netip.Prefix{v4}, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := NewLayout(tc.blocks, tc.exclude, netip.Addr{}); err == nil {
				t.Errorf("%s accepted (blocks %v, exclude %v)", tc.name, tc.blocks, tc.exclude)
			}
		})
	}
}

func TestLayoutHugeBlockIsCapped(t *testing.T) {
	t.Parallel()
	l, err := NewLayout([]netip.Prefix{netip.MustParsePrefix("2001:db8::/48")}, []netip.Prefix{netip.MustParsePrefix("2001:db8::/96")}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if l.LastOrdinal() != MaxPoolOrdinals-1 {
		t.Fatalf("last ordinal %d", l.LastOrdinal())
	}
	// The excluded /96 (2^32 addresses) is skipped in one jump.
	if got := l.NextAllowed(1, 32); got != 1<<32+1 {
		t.Fatalf("NextAllowed jumped to %d", got)
	}
}

func TestDurations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"30d", 30 * 24 * time.Hour},
		{"24h", 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"90m", 90 * time.Minute},
		{"0s", 0},
	} {
		t.Run("parse/"+tc.in, func(t *testing.T) {
			t.Parallel()
			d, err := ParseDuration(tc.in)
			if err != nil || d != tc.want {
				t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, d, err, tc.want)
			}
			back, err := ParseDuration(FormatDuration(d))
			if err != nil || back != d {
				t.Errorf("round trip of %q via %q = %v, %v", tc.in, FormatDuration(d), back, err)
			}
		})
	}
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"negative", "-1h"},
		{"no unit", "30"},
		{"no number", "d"},
		{"unknown unit", "1x"},
		{"negative days", "-3d"},
		{"negative part", "1d-1h"},
		{"garbage", "abc"},
	} {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := ParseDuration(tc.in); err == nil {
				t.Errorf("ParseDuration(%q) accepted", tc.in)
			}
		})
	}
	// A refusal names what is wrong when it is more than the syntax.
	for in, want := range map[string]string{"-5h": "is negative", "-3d": "is negative", "106000d": "too long a duration (at most 36500d",
		"3000000h": "too long a duration", "30": "not a valid duration"} {
		if _, err := ParseDuration(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDuration(%q): %v, want it to say %q", in, err, want)
		}
	}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{30 * 24 * time.Hour, "30d"},
		{90 * time.Minute, "1h30m"},
		{90 * time.Second, "1m30s"},
		{36 * time.Hour, "36h"},
		{24 * time.Hour, "24h"},
	} {
		t.Run("format/"+tc.want, func(t *testing.T) {
			t.Parallel()
			if got := FormatDuration(tc.d); got != tc.want {
				t.Errorf("FormatDuration(%v) = %s, want %s", tc.d, got, tc.want)
			}
		})
	}
}

func TestValidateID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in string }{
		{"dash and digit", "node-1"},
		{"one letter", "a"},
		{"punctuation", "org_1.prod:x@y"},
		{"128 bytes", strings.Repeat("a", 128)},
	} {
		t.Run("valid/"+tc.name, func(t *testing.T) {
			t.Parallel()
			if err := ValidateID("node_id", tc.in); err != nil {
				t.Errorf("ValidateID(%q) = %v", tc.in, err)
			}
		})
	}
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"slash", "a/b"},
		{"space", "a b"},
		{"SQL", "'; DROP TABLE x; --"},
		{"NUL", "a\x00b"},
		{"invalid UTF-8", "\xff"},
		{"129 bytes", strings.Repeat("a", 129)},
		{"leading dash", "-a"},
		{"non-ASCII", "ü"},
	} {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			t.Parallel()
			if err := ValidateID("node_id", tc.in); err == nil || !strings.Contains(err.Error(), "node_id") {
				t.Errorf("ValidateID(%q) = %v, want an error naming node_id", tc.in, err)
			}
		})
	}
}

func FuzzParsePrefix(f *testing.F) {
	for _, s := range []string{"2001:db8::/48", "192.0.2.0/24", "::ffff:1.2.3.4/128", "fe80::/64%x", "::/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrefix(s)
		if err != nil {
			return
		}
		if p.Masked() != p || p.Addr().Zone() != "" || p.Addr().Is4In6() {
			t.Fatalf("ParsePrefix(%q) accepted %s", s, p)
		}
		if q, err := ParsePrefix(p.String()); err != nil || q != p {
			t.Fatalf("round trip of %s: %v %v", p, q, err)
		}
	})
}

func FuzzLayoutOrdinals(f *testing.F) {
	f.Add("2001:db8::/120", "2001:db8::10/124", int64(5), int64(3))
	f.Add("192.0.2.0/28", "192.0.2.4/30", int64(1), int64(1))
	f.Fuzz(func(t *testing.T, block, excl string, o, stride int64) {
		b, err := ParsePrefix(block)
		if err != nil {
			return
		}
		var ex []netip.Prefix
		if e, err := ParsePrefix(excl); err == nil {
			ex = append(ex, e)
		}
		l, err := NewLayout([]netip.Prefix{b}, ex, netip.Addr{})
		if err != nil {
			return
		}
		if stride <= 0 || stride > 1024 || o < 0 {
			return
		}
		n := l.NextAllowed(o, stride)
		if n < o || (n-o)%stride != 0 {
			t.Fatalf("NextAllowed(%d,%d) = %d", o, stride, n)
		}
		if n <= l.LastOrdinal() {
			if l.Excluded(n) {
				t.Fatalf("NextAllowed returned excluded ordinal %d", n)
			}
			a, ok := l.Addr(n)
			if !ok || !b.Contains(a) {
				t.Fatalf("Addr(%d) = %s outside %s", n, a, b)
			}
			if back, ok := l.Ordinal(a); !ok || back != n {
				t.Fatalf("Ordinal(Addr(%d)) = %d", n, back)
			}
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30d", "1d12h", "90m", "-1h", "9999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v < 0", s, d)
		}
		if back, err := ParseDuration(FormatDuration(d)); err != nil || back != d {
			t.Fatalf("round trip %q -> %q -> %v %v", s, FormatDuration(d), back, err)
		}
	})
}

func TestLayoutRuns(t *testing.T) {
	t.Parallel()
	l, err := NewLayout([]netip.Prefix{
		netip.MustParsePrefix("192.0.2.0/28"),
		netip.MustParsePrefix("198.51.100.0/31"),
	}, []netip.Prefix{netip.MustParsePrefix("192.0.2.4/30")}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var n int64
	for _, r := range l.Runs() {
		got = append(got, fmt.Sprintf("%s+%d", r.Start, r.Last-r.First+1))
		n += r.Last - r.First + 1
	}
	if strings.Join(got, " ") != "192.0.2.1+3 192.0.2.8+7 198.51.100.0+2" || n != l.Size() {
		t.Fatalf("runs %v (size %d)", got, l.Size())
	}
}

func TestCollapsePrefixes(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"", ""},
		{"10.0.0.0/25 10.0.0.128/25", "10.0.0.0/24"},
		{"10.0.0.1/32 10.0.0.0/32 10.0.0.2/31", "10.0.0.0/30"},
		{"10.0.0.0/24 10.0.0.7/32 10.0.0.0/24", "10.0.0.0/24"},
		{"10.0.0.128/25 10.0.1.0/25", "10.0.0.128/25 10.0.1.0/25"}, // adjacent, not siblings
		{"2001:db8::1/128 192.0.2.0/24 2001:db8::/128", "192.0.2.0/24 2001:db8::/127"},
		{"2001:db8:1::/48 2001:db8::/48", "2001:db8::/47"},
		{"0.0.0.0/1 128.0.0.0/1", "0.0.0.0/0"},
		{"::/0 2001:db8::/32", "::/0"},
	}
	for _, tc := range cases {
		name := tc.in
		if name == "" {
			name = "empty"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var in []netip.Prefix
			for _, s := range strings.Fields(tc.in) {
				in = append(in, netip.MustParsePrefix(s))
			}
			var got []string
			for _, p := range CollapsePrefixes(in) {
				got = append(got, p.String())
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("CollapsePrefixes(%s) = %v, want %s", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzCollapsePrefixes checks CollapsePrefixes against brute force inside
// 10.0.0.0/24: the output covers exactly the addresses of the input, is
// sorted, and cannot be shortened (no prefix inside another, no siblings).
func FuzzCollapsePrefixes(f *testing.F) {
	f.Add([]byte{0, 25, 128, 25})
	f.Add([]byte{1, 32, 0, 32, 2, 31, 4, 30})
	f.Fuzz(func(t *testing.T, b []byte) {
		var in []netip.Prefix
		var want [256]bool
		for i := 0; i+1 < len(b) && len(in) < 16; i += 2 {
			bits := 24 + int(b[i+1])%9
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, b[i]}), bits).Masked()
			in = append(in, p)
			for a := p.Addr(); p.Contains(a); a = a.Next() {
				want[a.As4()[3]] = true
				if a.As4()[3] == 255 {
					break
				}
			}
		}
		out := CollapsePrefixes(in)
		var got [256]bool
		for i, p := range out {
			for a := p.Addr(); p.Contains(a); a = a.Next() {
				got[a.As4()[3]] = true
				if a.As4()[3] == 255 {
					break
				}
			}
			if i > 0 {
				prev := out[i-1]
				if prev.Addr().Compare(p.Addr()) >= 0 || prev.Overlaps(p) {
					t.Fatalf("%v: not sorted and disjoint at %d", out, i)
				}
				if prev.Bits() == p.Bits() && netip.PrefixFrom(prev.Addr(), prev.Bits()-1).Masked() == netip.PrefixFrom(p.Addr(), p.Bits()-1).Masked() {
					t.Fatalf("%v: siblings %s and %s not merged", out, prev, p)
				}
			}
		}
		if got != want {
			t.Fatalf("CollapsePrefixes(%v) = %v covers other addresses", in, out)
		}
	})
}
