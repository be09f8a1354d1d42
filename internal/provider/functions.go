package provider

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// The provider's functions are pure and offline: address math from the ipam
// package's own net/netip code, the same parsers and carving the allocator
// uses, so that a module computes what the IPAM will do before apply.

var (
	_ function.Function = cidrContainsFunction{}
	_ function.Function = nodeSubprefixesFunction{}
	_ function.Function = wireguardAllowedIPsFunction{}
)

func functions() []func() function.Function {
	return []func() function.Function{
		func() function.Function { return cidrContainsFunction{} },
		func() function.Function { return nodeSubprefixesFunction{} },
		func() function.Function { return wireguardAllowedIPsFunction{} },
	}
}

// parseAddressOrPrefix reads an address (as its host prefix, /32 or /128)
// or a CIDR prefix, with the core's strict parsers.
func parseAddressOrPrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return ipam.ParsePrefix(s)
	}
	a, err := ipam.ParseAddr(s)
	if err != nil {
		if m, perr := netip.ParseAddr(s); (perr == nil && m.Is4In6()) || strings.ContainsAny(s, "% \t\r\n") {
			return netip.Prefix{}, err // its own advice: the IPv4 address itself, or no zone or whitespace
		}
		return netip.Prefix{}, fmt.Errorf("%q is neither an IP address nor a CIDR prefix (expected e.g. 2001:db8::1, 2001:db8::/64 or 192.0.2.0/24)", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

type cidrContainsFunction struct{}

func (cidrContainsFunction) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "cidr_contains"
}

func (cidrContainsFunction) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
		Summary: "Whether an address or a prefix lies inside a prefix",
		MarkdownDescription: "Returns `true` when `address_or_prefix` (an address, or a CIDR prefix) lies entirely inside `prefix`, " +
			"and `false` otherwise, including when the two are of different families (IPv4 and IPv6). " +
			"Prefixes are parsed as the IPAM parses them: no host bits, no zone, no IPv4-mapped IPv6.",
		Parameters: []function.Parameter{
			function.StringParameter{Name: "prefix", MarkdownDescription: "The outer CIDR prefix, e.g. `2001:db8::/48`."},
			function.StringParameter{Name: "address_or_prefix", MarkdownDescription: "An address (`2001:db8::1`) or a CIDR prefix (`2001:db8::/64`)."},
		},
		Return: function.BoolReturn{},
	}
}

func (cidrContainsFunction) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var outer, inner string
	if resp.Error = req.Arguments.Get(ctx, &outer, &inner); resp.Error != nil {
		return
	}
	p, err := ipam.ParsePrefix(outer)
	if err != nil {
		resp.Error = function.NewArgumentFuncError(0, err.Error())
		return
	}
	q, err := parseAddressOrPrefix(inner)
	if err != nil {
		resp.Error = function.NewArgumentFuncError(1, err.Error())
		return
	}
	resp.Error = resp.Result.Set(ctx, ipam.PrefixContains(p, q))
}

type nodeSubprefixesFunction struct{}

var subprefixTypes = map[string]attr.Type{"node_prefix": types.StringType, "instance_prefix": types.StringType}

func (nodeSubprefixesFunction) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "node_subprefixes"
}

func (nodeSubprefixesFunction) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
		Summary: "The default node and instance sub-prefixes of a cluster prefix",
		MarkdownDescription: "Returns the sub-prefixes `ipam_cluster` carves out of `cluster_prefix` when `node_prefix` and " +
			"`instance_prefix` are not set: both of length max(64, the cluster's length + 1), the node prefix the first, " +
			"the instance prefix the second. A module can show them, or route them, before the cluster exists.",
		Parameters: []function.Parameter{
			function.StringParameter{Name: "cluster_prefix", MarkdownDescription: "The cluster's IPv6 prefix, /64 or shorter, e.g. `2001:db8::/48`."},
		},
		Return: function.ObjectReturn{AttributeTypes: subprefixTypes},
	}
}

func (nodeSubprefixesFunction) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var s string
	if resp.Error = req.Arguments.Get(ctx, &s); resp.Error != nil {
		return
	}
	p, err := ipam.ParsePrefix(s)
	if err == nil {
		err = ipam.ValidateClusterPrefix(p)
	}
	var node, instance netip.Prefix
	if err == nil {
		node, instance, err = ipam.DefaultSubPrefixes(p)
	}
	if err != nil {
		resp.Error = function.NewArgumentFuncError(0, err.Error())
		return
	}
	resp.Error = resp.Result.Set(ctx, types.ObjectValueMust(subprefixTypes, map[string]attr.Value{
		"node_prefix":     types.StringValue(node.String()),
		"instance_prefix": types.StringValue(instance.String()),
	}))
}

type wireguardAllowedIPsFunction struct{}

func (wireguardAllowedIPsFunction) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "wireguard_allowed_ips"
}

func (wireguardAllowedIPsFunction) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
		Summary: "A WireGuard peer's AllowedIPs from addresses and blocks",
		MarkdownDescription: "Returns the fewest CIDR prefixes that cover exactly the given addresses and prefixes, sorted " +
			"(IPv4 first, then by address): each address becomes its host prefix (/32 or /128), a prefix inside another " +
			"is dropped and two halves of one prefix are merged into it. Use it for a peer's `AllowedIPs` from a node's " +
			"overlay address and its instance blocks.",
		Parameters: []function.Parameter{
			function.ListParameter{
				Name:                "addresses_and_blocks",
				ElementType:         types.StringType,
				MarkdownDescription: "Addresses and CIDR prefixes, IPv4 or IPv6, in any order; duplicates are allowed.",
			},
		},
		Return: function.ListReturn{ElementType: types.StringType},
	}
}

func (wireguardAllowedIPsFunction) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var in []types.String
	if resp.Error = req.Arguments.Get(ctx, &in); resp.Error != nil {
		return
	}
	ps := make([]netip.Prefix, 0, len(in))
	for i, v := range in {
		if v.IsNull() || v.IsUnknown() {
			resp.Error = function.NewArgumentFuncError(0, fmt.Sprintf("element %d is null; give an address or a CIDR prefix", i))
			return
		}
		p, err := parseAddressOrPrefix(v.ValueString())
		if err != nil {
			resp.Error = function.NewArgumentFuncError(0, fmt.Sprintf("element %d: %v", i, err))
			return
		}
		ps = append(ps, p)
	}
	out := make([]string, 0, len(ps))
	for _, p := range ipam.CollapsePrefixes(ps) {
		out = append(out, p.String())
	}
	resp.Error = resp.Result.Set(ctx, out)
}
