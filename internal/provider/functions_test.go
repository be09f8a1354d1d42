package provider

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/overlayipam/terraform-provider-ipam/internal/tfcli"
)

// functionTest runs config (outputs only: the functions need no database)
// under the real terraform binary; provider functions need Terraform 1.8.
func functionTest(t *testing.T, steps ...resource.TestStep) {
	t.Helper()
	resource.UnitTest(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfcli.SkipBelow(t, tfversion.Version1_8_0)},
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps:                    steps,
	})
}

func outputIs(name string, v knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownOutputValue(name, v)
}

func TestFunctionCIDRContains(t *testing.T) {
	t.Parallel()
	functionTest(t, resource.TestStep{
		Config: `
output "v6_address"    { value = provider::ipam::cidr_contains("2001:db8::/48", "2001:db8:0:1::5") }
output "v6_prefix"     { value = provider::ipam::cidr_contains("2001:db8::/48", "2001:db8:0:100::/56") }
output "v6_outside"    { value = provider::ipam::cidr_contains("2001:db8::/48", "2001:db8:1::1") }
output "v6_wider"      { value = provider::ipam::cidr_contains("2001:db8::/48", "2001:db8::/47") }
output "v6_itself"     { value = provider::ipam::cidr_contains("2001:db8::/48", "2001:db8::/48") }
output "v4_address"    { value = provider::ipam::cidr_contains("192.0.2.0/24", "192.0.2.200") }
output "v4_outside"    { value = provider::ipam::cidr_contains("192.0.2.0/24", "198.51.100.1") }
output "mixed_family"  { value = provider::ipam::cidr_contains("::/0", "192.0.2.1") }
`,
		ConfigStateChecks: []statecheck.StateCheck{
			outputIs("v6_address", knownvalue.Bool(true)),
			outputIs("v6_prefix", knownvalue.Bool(true)),
			outputIs("v6_outside", knownvalue.Bool(false)),
			outputIs("v6_wider", knownvalue.Bool(false)),
			outputIs("v6_itself", knownvalue.Bool(true)),
			outputIs("v4_address", knownvalue.Bool(true)),
			outputIs("v4_outside", knownvalue.Bool(false)),
			outputIs("mixed_family", knownvalue.Bool(false)),
		},
	})
}

func TestFunctionNodeSubprefixes(t *testing.T) {
	t.Parallel()
	functionTest(t, resource.TestStep{
		Config: `
output "slash48" { value = provider::ipam::node_subprefixes("2001:db8:abcd::/48") }
output "slash64" { value = provider::ipam::node_subprefixes("2001:db8:0:7::/64") }
`,
		ConfigStateChecks: []statecheck.StateCheck{
			outputIs("slash48", knownvalue.ObjectExact(map[string]knownvalue.Check{
				"node_prefix":     knownvalue.StringExact("2001:db8:abcd::/64"),
				"instance_prefix": knownvalue.StringExact("2001:db8:abcd:1::/64"),
			})),
			outputIs("slash64", knownvalue.ObjectExact(map[string]knownvalue.Check{
				"node_prefix":     knownvalue.StringExact("2001:db8:0:7::/65"),
				"instance_prefix": knownvalue.StringExact("2001:db8:0:7:8000::/65"),
			})),
		},
	})
}

func TestFunctionWireguardAllowedIPs(t *testing.T) {
	t.Parallel()
	functionTest(t, resource.TestStep{
		Config: `
output "node_and_blocks" {
  value = provider::ipam::wireguard_allowed_ips([
    "2001:db8:0:1::100:0/112", "2001:db8::7", "2001:db8:0:1::101:0/112", "2001:db8::7", "192.0.2.9",
    "192.0.2.8", "2001:db8:0:1::100:5",
  ])
}
output "empty" { value = provider::ipam::wireguard_allowed_ips([]) }
`,
		ConfigStateChecks: []statecheck.StateCheck{
			outputIs("node_and_blocks", knownvalue.ListExact([]knownvalue.Check{
				knownvalue.StringExact("192.0.2.8/31"),
				knownvalue.StringExact("2001:db8::7/128"),
				knownvalue.StringExact("2001:db8:0:1::100:0/111"),
			})),
			outputIs("empty", knownvalue.ListSizeExact(0)),
		},
	})
}

// Bad input fails at plan with the function's argument named and what would
// be valid.
func TestFunctionBadInputNamesTheArgument(t *testing.T) {
	t.Parallel()
	cases := []struct{ call, want string }{
		{`cidr_contains("2001:db8::1/48", "2001:db8::1")`, `"prefix" parameter: "2001:db8::1/48" has host bits set; write it as 2001:db8::/48`},
		{`cidr_contains("2001:db8::/48", "fe80::1%eth0")`, `"address_or_prefix" parameter: "fe80::1%eth0" is not a valid IP address: zones`},
		{`cidr_contains("2001:db8::/48", "nope")`, `"address_or_prefix" parameter: "nope" is neither an IP address nor a CIDR prefix`},
		{`cidr_contains("10.0.0.0/8", "::ffff:10.0.0.1")`, `"address_or_prefix" parameter: "::ffff:10.0.0.1" is an IPv4-mapped IPv6 address; write the IPv4 address itself`},
		{`node_subprefixes("10.0.0.0/8")`, `"cluster_prefix" parameter: 10.0.0.0/8 is not an IPv6 prefix`},
		{`node_subprefixes("2001:db8::/80")`, `"cluster_prefix" parameter: 2001:db8::/80 is a /80; the cluster prefix must be at least a /64`},
		{`wireguard_allowed_ips(["2001:db8::/64", "192.0.2.300"])`, `"addresses_and_blocks" parameter: element 1: "192.0.2.300" is neither an IP address nor a CIDR prefix`},
		{`wireguard_allowed_ips(["2001:db8::/64", null])`, `"addresses_and_blocks" parameter: element 1 is null`},
	}
	for _, c := range cases {
		t.Run(c.call, func(t *testing.T) {
			t.Parallel()
			functionTest(t, resource.TestStep{
				Config:      `output "x" { value = provider::ipam::` + c.call + ` }`,
				ExpectError: regexp.MustCompile(strings.ReplaceAll(c.want, " ", `\s+`)),
			})
		})
	}
}
