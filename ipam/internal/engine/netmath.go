package engine

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"sort"
	"strings"
)

// MaxPoolOrdinals caps the ordinal space of one pool. A /64 holds 2^64
// addresses, more than a signed 64-bit ordinal can count; no pool will ever
// hand out 2^62 addresses, so the counter stops there and the rest of a huge
// prefix is simply never used.
const MaxPoolOrdinals int64 = 1 << 62

// ParsePrefix parses a CIDR strictly: no zone, no IPv4-mapped IPv6, no host bits.
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.ContainsAny(s, "% \t\r\n") {
		return netip.Prefix{}, fmt.Errorf("%q is not a valid CIDR prefix: zones and whitespace are not allowed", s)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a valid CIDR prefix (expected e.g. 2001:db8::/48 or 192.0.2.0/24)", s)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q is an IPv4-mapped IPv6 prefix; write the IPv4 prefix itself", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; write it as %s", s, p.Masked())
	}
	return p, nil
}

// ParseAddr parses a single address strictly: no zone, no prefix length, no
// IPv4-mapped IPv6.
func ParseAddr(s string) (netip.Addr, error) {
	if strings.ContainsAny(s, "%/ \t\r\n") {
		return netip.Addr{}, fmt.Errorf("%q is not a valid IP address: zones, prefix lengths and whitespace are not allowed", s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not a valid IP address (expected e.g. 2001:db8::1 or 192.0.2.1)", s)
	}
	if a.Is4In6() {
		return netip.Addr{}, fmt.Errorf("%q is an IPv4-mapped IPv6 address; write the IPv4 address itself", s)
	}
	return a, nil
}

// PrefixContains reports whether inner lies entirely inside outer.
func PrefixContains(outer, inner netip.Prefix) bool {
	return outer.Addr().BitLen() == inner.Addr().BitLen() && outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}

// SubPrefix returns the index-th sub-prefix of length bits inside p.
func SubPrefix(p netip.Prefix, bitLen int, index uint64) (netip.Prefix, error) {
	width := p.Addr().BitLen()
	if bitLen < p.Bits() || bitLen > width {
		return netip.Prefix{}, fmt.Errorf("cannot carve a /%d out of %s", bitLen, p)
	}
	if n := bitLen - p.Bits(); n < 64 && index >= uint64(1)<<n {
		return netip.Prefix{}, fmt.Errorf("%s has no sub-prefix #%d of length /%d", p, index, bitLen)
	}
	// index shifted into place: index << (width - bitLen), as a 128-bit offset.
	hi, lo := shl128(0, index, uint(width-bitLen))
	a := add128(p.Addr(), hi, lo)
	return netip.PrefixFrom(a, bitLen), nil
}

// DefaultSubPrefixes carves the node and instance sub-prefixes out of a cluster
// prefix: sub-prefix length max(64, cluster length + 1), node = #0, instance = #1.
func DefaultSubPrefixes(cluster netip.Prefix) (node, instance netip.Prefix, err error) {
	l := max(64, cluster.Bits()+1)
	if node, err = SubPrefix(cluster, l, 0); err != nil {
		return
	}
	instance, err = SubPrefix(cluster, l, 1)
	return
}

func addrWords(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

func shl128(hi, lo uint64, n uint) (uint64, uint64) {
	switch {
	case n == 0:
		return hi, lo
	case n >= 128:
		return 0, 0
	case n >= 64:
		return lo << (n - 64), 0
	default:
		return hi<<n | lo>>(64-n), lo << n
	}
}

// add128 adds the 128-bit offset (hi, lo) to a. IPv4 addresses stay IPv4.
func add128(a netip.Addr, hi, lo uint64) netip.Addr {
	ah, al := addrWords(a)
	l, carry := bits.Add64(al, lo, 0)
	h, _ := bits.Add64(ah, hi, carry)
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], h)
	binary.BigEndian.PutUint64(b[8:], l)
	r := netip.AddrFrom16(b)
	if a.Is4() {
		return r.Unmap()
	}
	return r
}

// offsetIn returns addr - base when addr lies in p and the offset fits in 63 bits.
func offsetIn(p netip.Prefix, addr netip.Addr) (int64, bool) {
	if !p.Contains(addr) {
		return 0, false
	}
	bh, bl := addrWords(p.Addr())
	ah, al := addrWords(addr)
	l, borrow := bits.Sub64(al, bl, 0)
	h, _ := bits.Sub64(ah, bh, borrow)
	if h != 0 || l >= uint64(MaxPoolOrdinals) {
		return 0, false
	}
	return int64(l), true
}

// blockSize is the number of addresses of p, capped at MaxPoolOrdinals.
func blockSize(p netip.Prefix) int64 {
	host := p.Addr().BitLen() - p.Bits()
	if host >= 62 {
		return MaxPoolOrdinals
	}
	return int64(1) << host
}

// Layout maps a pool's ordered blocks onto one ordinal space: ordinal 0 is the
// first address of the first block, the second block starts where the first
// ends, and so on. Excluded ordinals (the gaps) are never handed out.
type Layout struct {
	Family   int
	blocks   []layoutBlock
	byAddr   []int  // indexes of blocks, by address: lookups are binary searches
	excluded []span // sorted, merged
	last     int64  // highest ordinal
}

type layoutBlock struct {
	prefix netip.Prefix
	start  int64
	count  int64
}

type span struct{ lo, hi int64 }

// NewLayout builds the layout of a pool. Besides the explicit exclusions, every
// block loses its first address (the IPv6 subnet-router anycast address or the
// IPv4 network address) and, for IPv4, its broadcast address, except in
// point-to-point blocks (/31, /32, /127, /128); gateway is excluded when inside.
//
// Bad blocks or exclusions make an error naming the first MaxProblems of
// them (InvalidErrors of "cidrs" or "exclude", with their index) and how many
// more there are. It takes O((b + e) log b) for b blocks and e exclusions:
// overlaps are found by sorting the blocks, and each exclusion's block by a
// binary search.
func NewLayout(cidrs []netip.Prefix, exclude []netip.Prefix, gateway netip.Addr) (*Layout, error) {
	return newLayout(cidrs, exclude, gateway, false)
}

// newLayout builds a layout; with whole, blocks keep their first and last
// addresses (per-node instance blocks are slices of a larger routed prefix,
// not subnets of their own).
func newLayout(cidrs []netip.Prefix, exclude []netip.Prefix, gateway netip.Addr, whole bool) (*Layout, error) {
	if len(cidrs) == 0 {
		return nil, invalid("cidrs", "a pool needs at least one block")
	}
	l := &Layout{Family: familyOf(cidrs[0].Addr())}
	if err := l.placeBlocks(cidrs, whole); err != nil {
		return nil, err
	}
	bad := newProblems("exclude")
	for i, e := range exclude {
		if familyOf(e.Addr()) != l.Family {
			bad.addf(i, "exclusions of another address family",
				"exclusion %s is not of the pool's address family: the pool's blocks are IPv%d", e, l.Family)
			continue
		}
		b, ok := l.blockHolding(e.Addr())
		if !ok || !PrefixContains(b.prefix, e) {
			bad.add(i, "exclusions outside the pool's blocks", func() string {
				return fmt.Sprintf("exclusion %s is not inside any block of the pool; an exclusion must lie inside one of its blocks (%s)",
					e, prefixSummary(cidrs))
			})
			continue
		}
		lo, ok := offsetIn(b.prefix, e.Addr())
		if !ok || lo >= b.count {
			continue // beyond the capped space: never handed out anyway
		}
		hi := min(lo+blockSize(e)-1, b.count-1)
		l.excluded = append(l.excluded, span{b.start + lo, b.start + hi})
	}
	if err := bad.err(); err != nil {
		return nil, err
	}
	if gateway.IsValid() {
		if o, ok := l.Ordinal(gateway); ok {
			l.excluded = append(l.excluded, span{o, o})
		}
	}
	l.excluded = mergeSpans(l.excluded)
	return l, nil
}

// placeBlocks lays the blocks out in their order, after checking that they
// are of one family and do not overlap: sorted by address (then the wider
// first), a block overlaps an earlier one exactly when it lies inside the
// last block that did not, so one pass over the sorted blocks finds every
// block that overlaps another.
func (l *Layout) placeBlocks(cidrs []netip.Prefix, whole bool) error {
	bad := newProblems("cidrs")
	order := make([]int, 0, len(cidrs))
	for i, c := range cidrs {
		if familyOf(c.Addr()) != l.Family {
			bad.addf(i, "blocks of another address family",
				"blocks %s and %s are of different address families; the blocks of a pool are all IPv4 or all IPv6", cidrs[0], c)
			continue
		}
		order = append(order, i)
	}
	sort.SliceStable(order, func(x, y int) bool {
		a, b := cidrs[order[x]], cidrs[order[y]]
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c < 0
		}
		return a.Bits() < b.Bits()
	})
	open := -1 // the last block not inside an earlier one
	for _, i := range order {
		if open >= 0 && cidrs[open].Contains(cidrs[i].Addr()) {
			outer := open
			bad.addf(i, "blocks overlapping another block of the pool",
				"blocks %s and %s overlap (cidrs[%d] and cidrs[%d]); the blocks of a pool must not overlap: drop or split one", cidrs[outer], cidrs[i], outer, i)
			continue
		}
		open = i
	}
	if bad.len() > 0 {
		return bad.err()
	}
	var next int64
	for i, c := range cidrs {
		if next >= MaxPoolOrdinals {
			bad.addf(i, "blocks past the pool's ordinal space",
				"block %s lies past the pool's ordinal space: the blocks before it already fill the 2^62 addresses one pool can hand out; put it in a pool of its own", c)
			continue
		}
		n := min(blockSize(c), MaxPoolOrdinals-next)
		l.blocks = append(l.blocks, layoutBlock{prefix: c, start: next, count: n})
		host := c.Addr().BitLen() - c.Bits()
		if host >= 2 && !whole {
			l.excluded = append(l.excluded, span{next, next})
			if l.Family == 4 {
				l.excluded = append(l.excluded, span{next + n - 1, next + n - 1})
			}
		}
		next += n
	}
	if bad.len() > 0 {
		return bad.err()
	}
	l.last = next - 1
	l.byAddr = make([]int, len(l.blocks))
	for i := range l.byAddr {
		l.byAddr[i] = i
	}
	sort.Slice(l.byAddr, func(x, y int) bool {
		return l.blocks[l.byAddr[x]].prefix.Addr().Less(l.blocks[l.byAddr[y]].prefix.Addr())
	})
	return nil
}

// blockHolding is the block that holds a, by binary search: the blocks do
// not overlap, so it is the last one starting at or before a.
func (l *Layout) blockHolding(a netip.Addr) (layoutBlock, bool) {
	k := sort.Search(len(l.byAddr), func(k int) bool { return l.blocks[l.byAddr[k]].prefix.Addr().Compare(a) > 0 }) - 1
	if k < 0 {
		return layoutBlock{}, false
	}
	b := l.blocks[l.byAddr[k]]
	return b, b.prefix.Contains(a)
}

func familyOf(a netip.Addr) int {
	if a.Is4() {
		return 4
	}
	return 6
}

func mergeSpans(s []span) []span {
	if len(s) == 0 {
		return nil
	}
	sort.Slice(s, func(i, j int) bool { return s[i].lo < s[j].lo })
	out := []span{s[0]}
	for _, x := range s[1:] {
		last := &out[len(out)-1]
		if x.lo <= last.hi+1 {
			last.hi = max(last.hi, x.hi)
			continue
		}
		out = append(out, x)
	}
	return out
}

// LastOrdinal is the highest ordinal of the layout.
func (l *Layout) LastOrdinal() int64 { return l.last }

// Size is the number of addresses the pool can hand out.
func (l *Layout) Size() int64 {
	n := l.last + 1
	for _, e := range l.excluded {
		n -= e.hi - e.lo + 1
	}
	return n
}

// SizeUpTo is the number of addresses the pool can hand out at ordinals 0
// to top: its size once a counter's top is lowered there (a node block
// carved above it).
func (l *Layout) SizeUpTo(top int64) int64 {
	top = min(top, l.last)
	if top < 0 {
		return 0
	}
	n := top + 1
	for _, e := range l.excluded { // merged, in order
		if e.lo > top {
			break
		}
		n -= min(e.hi, top) - e.lo + 1
	}
	return n
}

// Addr returns the address at ordinal o.
func (l *Layout) Addr(o int64) (netip.Addr, bool) {
	if o < 0 || o > l.last {
		return netip.Addr{}, false
	}
	i := sort.Search(len(l.blocks), func(i int) bool { return l.blocks[i].start+l.blocks[i].count > o })
	b := l.blocks[i]
	return add128(b.prefix.Addr(), 0, uint64(o-b.start)), true
}

// Ordinal returns the ordinal of a, whether or not it is excluded.
func (l *Layout) Ordinal(a netip.Addr) (int64, bool) {
	b, ok := l.blockHolding(a)
	if !ok {
		return 0, false
	}
	if off, ok := offsetIn(b.prefix, a); ok && off < b.count {
		return b.start + off, true
	}
	return 0, false
}

// Excluded reports whether ordinal o may never be handed out.
func (l *Layout) Excluded(o int64) bool {
	_, in := l.spanAt(o)
	return in
}

func (l *Layout) spanAt(o int64) (span, bool) {
	i := sort.Search(len(l.excluded), func(i int) bool { return l.excluded[i].hi >= o })
	if i < len(l.excluded) && l.excluded[i].lo <= o {
		return l.excluded[i], true
	}
	return span{}, false
}

// NextAllowed returns the smallest ordinal n >= o with n = o (mod stride) that
// is not excluded. The result may exceed LastOrdinal: the stripe is then spent.
func (l *Layout) NextAllowed(o, stride int64) int64 {
	for o <= l.last {
		s, in := l.spanAt(o)
		if !in {
			return o
		}
		steps := (s.hi-o)/stride + 1
		if steps > (MaxPoolOrdinals-o)/stride {
			return l.last + 1
		}
		o += steps * stride
	}
	return o
}

// BlockOf returns the block that holds a.
func (l *Layout) BlockOf(a netip.Addr) (netip.Prefix, bool) {
	b, ok := l.blockHolding(a)
	return b.prefix, ok
}

// Run is a stretch of consecutive usable ordinals inside one block.
type Run struct {
	First, Last int64
	Start       netip.Addr // the address of First
}

// BlockFirst is the first ordinal of the layout's block i, or past every
// ordinal when i is past its last block.
func (l *Layout) BlockFirst(i int) int64 {
	if i >= len(l.blocks) {
		last := l.blocks[len(l.blocks)-1]
		return last.start + last.count
	}
	return l.blocks[i].start
}

// Runs lists the usable ordinals as runs, in ordinal order. Table pools store
// one row per usable address, inserted run by run.
func (l *Layout) Runs() []Run {
	var out []Run
	for _, b := range l.blocks {
		lo, hi := b.start, b.start+b.count-1
		for o := lo; o <= hi; {
			if s, in := l.spanAt(o); in {
				o = s.hi + 1
				continue
			}
			end := hi
			i := sort.Search(len(l.excluded), func(i int) bool { return l.excluded[i].lo > o })
			if i < len(l.excluded) && l.excluded[i].lo-1 < end {
				end = l.excluded[i].lo - 1
			}
			a, _ := l.Addr(o)
			out = append(out, Run{First: o, Last: end, Start: a})
			o = end + 1
		}
	}
	return out
}

// CollapsePrefixes returns the fewest prefixes that cover exactly the
// addresses of ps, sorted (IPv4 first, then by address): prefixes inside
// another are dropped and sibling halves are merged into their parent,
// repeatedly. ps is not modified.
func CollapsePrefixes(ps []netip.Prefix) []netip.Prefix {
	in := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		in[i] = p.Masked()
	}
	sort.Slice(in, func(i, j int) bool {
		if c := in[i].Addr().Compare(in[j].Addr()); c != 0 {
			return c < 0
		}
		return in[i].Bits() < in[j].Bits()
	})
	out := make([]netip.Prefix, 0, len(in))
	for _, p := range in {
		// Sorted by start, wider first: p is either inside the last kept
		// prefix or starts after it.
		if n := len(out); n > 0 && PrefixContains(out[n-1], p) {
			continue
		}
		out = append(out, p)
		for n := len(out); n >= 2; n = len(out) {
			a, b := out[n-2], out[n-1]
			if a.Bits() != b.Bits() || a.Bits() == 0 || a.Addr().BitLen() != b.Addr().BitLen() {
				break
			}
			parent := netip.PrefixFrom(a.Addr(), a.Bits()-1).Masked()
			if netip.PrefixFrom(b.Addr(), b.Bits()-1).Masked() != parent {
				break
			}
			out = append(out[:n-2], parent)
		}
	}
	return out
}

// maxListedPrefixes bounds how many prefixes a message lists.
const maxListedPrefixes = 3

// prefixSummary lists at most a few prefixes for a message: "203.0.113.0/24,
// 198.51.100.0/24, 192.0.2.0/25 and 19,997 more".
func prefixSummary(ps []netip.Prefix) string {
	if len(ps) <= maxListedPrefixes {
		return prefixList(ps)
	}
	return prefixList(ps[:maxListedPrefixes]) + " and " + Thousands(len(ps)-maxListedPrefixes) + " more"
}

// prefixList writes every prefix, separated by ", " (in linear time: a
// pool's 20,000 exclusions make one string of their length). Messages use
// prefixSummary, which lists a few.
func prefixList(ps []netip.Prefix) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}
