package provider

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// The validators below wrap the core's parsers, so Terraform rejects bad input
// at validate/plan time with exactly the message the core would give, and
// nothing is written.

// stringCheck adapts a check function to a framework string validator.
type stringCheck struct {
	desc  string
	check func(string) error
}

func (v stringCheck) Description(context.Context) string         { return v.desc }
func (v stringCheck) MarkdownDescription(context.Context) string { return v.desc }

func (v stringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := v.check(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+req.Path.String(), err.Error())
	}
}

// validID: an identifier as the core accepts it.
func validID(what string) stringCheck {
	return stringCheck{
		desc:  fmt.Sprintf("1 to %d characters: letters, digits, '.', '_', ':', '@', '-', starting with a letter or digit", ipam.MaxIDLength),
		check: func(s string) error { return ipam.ValidateID(what, s) },
	}
}

// validOrigin: a configuration's origin as the core accepts it.
func validOrigin() stringCheck {
	return stringCheck{
		desc:  fmt.Sprintf("1 to %d characters, none of them a control character", ipam.MaxOriginLength),
		check: ipam.ValidateOrigin,
	}
}

// validClusterPrefix: an IPv6 prefix of length /64 or shorter.
func validClusterPrefix() stringCheck {
	return stringCheck{
		desc: "an IPv6 prefix of length /64 or shorter, without host bits",
		check: func(s string) error {
			p, err := ipam.ParsePrefix(s)
			if err != nil {
				return err
			}
			return ipam.ValidateClusterPrefix(p)
		},
	}
}

// validIPv6Prefix: any IPv6 prefix without host bits.
func validIPv6Prefix() stringCheck {
	return stringCheck{
		desc: "an IPv6 prefix without host bits",
		check: func(s string) error {
			p, err := ipam.ParsePrefix(s)
			if err != nil {
				return err
			}
			if !p.Addr().Is6() {
				return fmt.Errorf("%s is not an IPv6 prefix", s)
			}
			return nil
		},
	}
}

// validIPv6Addr: a plain IPv6 address (no zone, no prefix length, not IPv4-mapped).
func validIPv6Addr() stringCheck {
	return stringCheck{
		desc: "a plain IPv6 address",
		check: func(s string) error {
			a, err := ipam.ParseAddr(s)
			if _, perr := netip.ParseAddr(s); err != nil && perr != nil && !strings.ContainsAny(s, "%/ \t\r\n") {
				// Not an address at all: the example is an IPv6 one
				// (ParseAddr's names an IPv4 address too).
				return fmt.Errorf("%q is not a valid IPv6 address (expected e.g. 2001:db8::53)", s)
			}
			if err != nil {
				return err
			}
			if !a.Is6() {
				return fmt.Errorf("%s is not an IPv6 address", s)
			}
			return nil
		},
	}
}

// validDuration: Go duration syntax or days ("30d"), at least minimum.
func validDuration(minimum time.Duration) stringCheck {
	return stringCheck{
		desc: fmt.Sprintf("a duration such as \"30d\", \"24h\" or \"90m\", at least %s", ipam.FormatDuration(minimum)),
		check: func(s string) error {
			d, err := ipam.ParseDuration(s)
			if err != nil {
				return err
			}
			if d < minimum {
				return fmt.Errorf("%s is shorter than the minimum of %s", s, ipam.FormatDuration(minimum))
			}
			return nil
		},
	}
}

// validPrefix: a prefix of either family, without host bits.
func validPrefix() stringCheck {
	return stringCheck{
		desc:  "a CIDR prefix without host bits, e.g. 192.0.2.0/24",
		check: func(s string) error { _, err := ipam.ParsePrefix(s); return err },
	}
}

// validAddr: a plain address of either family.
func validAddr() stringCheck {
	return stringCheck{
		desc:  "a plain IP address",
		check: func(s string) error { _, err := ipam.ParseAddr(s); return err },
	}
}

// validAddrOrPrefix: an address or a CIDR prefix.
func validAddrOrPrefix() stringCheck {
	return stringCheck{
		desc:  "an IP address or a CIDR prefix",
		check: func(s string) error { _, err := parseAddrOrPrefix(s); return err },
	}
}

// validPoolIDString checks "<cluster_id>/<name>", or a node's blocks,
// "<cluster_id>/blocks/<node_id>" (ipam_node_instance_blocks' pool_id).
func validPoolIDString(s string) error {
	if _, err := ipam.ParsePoolRef("pool_id", s); err == nil {
		return nil
	}
	c, n, ok := splitID(s)
	if !ok {
		return fmt.Errorf("%q is not a pool id: expected <cluster_id>/<name>, e.g. ipam_pool.example.id", truncateForMsg(s))
	}
	if err := ipam.ValidateID("cluster_id", c); err != nil {
		return err
	}
	return ipam.ValidateID("pool name", n)
}

// validListedPoolID: a pool id as a listing shows it: validPoolID's, or a
// released node block's parked pool, "<cluster_id>/parked/<block>", which
// the listing's own check tells apart.
func validListedPoolID() stringCheck {
	return stringCheck{
		desc: "a pool id, <cluster_id>/<name> (a node's blocks: <cluster_id>/blocks/<node_id>), or a released node block's <cluster_id>/parked/<block>",
		check: func(s string) error {
			if (operator.ListFilter{PoolID: s}).Validate() == nil {
				return nil
			}
			return validPoolIDString(s)
		},
	}
}

func truncateForMsg(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// validPoolID: a pool id "<cluster_id>/<name>".
func validPoolID() stringCheck {
	return stringCheck{desc: "a pool id, <cluster_id>/<name> (a node's blocks: <cluster_id>/blocks/<node_id>)", check: validPoolIDString}
}

// listCheck validates a list of strings in one pass over its elements:
// none may be null, each must pass check (when set), and with unique none
// may appear twice (found with a map, not by comparing every pair). It
// reports at most ipam.MaxProblems diagnostics, each on the element at fault
// (path with index), the last one counting the rest: a list of 20,000 bad
// elements costs one pass and five diagnostics, not 20,000 diagnostics each
// quoting the whole list. It replaces the framework's per-element validators
// (ValueStringsAre, UniqueValues), which report every element and compare
// every pair.
type listCheck struct {
	noun   string // the elements, in the plural: "exclusions"
	elem   stringCheck
	unique bool
}

func (v listCheck) Description(context.Context) string {
	d := "no element may be null"
	if v.elem.check != nil {
		d += "; each element: " + v.elem.desc
	}
	if v.unique {
		d += "; no element twice"
	}
	return d
}

func (v listCheck) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v listCheck) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	var out problemDiags
	v.check(req.Path, req.ConfigValue.Elements(), &out)
	out.report(&resp.Diagnostics)
}

// check judges the elements of the list at p, adding its problems to out.
func (v listCheck) check(p path.Path, elems []attr.Value, out *problemDiags) {
	var first map[string]int
	if v.unique {
		first = make(map[string]int, len(elems))
	}
	for i, e := range elems {
		at := p.AtListIndex(i)
		if e.IsNull() {
			out.add(at, "Invalid "+at.String(), v.noun+" that are null", func() string {
				return fmt.Sprintf("%s is null; every element of %s must be given", at, p)
			})
			continue
		}
		if e.IsUnknown() {
			continue
		}
		sv, ok := e.(basetypes.StringValuable)
		if !ok {
			continue // not a list of strings: the schema says otherwise
		}
		str, _ := sv.ToStringValue(context.Background())
		s := str.ValueString()
		if v.elem.check != nil {
			if err := v.elem.check(s); err != nil {
				out.add(at, "Invalid "+at.String(), "malformed "+v.noun, func() string {
					if strings.Contains(err.Error(), "(expected ") {
						return err.Error() // it says what was expected already
					}
					return err.Error() + " (expected " + v.elem.desc + ")"
				})
				continue
			}
		}
		if v.unique {
			if j, seen := first[s]; seen {
				out.add(at, "Invalid "+at.String(), "duplicate "+v.noun, func() string {
					return fmt.Sprintf("%s duplicates %s (%q); list each value once", at, p.AtListIndex(j), truncateForMsg(s))
				})
				continue
			}
			first[s] = i
		}
	}
}

// problemDiags collects the problems of one attribute and reports the first
// ipam.MaxProblems of them as error (or warning) diagnostics, the last one counting the
// rest by kind ("... and 19,995 more exclusions outside the pool's blocks").
// Only the shown ones have their detail written. The framework's Diagnostics
// compares each new diagnostic with every one it holds, so bounding them
// also keeps that linear.
type problemDiags struct {
	warn   bool // warnings, not errors
	shown  []shownDiag
	kinds  []string
	counts map[string]int
	n      int
}

type shownDiag struct {
	at      path.Path
	summary string
	detail  string
}

// add records a problem at p; kind names such problems in the plural.
func (b *problemDiags) add(p path.Path, summary, kind string, detail func() string) {
	b.n++
	if len(b.shown) < ipam.MaxProblems {
		b.shown = append(b.shown, shownDiag{at: p, summary: summary, detail: detail()})
		return
	}
	if b.counts == nil {
		b.counts = map[string]int{}
	}
	if b.counts[kind] == 0 {
		b.kinds = append(b.kinds, kind)
	}
	b.counts[kind]++
}

// len is the number of problems, shown or not.
func (b *problemDiags) len() int { return b.n }

// report adds the diagnostics.
func (b *problemDiags) report(diags *diag.Diagnostics) {
	for i, d := range b.shown {
		detail := d.detail
		if i == len(b.shown)-1 && len(b.kinds) > 0 {
			parts := make([]string, len(b.kinds))
			for k, kind := range b.kinds {
				parts[k] = ipam.Thousands(b.counts[kind]) + " more " + kind
			}
			detail += fmt.Sprintf("\n\n... and %s (only the first %d problems are listed)", strings.Join(parts, " and "), ipam.MaxProblems)
		}
		if b.warn {
			diags.AddAttributeWarning(d.at, d.summary, detail)
		} else {
			diags.AddAttributeError(d.at, d.summary, detail)
		}
	}
}
