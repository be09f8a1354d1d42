package provider

// Fuzz targets for the provider's own parsers of user input: exclusions
// (parseAddrOrPrefix), import and pool ids (splitID, validPoolIDString) and
// every attribute validator. scripts/fuzz.sh runs them; their seeds run as
// plain tests.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

var fuzzSeeds = []string{
	"192.0.2.1", "192.0.2.0/24", "2001:db8::/64", "2001:db8::1", "fe80::1%eth0", "::ffff:1.2.3.4", "::ffff:1.2.3.0/120",
	"192.0.2.1/24", "/", "c1/v4", "c1/", "/v4", "c1/v4/x", "c1//v4", "node-a", "a'; DROP TABLE x; --", "n\x00", "\xff",
	"c1/parked/2001:db8::/64", "c1/parked/2001:DB8::/64", "c1/parked/2001:db8::1/64", "c1/parked/x/y",
	"30d", "1h", "-1s", "0s", "99999999999d", "", " ", "2001:db8::/129",
	// The families of hostile input the core's edge refuses (ipam/internal/engine/badinput_test.go).
	"2001:DB8:200::1/48", "fe80::1%25eth0", "c1\nx", "c1\u202ex", "../../etc/passwd", "c1%", "-c1", "c\x001/v4", "c1/v\x004",
	"c1/blocks/n1", "сluster", "1099511627776", "-1",
}

// FuzzParseAddrOrPrefix: an accepted exclusion is a masked prefix without zone
// or IPv4 mapping, an address stays a host prefix, and what the provider
// writes back into state reads back the same.
func FuzzParseAddrOrPrefix(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseAddrOrPrefix(s)
		if err != nil {
			return
		}
		if !p.IsValid() || p.Masked() != p || p.Addr().Zone() != "" || p.Addr().Is4In6() {
			t.Fatalf("parseAddrOrPrefix(%q) accepted %v", s, p)
		}
		// What the provider writes back (prefixList: a host prefix as a bare address) reads back the same.
		back := p.String()
		if p.IsSingleIP() && !strings.Contains(s, "/") {
			back = p.Addr().String()
		}
		if q, err := parseAddrOrPrefix(back); err != nil || q != p {
			t.Fatalf("round trip of %q: %q gives %v, %v", s, back, q, err)
		}
		if !strings.Contains(s, "/") && p.Bits() != p.Addr().BitLen() {
			t.Fatalf("the address %q became the prefix %v", s, p)
		}
	})
}

// FuzzSplitID: import ids split at their first '/', into two non-empty parts
// that join back into the id.
func FuzzSplitID(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		a, b, ok := splitID(id)
		i := strings.IndexByte(id, '/')
		want := i > 0 && i < len(id)-1
		if ok != want {
			t.Fatalf("splitID(%q) ok = %v, want %v", id, ok, want)
		}
		if ok && (a+"/"+b != id || strings.Contains(a, "/")) {
			t.Fatalf("splitID(%q) = %q, %q", id, a, b)
		}
	})
}

// FuzzValidPoolIDString: a pool id is valid exactly when it splits into a
// valid cluster id and a valid pool name, or "blocks/" and a valid node id
// (a node's blocks), and its message stays short.
func FuzzValidPoolIDString(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := validPoolIDString(s)
		c, n, ok := splitID(s)
		node, blocks := strings.CutPrefix(n, "blocks/")
		valid := ok && ipam.ValidateID("cluster_id", c) == nil &&
			(ipam.ValidateID("pool name", n) == nil || blocks && ipam.ValidateID("node_id", node) == nil)
		if (err == nil) != valid {
			t.Fatalf("validPoolIDString(%q) = %v, want valid = %v", s, err, valid)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Fatalf("a %d-byte pool id gives a %d-byte message", len(s), len(err.Error()))
		}
	})
}

// The ipam_allocations data source's pool filter takes the ids its listing
// shows, a released node block's parked pool among them (in the block's
// canonical form), which a pool id of a resource may not name.
func TestValidListedPoolID(t *testing.T) {
	for s, want := range map[string]bool{
		"c1/instance": true, "c1/parked/2001:db8::/64": true,
		"c1/parked/2001:DB8::/64": false, "c1/parked/2001:db8::1/64": false, "c1/parked/x/y": false, "c1/parked/": false, "c1": false,
	} {
		var resp validator.StringResponse
		validListedPoolID().ValidateString(context.Background(), validator.StringRequest{Path: path.Root("pool_id"), ConfigValue: types.StringValue(s)}, &resp)
		if ok := !resp.Diagnostics.HasError(); ok != want {
			t.Errorf("%q: valid = %v, want %v: %v", s, ok, want, resp.Diagnostics)
		}
	}
	if validPoolIDString("c1/parked/2001:db8::/64") == nil {
		t.Error("a resource's pool id may name a parked pool")
	}
}

// FuzzValidators runs every string validator of the schemas: none panics, an
// error is always an attribute error on the attribute's path, and each agrees
// with the core parser it wraps.
func FuzzValidators(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	p := path.Root("attr")
	isIPv6Prefix := func(s string) bool {
		q, err := ipam.ParsePrefix(s)
		return err == nil && q.Addr().Is6()
	}
	isIPv6Addr := func(s string) bool {
		a, err := ipam.ParseAddr(s)
		return err == nil && a.Is6()
	}
	checks := []struct {
		name  string
		v     validator.String
		valid func(string) bool
	}{
		{"validID", validID("attr"), func(s string) bool { return ipam.ValidateID("attr", s) == nil }},
		{"validClusterPrefix", validClusterPrefix(), func(s string) bool {
			q, err := ipam.ParsePrefix(s)
			return err == nil && q.Addr().Is6() && q.Bits() <= 64
		}},
		{"validIPv6Prefix", validIPv6Prefix(), isIPv6Prefix},
		{"validIPv6Addr", validIPv6Addr(), isIPv6Addr},
		{"validDuration(1h)", validDuration(time.Hour), func(s string) bool {
			d, err := ipam.ParseDuration(s)
			return err == nil && d >= time.Hour
		}},
		{"validPrefix", validPrefix(), func(s string) bool { _, err := ipam.ParsePrefix(s); return err == nil }},
		{"validAddr", validAddr(), func(s string) bool { _, err := ipam.ParseAddr(s); return err == nil }},
		{"validAddrOrPrefix", validAddrOrPrefix(), func(s string) bool {
			if strings.Contains(s, "/") {
				_, err := ipam.ParsePrefix(s)
				return err == nil
			}
			_, err := ipam.ParseAddr(s)
			return err == nil
		}},
		{"validPoolID", validPoolID(), func(s string) bool { return validPoolIDString(s) == nil }},
		{"validListedPoolID", validListedPoolID(), func(s string) bool {
			return validPoolIDString(s) == nil || (operator.ListFilter{PoolID: s}).Validate() == nil
		}},
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range checks {
			var resp validator.StringResponse
			c.v.ValidateString(context.Background(), validator.StringRequest{Path: p, ConfigValue: types.StringValue(s)}, &resp)
			bad := resp.Diagnostics.HasError()
			if bad == c.valid(s) {
				t.Fatalf("%s(%q): error = %v, but the core says valid = %v: %v", c.name, s, bad, c.valid(s), resp.Diagnostics)
			}
			for _, d := range resp.Diagnostics {
				wp, ok := d.(interface{ Path() path.Path })
				if !ok || !wp.Path().Equal(p) || d.Summary() != "Invalid attr" {
					t.Fatalf("%s(%q): diagnostic %q is not an attribute error on attr", c.name, s, d.Summary())
				}
			}
		}
	})
}
