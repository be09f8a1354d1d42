package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

var (
	_ datasource.DataSource              = &addressDataSource{}
	_ datasource.DataSourceWithConfigure = &addressDataSource{}
)

// NewAddressDataSource is the ipam_address data source.
func NewAddressDataSource() datasource.DataSource { return &addressDataSource{} }

type addressDataSource struct{ store *ipam.Client }

type addressDataSourceModel struct {
	Address     types.String `tfsdk:"address"`
	ClusterID   types.String `tfsdk:"cluster_id"`
	ID          types.String `tfsdk:"id"`
	PoolID      types.String `tfsdk:"pool_id"`
	Category    types.String `tfsdk:"category"`
	CIDR        types.String `tfsdk:"cidr"`
	State       types.String `tfsdk:"state"`
	LastHolder  types.Bool   `tfsdk:"last_holder"`
	AllocID     types.String `tfsdk:"allocation_id"`
	Generation  types.Int64  `tfsdk:"generation"`
	OwnerKind   types.String `tfsdk:"owner_kind"`
	OwnerID     types.String `tfsdk:"owner_id"`
	OrgID       types.String `tfsdk:"org_id"`
	EnvID       types.String `tfsdk:"env_id"`
	NodeID      types.String `tfsdk:"node_id"`
	InstanceID  types.String `tfsdk:"instance_id"`
	Actor       types.String `tfsdk:"actor"`
	AllocatedAt types.String `tfsdk:"allocated_at"`
	ReleasedAt  types.String `tfsdk:"released_at"`
	ReusableAt  types.String `tfsdk:"reusable_at"`
}

func (d *addressDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_address"
}

func (d *addressDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc, Computed: true}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reverse lookup of an address: the cluster, pool and category it belongs to, its state and its " +
			"owner (org, env, instance or node), who allocated it and when. For a cooling address, the owner is its last " +
			"holder, with when it was released and when it becomes reusable. Fails when the address is in no pool.",
		Attributes: map[string]schema.Attribute{
			"address": schema.StringAttribute{
				MarkdownDescription: "The address to look up (IPv6 or IPv4).",
				Required:            true,
				Validators:          []validator.String{validAddr()},
			},
			"cluster_id": schema.StringAttribute{
				MarkdownDescription: "The cluster to look in. Needed only for a private IPv4 address that several clusters' pools hold.",
				Optional:            true,
				Computed:            true,
				Validators:          []validator.String{validID("cluster_id")},
			},
			"id":       computed("`<cluster_id>/<address>`."),
			"pool_id":  computed("The pool holding the address, `<cluster_id>/<name>`."),
			"category": computed("The pool's category: `node`, `instance`, `ipv4` or `ipv6`."),
			"cidr":     computed("The pool block the address lies in."),
			"state": computed("`active`, `reserved` (a plan-time hold), `cooling` (released, inside its cooldown), `free` " +
				"(never handed out, or its cooldown has passed) or `excluded` (never handed out: subnet-router anycast, network, " +
				"broadcast, gateway or an excluded range)."),
			"last_holder": schema.BoolAttribute{
				MarkdownDescription: "True when the owner attributes name a former holder (the address is cooling or free again).",
				Computed:            true,
			},
			"allocation_id": computed("The allocation's id; null when the address was never handed out."),
			"generation":    schema.Int64Attribute{MarkdownDescription: generationDoc, Computed: true},
			"owner_kind":    computed("`node`, `instance`, `env_ipv4` or `set`."),
			"owner_id":      computed("The owner's id."),
			"org_id":        computed("The owner's org, if labelled."),
			"env_id":        computed("The owner's environment, if labelled."),
			"node_id":       computed("The owner's node, if labelled."),
			"instance_id":   computed("The owner's instance, if labelled."),
			"actor":         computed("Who allocated it."),
			"allocated_at":  computed("When it was allocated (RFC 3339)."),
			"released_at":   computed("When it was released (RFC 3339)."),
			"reusable_at":   computed("When a cooling address becomes reusable, or a hold expires (RFC 3339)."),
		},
	}
}

func (d *addressDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.store = storeFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *addressDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if !requireStore(d.store, &resp.Diagnostics) {
		return
	}
	var m addressDataSourceModel
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("address"), &m.Address)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("cluster_id"), &m.ClusterID)...)
	if resp.Diagnostics.HasError() {
		return
	}
	addr, err := ipam.ParseAddr(m.Address.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("address"), "Invalid address", err.Error())
		return
	}
	infos, err := operator.New(d.store).LookupAddress(ctx, addr, m.ClusterID.ValueString())
	switch {
	case errors.Is(err, ipam.ErrNotFound):
		resp.Diagnostics.AddAttributeError(path.Root("address"), "Address Not Found", err.Error())
		return
	case err != nil:
		addCoreError(&resp.Diagnostics, "Unable to Look Up Address", err)
		return
	case len(infos) > 1:
		resp.Diagnostics.AddAttributeError(path.Root("cluster_id"), "Address in Several Clusters",
			fmt.Sprintf("%s is in pools of clusters %s (a private IPv4 block used by each). Set cluster_id to pick one.", addr, operator.ClusterIDs(infos)))
		return
	}
	in := infos[0]
	a := newAllocationModel(in.Allocation, in.Category, in.Status)
	m.ClusterID = types.StringValue(in.ClusterID)
	m.ID = types.StringValue(in.ClusterID + "/" + addr.String())
	m.Address = sameAddr(m.Address, addr)
	m.PoolID, m.Category, m.State = a.PoolID, a.Category, a.State
	m.CIDR = types.StringNull()
	if in.Block.IsValid() {
		m.CIDR = types.StringValue(in.Block.String())
	}
	m.LastHolder = types.BoolValue(in.Owner.Kind != "" && in.Status != ipam.StateActive && in.Status != ipam.StateReserved)
	m.AllocID, m.Generation = a.ID, a.Generation
	m.OwnerKind, m.OwnerID, m.OrgID, m.EnvID, m.NodeID, m.InstanceID = a.OwnerKind, a.OwnerID, a.OrgID, a.EnvID, a.NodeID, a.InstanceID
	m.Actor, m.AllocatedAt, m.ReleasedAt, m.ReusableAt = a.Actor, a.AllocatedAt, a.ReleasedAt, a.ReusableAt
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

// generationDoc describes an allocation's generation, as both data sources
// show it.
const generationDoc = "The number of the address's current holding: each time the address is handed out, held by a " +
	"plan, confirmed from that hold or adopted, it gets a new one, which no other holding of any address ever had, " +
	"and a release keeps it. Two reads that show the same generation saw the same holding; a larger number is a " +
	"later holding of the same address."
