package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
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
func validID(what string) validator.String {
	return stringCheck{
		desc:  fmt.Sprintf("1 to %d characters: letters, digits, '.', '_', ':', '@', '-', starting with a letter or digit", ipam.MaxIDLength),
		check: func(s string) error { return ipam.ValidateID(what, s) },
	}
}

// validOrigin: a configuration's origin as the core accepts it.
func validOrigin() validator.String {
	return stringCheck{
		desc:  fmt.Sprintf("1 to %d characters, none of them a control character", ipam.MaxOriginLength),
		check: ipam.ValidateOrigin,
	}
}

// validClusterPrefix: an IPv6 prefix of length /64 or shorter.
func validClusterPrefix() validator.String {
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
func validIPv6Prefix() validator.String {
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
func validIPv6Addr() validator.String {
	return stringCheck{
		desc: "a plain IPv6 address",
		check: func(s string) error {
			a, err := ipam.ParseAddr(s)
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
func validDuration(minimum time.Duration) validator.String {
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
func validPrefix() validator.String {
	return stringCheck{
		desc:  "a CIDR prefix without host bits, e.g. 192.0.2.0/24",
		check: func(s string) error { _, err := ipam.ParsePrefix(s); return err },
	}
}

// validAddr: a plain address of either family.
func validAddr() validator.String {
	return stringCheck{
		desc:  "a plain IP address",
		check: func(s string) error { _, err := ipam.ParseAddr(s); return err },
	}
}

// validAddrOrPrefix: an address or a CIDR prefix.
func validAddrOrPrefix() validator.String {
	return stringCheck{
		desc:  "an IP address or a CIDR prefix",
		check: func(s string) error { _, err := parseAddrOrPrefix(s); return err },
	}
}

// validPoolIDString checks "<cluster_id>/<name>".
func validPoolIDString(s string) error {
	c, n, ok := splitID(s)
	if !ok {
		return fmt.Errorf("%q is not a pool id: expected <cluster_id>/<name>, e.g. ipam_pool.example.id", truncateForMsg(s))
	}
	if err := ipam.ValidateID("cluster_id", c); err != nil {
		return err
	}
	return ipam.ValidateID("pool name", n)
}

func truncateForMsg(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// validPoolID: a pool id "<cluster_id>/<name>".
func validPoolID() validator.String {
	return stringCheck{desc: "a pool id, <cluster_id>/<name>", check: validPoolIDString}
}

// noNullElements refuses a list holding a null element ([null], or a
// variable left null), which the element validators do not see: a null block
// or address means nothing. The diagnostic names the attribute and the
// element.
type noNullElements struct{}

func (noNullElements) Description(context.Context) string { return "no element may be null" }
func (v noNullElements) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (noNullElements) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for i, e := range req.ConfigValue.Elements() {
		if e.IsNull() {
			p := req.Path.AtListIndex(i)
			resp.Diagnostics.AddAttributeError(p, "Invalid "+p.String(), fmt.Sprintf("%s is null; every element of %s must be given", p, req.Path))
		}
	}
}
