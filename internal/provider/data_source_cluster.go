package provider

import (
	"context"
	"errors"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

var (
	_ datasource.DataSource              = &clusterDataSource{}
	_ datasource.DataSourceWithConfigure = &clusterDataSource{}
)

// NewClusterDataSource is the ipam_cluster data source.
func NewClusterDataSource() datasource.DataSource { return &clusterDataSource{} }

type clusterDataSource struct{ store *ipam.Client }

type clusterDataSourceModel struct {
	ID               types.String `tfsdk:"id"`
	Name             types.String `tfsdk:"name"`
	Prefix           types.String `tfsdk:"prefix"`
	NodePrefix       types.String `tfsdk:"node_prefix"`
	InstancePrefix   types.String `tfsdk:"instance_prefix"`
	NodeCooldown     types.String `tfsdk:"node_cooldown"`
	InstanceCooldown types.String `tfsdk:"instance_cooldown"`
	GatewayIPv6      types.String `tfsdk:"gateway_ipv6"`
	MTU              types.Int64  `tfsdk:"mtu"`
	NetworkRevision  types.String `tfsdk:"network_revision"`
	DNSServers       types.List   `tfsdk:"dns_servers"`
	CreatedAt        types.String `tfsdk:"created_at"`
}

func (d *clusterDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster"
}

func (d *clusterDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc, Computed: true}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Looks up a cluster by name: its prefixes, cooldowns and WorkloadSpec network settings. " +
			"Use it where the cluster is managed by another configuration (for example, node onboarding modules).",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the cluster.",
				Required:            true,
				Validators:          []validator.String{validID("name")},
			},
			"id":                computed("The cluster's name."),
			"prefix":            computed("The cluster's IPv6 prefix."),
			"node_prefix":       computed("Sub-prefix of the node overlay addresses."),
			"instance_prefix":   computed("Sub-prefix of the instance addresses."),
			"node_cooldown":     computed("Cooldown of released node addresses."),
			"instance_cooldown": computed("Cooldown of released instance addresses."),
			"gateway_ipv6":      computed("Gateway handed to instances."),
			"mtu":               schema.Int64Attribute{MarkdownDescription: "MTU handed to instances.", Computed: true},
			"dns_servers": schema.ListAttribute{
				MarkdownDescription: "DNS servers handed to instances.", ElementType: types.StringType, Computed: true,
			},
			"created_at": computed("When the cluster was created (RFC 3339)."),
			"network_revision": computed("A digest of `gateway_ipv6`, `mtu` and `dns_servers`, as `ipam_cluster` has it: give it to " +
				"each `ipam_instance_address` as `cluster_network_revision`, so that a change of these settings (by the configuration " +
				"that manages the cluster) updates the instances' network blocks at this configuration's next apply."),
		},
	}
}

func (d *clusterDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.store = storeFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *clusterDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if !requireStore(d.store, &resp.Diagnostics) {
		return
	}
	var m clusterDataSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := d.store.GetCluster(ctx, m.Name.ValueString())
	if errors.Is(err, ipam.ErrNotFound) {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Cluster Not Found", "No cluster is named "+m.Name.ValueString()+".")
		return
	}
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Read Cluster", err)
		return
	}
	m.ID = types.StringValue(c.ID)
	m.Prefix = types.StringValue(c.Prefix.String())
	m.NodePrefix = types.StringValue(c.NodePrefix.String())
	m.InstancePrefix = types.StringValue(c.InstancePrefix.String())
	m.NodeCooldown = types.StringValue(ipam.FormatDuration(c.NodeCooldown))
	m.InstanceCooldown = types.StringValue(ipam.FormatDuration(c.InstanceCooldown))
	m.GatewayIPv6 = types.StringValue(c.GatewayIPv6.String())
	m.MTU = types.Int64Value(int64(c.MTU))
	m.DNSServers = addrList(types.ListNull(types.StringType), c.DNSServers)
	m.CreatedAt = timeString(c.CreatedAt)
	m.NetworkRevision = types.StringValue(networkRevision(c.Network()))
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}
