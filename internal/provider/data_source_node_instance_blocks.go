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
	_ datasource.DataSource              = &nodeBlocksDataSource{}
	_ datasource.DataSourceWithConfigure = &nodeBlocksDataSource{}
)

// NewNodeInstanceBlocksDataSource is the ipam_node_instance_blocks data
// source: a node's blocks as they are when it is read.
func NewNodeInstanceBlocksDataSource() datasource.DataSource { return &nodeBlocksDataSource{} }

type nodeBlocksDataSource struct{ store *ipam.Client }

func (d *nodeBlocksDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_instance_blocks"
}

func (d *nodeBlocksDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computedInt := func(desc string) schema.Int64Attribute {
		return schema.Int64Attribute{MarkdownDescription: desc, Computed: true}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads a node's instance blocks as they are when it is read: its WireGuard `AllowedIPs` for " +
			"instances, and its use. Instances placed on a node grow its blocks when they are full, in the allocation's " +
			"transaction, so in an apply that creates such instances the `ipam_node_instance_blocks` resource (applied " +
			"before them) still shows the blocks from before they grew, until the next refresh. This data source, with " +
			"`depends_on` on those instances, is read after them in the same apply and shows every block. It also reads the " +
			"blocks of a node that another configuration manages.",
		Attributes: map[string]schema.Attribute{
			"cluster_id": schema.StringAttribute{
				MarkdownDescription: "The cluster.",
				Required:            true,
				Validators:          []validator.String{validID("cluster_id")},
			},
			"node_id": schema.StringAttribute{
				MarkdownDescription: "The node.",
				Required:            true,
				Validators:          []validator.String{validID("node_id")},
			},
			"id":      schema.StringAttribute{MarkdownDescription: "`<cluster_id>/<node_id>`.", Computed: true},
			"pool_id": schema.StringAttribute{MarkdownDescription: nodeBlocksDocs.poolID, Computed: true},
			"blocks": schema.ListAttribute{
				MarkdownDescription: nodeBlocksDocs.blocks,
				ElementType:         types.StringType,
				Computed:            true,
			},
			"capacity":            computedInt(nodeBlocksDocs.capacity),
			"used":                computedInt(nodeBlocksDocs.used),
			"free":                computedInt(nodeBlocksDocs.free),
			"target_blocks":       computedInt(nodeBlocksDocs.target),
			"block_prefix_length": computedInt("Length of each block."),
			"max_blocks":          computedInt("Most blocks the node may hold."),
			"demand":              computedInt("Instance addresses the node's scaling expects; null when it follows the node's use."),
			"min_free_fraction": schema.Float64Attribute{
				MarkdownDescription: "mf: free addresses the scaling keeps, in batches.", Computed: true,
			},
			"max_free_fraction": schema.Float64Attribute{
				MarkdownDescription: "Mf: free addresses, in batches, above which the scaling releases surplus blocks.", Computed: true,
			},
		},
	}
}

func (d *nodeBlocksDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.store = storeFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *nodeBlocksDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if !requireStore(d.store, &resp.Diagnostics) {
		return
	}
	var m nodeBlocksModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	nb, err := d.store.GetNodeBlocks(ctx, m.ClusterID.ValueString(), m.NodeID.ValueString())
	if errors.Is(err, ipam.ErrNotFound) {
		resp.Diagnostics.AddAttributeError(path.Root("node_id"), "Node Has No Instance Blocks",
			"Node "+m.NodeID.ValueString()+" of cluster "+m.ClusterID.ValueString()+" holds no instance blocks: "+
				"give it an ipam_node_instance_blocks resource first (or check the cluster_id and node_id).")
		return
	}
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Read Node Instance Blocks", err)
		return
	}
	m.fill(nb)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}
