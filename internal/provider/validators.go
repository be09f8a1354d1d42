package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/overlayipam/terraform-provider-ipam/internal/ipamcore"
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
		desc:  fmt.Sprintf("1 to %d characters: letters, digits, '.', '_', ':', '@', '-', starting with a letter or digit", ipamcore.MaxIDLength),
		check: func(s string) error { return ipamcore.ValidateID(what, s) },
	}
}

// validClusterPrefix: an IPv6 prefix of length /64 or shorter.
func validClusterPrefix() validator.String {
	return stringCheck{
		desc: "an IPv6 prefix of length /64 or shorter, without host bits",
		check: func(s string) error {
			p, err := ipamcore.ParsePrefix(s)
			if err != nil {
				return err
			}
			return ipamcore.ValidateClusterPrefix(p)
		},
	}
}

// validIPv6Prefix: any IPv6 prefix without host bits.
func validIPv6Prefix() validator.String {
	return stringCheck{
		desc: "an IPv6 prefix without host bits",
		check: func(s string) error {
			p, err := ipamcore.ParsePrefix(s)
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
			a, err := ipamcore.ParseAddr(s)
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
		desc: fmt.Sprintf("a duration such as \"30d\", \"24h\" or \"90m\", at least %s", ipamcore.FormatDuration(minimum)),
		check: func(s string) error {
			d, err := ipamcore.ParseDuration(s)
			if err != nil {
				return err
			}
			if d < minimum {
				return fmt.Errorf("%s is shorter than the minimum of %s", s, ipamcore.FormatDuration(minimum))
			}
			return nil
		},
	}
}
