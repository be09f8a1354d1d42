package provider

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// manyEntries is the length of the lists of the scale tests: 20,000
// exclusions, blocks, DNS servers, keys or pool ids.
const manyEntries = 20000

// protoProvider serves the provider's protocol 6 server in-process, as
// terraform talks to it: its resources' configurations go through the
// framework's whole validation (attribute validators, ValidateConfig).
type protoProvider struct {
	srv     tfprotov6.ProviderServer
	schemas map[string]*tfprotov6.Schema
}

func newProtoProvider(tb testing.TB) *protoProvider {
	tb.Helper()
	srv, err := NewServer("test")()
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil || len(resp.Diagnostics) > 0 {
		tb.Fatalf("schema: %v %v", err, resp.Diagnostics)
	}
	return &protoProvider{srv: srv, schemas: resp.ResourceSchemas}
}

// objectType is the type of resource typ's configuration.
func (p *protoProvider) objectType(typ string) tftypes.Object {
	return p.schemas[typ].ValueType().(tftypes.Object)
}

// validate sends resource typ's configuration, attrs and nulls, to
// ValidateResourceConfig.
func (p *protoProvider) validate(tb testing.TB, typ string, attrs map[string]tftypes.Value) []*tfprotov6.Diagnostic {
	tb.Helper()
	ot := p.objectType(typ)
	vals := map[string]tftypes.Value{}
	for name, at := range ot.AttributeTypes {
		if v, ok := attrs[name]; ok {
			vals[name] = v
		} else {
			vals[name] = tftypes.NewValue(at, nil)
		}
	}
	cfg, err := tfprotov6.NewDynamicValue(ot, tftypes.NewValue(ot, vals))
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := p.srv.ValidateResourceConfig(context.Background(), &tfprotov6.ValidateResourceConfigRequest{TypeName: typ, Config: &cfg})
	if err != nil {
		tb.Fatal(err)
	}
	return resp.Diagnostics
}

func str(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }

// strList is a list of strings; a "<null>" element is null.
func strList(ss []string) tftypes.Value {
	vals := make([]tftypes.Value, len(ss))
	for i, s := range ss {
		if s == "<null>" {
			vals[i] = tftypes.NewValue(tftypes.String, nil)
		} else {
			vals[i] = str(s)
		}
	}
	return tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, vals)
}

// strs are n strings made by f.
func strs(n int, f func(i int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// ipv4At is the i-th IPv4 address after base.
func ipv4At(base string, i int) netip.Addr {
	b := netip.MustParseAddr(base).As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + uint32(i)
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// setEntries is an address set's addresses: key -> (pools, family, address);
// an empty pools list is null, as is an empty family or address.
type setEntry struct {
	pools           []string
	family, address string
}

func (p *protoProvider) setEntries(entries map[string]setEntry) tftypes.Value {
	mt := p.objectType("ipam_address_set").AttributeTypes["addresses"].(tftypes.Map)
	et := mt.ElementType.(tftypes.Object)
	vals := map[string]tftypes.Value{}
	for k, e := range entries {
		v := map[string]tftypes.Value{}
		for name, at := range et.AttributeTypes {
			v[name] = tftypes.NewValue(at, nil)
		}
		if e.pools != nil {
			v["pools"] = strList(e.pools)
		}
		if e.family != "" {
			v["family"] = str(e.family)
		}
		if e.address != "" {
			v["address"] = str(e.address)
		}
		vals[k] = tftypes.NewValue(et, v)
	}
	return tftypes.NewValue(mt, vals)
}

// mapKey is a step of attrPath into a map.
type mapKey string

// attrPath is a path such as exclude[3] or addresses["k"].pools[0]:
// attribute names (string), map keys (mapKey) and list indexes (int).
func attrPath(steps ...any) *tftypes.AttributePath {
	p := tftypes.NewAttributePath()
	for _, s := range steps {
		switch s := s.(type) {
		case string:
			p = p.WithAttributeName(s)
		case mapKey:
			p = p.WithElementKeyString(string(s))
		case int:
			p = p.WithElementKeyInt(s)
		}
	}
	return p
}

// expectBounded checks the diagnostics of a list with too many problems:
// exactly ipam.MaxProblems errors, on the given paths in order, each with
// the summary, the last one counting the rest: "... and <more> more <kind>".
func expectBounded(t *testing.T, diags []*tfprotov6.Diagnostic, paths []*tftypes.AttributePath, summary string, more int, kind string) {
	t.Helper()
	if len(diags) != ipam.MaxProblems {
		t.Fatalf("%d diagnostics, want %d: %s", len(diags), ipam.MaxProblems, diagsText(diags))
	}
	for i, d := range diags {
		if d.Severity != tfprotov6.DiagnosticSeverityError || d.Attribute == nil || !d.Attribute.Equal(paths[i]) ||
			(summary != "" && d.Summary != summary) || (summary == "" && !strings.HasPrefix(d.Summary, "Invalid ")) {
			t.Fatalf("diagnostic %d: %s on %v, want %q on %v:\n%s", i, d.Summary, d.Attribute, summary, paths[i], diagsText(diags))
		}
	}
	want := fmt.Sprintf("... and %s more %s (only the first %d problems are listed)", ipam.Thousands(more), kind, ipam.MaxProblems)
	if last := diags[len(diags)-1].Detail; !strings.HasSuffix(last, want) {
		t.Fatalf("the last diagnostic does not count the rest:\n%s\nwant it to end with %q", last, want)
	}
	for _, d := range diags {
		if len(d.Detail) > 1000 {
			t.Fatalf("a diagnostic of %d bytes: %.300s...", len(d.Detail), d.Detail)
		}
	}
}

func diagsText(diags []*tfprotov6.Diagnostic) string {
	var b strings.Builder
	for _, d := range diags {
		fmt.Fprintf(&b, "  %s %v: %s: %.200s\n", d.Severity, d.Attribute, d.Summary, d.Detail)
	}
	return b.String()
}

// indexPaths are the paths of the elements at indexes of the list at base.
func indexPaths(base []any, indexes ...int) []*tftypes.AttributePath {
	out := make([]*tftypes.AttributePath, len(indexes))
	for k, i := range indexes {
		out[k] = attrPath(append(append([]any{}, base...), i)...)
	}
	return out
}

// Every list attribute of the resources, 20,000 entries long, through the
// framework's validation of a configuration (what terraform validate and
// plan send first): each is judged in one pass, and refused with five
// diagnostics, each on the element at fault (so that terraform quotes that
// line, not the whole list), the fifth counting the rest. A valid list of
// 20,000 passes. Nothing here needs a database: no configured provider
// writes anything at validation. The test asserts on the diagnostics only;
// the pairwise checks it replaced took minutes at this size.
func TestValidate_20000Entries(t *testing.T) {
	t.Parallel()
	p := newProtoProvider(t)
	first5, second5 := []int{0, 1, 2, 3, 4}, []int{1, 2, 3, 4, 5}
	pool := func(cidrs, exclude []string) map[string]tftypes.Value {
		m := map[string]tftypes.Value{"cluster_id": str("c1"), "name": str("big"), "cidrs": strList(cidrs)}
		if exclude != nil {
			m["exclude"] = strList(exclude)
		}
		return m
	}
	cluster := func(dns []string) map[string]tftypes.Value {
		return map[string]tftypes.Value{"name": str("c2"), "prefix": str("2001:db8::/48"), "dns_servers": strList(dns)}
	}
	set := func(entries map[string]setEntry) map[string]tftypes.Value {
		return map[string]tftypes.Value{"cluster_id": str("c1"), "owner_id": str("s1"), "addresses": p.setEntries(entries)}
	}
	manyKeys := func(key func(i int) string, e setEntry) (map[string]setEntry, []string) {
		m := map[string]setEntry{}
		for i := range manyEntries {
			m[key(i)] = e
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return m, keys[:ipam.MaxProblems]
	}
	keyPaths := func(keys []string, rest ...any) []*tftypes.AttributePath {
		out := make([]*tftypes.AttributePath, len(keys))
		for i, k := range keys {
			out[i] = attrPath(append([]any{"addresses", mapKey(k)}, rest...)...)
		}
		return out
	}
	outside := strs(manyEntries, func(i int) string { return ipv4At("10.0.0.0", i).String() })
	blocks := strs(manyEntries, func(i int) string { return ipv4At("10.0.0.0", 4*i).String() + "/30" })
	badKeys, badKeysFirst := manyKeys(func(i int) string { return fmt.Sprintf("k!%d", i) }, setEntry{family: "ipv6"})
	emptyKeys, emptyKeysFirst := manyKeys(func(i int) string { return fmt.Sprintf("k%d", i) }, setEntry{})
	ipv5Keys, ipv5KeysFirst := manyKeys(func(i int) string { return fmt.Sprintf("k%d", i) }, setEntry{family: "ipv5"})
	zoneKeys, zoneKeysFirst := manyKeys(func(i int) string { return fmt.Sprintf("k%d", i) }, setEntry{address: "fe80::1%eth0"})
	goodKeys, _ := manyKeys(func(i int) string { return fmt.Sprintf("k%d", i) }, setEntry{pools: []string{"c1/a", "c1/b"}})

	for _, c := range []struct {
		name    string
		typ     string
		attrs   map[string]tftypes.Value
		paths   []*tftypes.AttributePath // nil: valid
		summary string                   // "": "Invalid <path>"
		more    int
		kind    string
	}{
		{"pool exclude: outside the blocks", "ipam_pool", pool([]string{"203.0.113.0/24"}, outside),
			indexPaths([]any{"exclude"}, first5...), "Invalid Pool", manyEntries - 5, "exclusions outside the pool's blocks"},
		{"pool exclude: malformed", "ipam_pool", pool([]string{"203.0.113.0/24"}, strs(manyEntries, func(i int) string { return fmt.Sprintf("x%d", i) })),
			indexPaths([]any{"exclude"}, first5...), "", manyEntries - 5, "malformed exclusions"},
		{"pool exclude: null", "ipam_pool", pool([]string{"203.0.113.0/24"}, strs(manyEntries, func(int) string { return "<null>" })),
			indexPaths([]any{"exclude"}, first5...), "", manyEntries - 5, "exclusions that are null"},
		{"pool exclude: the other family", "ipam_pool", pool([]string{"203.0.113.0/24"}, strs(manyEntries, func(i int) string { return fmt.Sprintf("2001:db8::%x", i) })),
			indexPaths([]any{"exclude"}, first5...), "Invalid Pool", manyEntries - 5, "exclusions of another address family"},
		{"pool cidrs: inside the first", "ipam_pool", pool(append([]string{"10.0.0.0/8"}, blocks[:manyEntries-1]...), nil),
			indexPaths([]any{"cidrs"}, second5...), "Invalid Pool", manyEntries - 6, "blocks overlapping another block of the pool"},
		{"pool cidrs: malformed", "ipam_pool", pool(strs(manyEntries, func(i int) string { return ipv4At("10.0.0.1", 4*i).String() + "/30" }), nil),
			indexPaths([]any{"cidrs"}, first5...), "", manyEntries - 5, "malformed blocks"},
		{"pool: 20,000 blocks, 20,000 exclusions", "ipam_pool",
			pool(blocks, strs(manyEntries, func(i int) string { return ipv4At("10.0.0.1", 4*i).String() })), nil, "", 0, ""},
		{"cluster dns_servers: one server 20,000 times", "ipam_cluster", cluster(strs(manyEntries, func(int) string { return "2001:db8::53" })),
			indexPaths([]any{"dns_servers"}, second5...), "", manyEntries - 6, "duplicate DNS servers"},
		{"cluster dns_servers: IPv4", "ipam_cluster", cluster(outside),
			indexPaths([]any{"dns_servers"}, first5...), "", manyEntries - 5, "malformed DNS servers"},
		{"cluster dns_servers: 20,000 distinct", "ipam_cluster", cluster(strs(manyEntries, func(i int) string { return fmt.Sprintf("2001:db8::%x", i) })),
			nil, "", 0, ""},
		{"address set: bad keys", "ipam_address_set", set(badKeys),
			keyPaths(badKeysFirst), "Invalid Address Key", manyEntries - 5, "address keys that are not valid"},
		{"address set: keys asking for nothing", "ipam_address_set", set(emptyKeys),
			keyPaths(emptyKeysFirst), "Empty Address Request", manyEntries - 5, "keys asking for nothing"},
		{"address set: family ipv5", "ipam_address_set", set(ipv5Keys),
			keyPaths(ipv5KeysFirst, "family"), "", manyEntries - 5, "family values that are not ipv4 or ipv6"},
		{"address set: addresses with zones", "ipam_address_set", set(zoneKeys),
			keyPaths(zoneKeysFirst, "address"), "", manyEntries - 5, "addresses that are not plain IP addresses"},
		{"address set pools: malformed", "ipam_address_set",
			set(map[string]setEntry{"a": {pools: strs(manyEntries, func(i int) string { return fmt.Sprintf("p%d", i) })}}),
			indexPaths([]any{"addresses", mapKey("a"), "pools"}, first5...), "", manyEntries - 5, "malformed pool ids"},
		{"address set pools: one pool 20,000 times", "ipam_address_set",
			set(map[string]setEntry{"a": {pools: strs(manyEntries, func(int) string { return "c1/p" })}}),
			indexPaths([]any{"addresses", mapKey("a"), "pools"}, second5...), "", manyEntries - 6, "duplicate pool ids"},
		{"address set: 20,000 keys", "ipam_address_set", set(goodKeys), nil, "", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			diags := p.validate(t, c.typ, c.attrs)
			if c.paths == nil {
				if len(diags) != 0 {
					t.Fatalf("a valid configuration got %d diagnostics:\n%s", len(diags), diagsText(diags))
				}
				return
			}
			expectBounded(t, diags, c.paths, c.summary, c.more, c.kind)
		})
	}
}

// BenchmarkValidatePoolExclusions validates an ipam_pool with 1,000 and
// 20,000 exclusions outside its block through the framework, as terraform
// validate does: linear, five diagnostics.
func BenchmarkValidatePoolExclusions(b *testing.B) {
	p := newProtoProvider(b)
	for _, n := range []int{1000, manyEntries} {
		cfg := map[string]tftypes.Value{"cluster_id": str("c1"), "name": str("big"), "cidrs": strList([]string{"203.0.113.0/24"}),
			"exclude": strList(strs(n, func(i int) string { return ipv4At("10.0.0.0", i).String() }))}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if diags := p.validate(b, "ipam_pool", cfg); len(diags) != ipam.MaxProblems {
					b.Fatalf("%d diagnostics", len(diags))
				}
			}
		})
	}
}
