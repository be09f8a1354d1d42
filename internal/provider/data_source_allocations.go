package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

var (
	_ datasource.DataSource              = &allocationsDataSource{}
	_ datasource.DataSourceWithConfigure = &allocationsDataSource{}
)

// NewAllocationsDataSource is the ipam_allocations data source.
func NewAllocationsDataSource() datasource.DataSource { return &allocationsDataSource{} }

type allocationsDataSource struct{ store *ipam.Client }

type allocationsDataSourceModel struct {
	ID          types.String      `tfsdk:"id"`
	ClusterID   types.String      `tfsdk:"cluster_id"`
	Category    types.String      `tfsdk:"category"`
	PoolID      types.String      `tfsdk:"pool_id"`
	OrgID       types.String      `tfsdk:"org_id"`
	EnvID       types.String      `tfsdk:"env_id"`
	NodeID      types.String      `tfsdk:"node_id"`
	InstanceID  types.String      `tfsdk:"instance_id"`
	State       types.String      `tfsdk:"state"`
	Allocations []allocationModel `tfsdk:"allocations"`
}

// allocationModel is one allocation as the data sources report it.
type allocationModel struct {
	ID          types.String `tfsdk:"id"`
	ClusterID   types.String `tfsdk:"cluster_id"`
	PoolID      types.String `tfsdk:"pool_id"`
	Category    types.String `tfsdk:"category"`
	Address     types.String `tfsdk:"address"`
	State       types.String `tfsdk:"state"`
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

func newAllocationModel(a ipam.Allocation, category, state string) allocationModel {
	id := types.StringNull()
	if a.ID != [16]byte{} {
		id = types.StringValue(a.ID.String())
	}
	return allocationModel{ID: id, ClusterID: types.StringValue(a.ClusterID), PoolID: types.StringValue(a.PoolID),
		Category: types.StringValue(category), Address: types.StringValue(a.Address.String()), State: types.StringValue(state),
		Generation: types.Int64Value(a.Generation), OwnerKind: optString(a.Owner.Kind), OwnerID: optString(a.Owner.ID),
		OrgID: optString(a.Owner.OrgID), EnvID: optString(a.Owner.EnvID), NodeID: optString(a.Owner.NodeID),
		InstanceID: optString(a.Owner.InstanceID), Actor: optString(a.Actor), AllocatedAt: timeString(a.AllocatedAt),
		ReleasedAt: timeString(a.ReleasedAt), ReusableAt: timeString(a.ReusableAt)}
}

// allocationAttributes describe an allocationModel.
func allocationAttributes() map[string]schema.Attribute {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc, Computed: true}
	}
	return map[string]schema.Attribute{
		"id":           computed("The allocation's id (a UUID)."),
		"cluster_id":   computed("The cluster."),
		"pool_id":      computed("The pool, `<cluster_id>/<name>`."),
		"category":     computed("The pool's category: `node`, `instance`, `ipv4` or `ipv6`."),
		"address":      computed("The address."),
		"state":        computed("`active`, `reserved` (a plan-time hold) or `cooling` (released, inside its cooldown)."),
		"generation":   schema.Int64Attribute{MarkdownDescription: generationDoc, Computed: true},
		"owner_kind":   computed("`node`, `instance`, `env_ipv4` or `set`."),
		"owner_id":     computed("The owner's id; for a cooling address, its last holder's."),
		"org_id":       computed("The owner's org, if labelled."),
		"env_id":       computed("The owner's environment, if labelled."),
		"node_id":      computed("The owner's node, if labelled."),
		"instance_id":  computed("The owner's instance, if labelled."),
		"actor":        computed("Who allocated it."),
		"allocated_at": computed("When it was allocated (RFC 3339)."),
		"released_at":  computed("When it was released (RFC 3339); null while held."),
		"reusable_at":  computed("When a cooling address becomes reusable, or a hold expires (RFC 3339)."),
	}
}

func (d *allocationsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_allocations"
}

func (d *allocationsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	filter := func(desc string, v ...validator.String) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc, Optional: true, Validators: v}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Lists the allocations that hold an address: active, reserved (a plan-time hold that has not " +
			"expired) and cooling (released, inside its cooldown), filtered by any of cluster, category, pool, org, env, node, " +
			"instance and state. Filters combine; an address whose cooldown has passed is free and not listed.",
		Attributes: map[string]schema.Attribute{
			"id":         schema.StringAttribute{MarkdownDescription: "The filters, as one string.", Computed: true},
			"cluster_id": filter("Only this cluster.", validID("cluster_id")),
			"category":   filter("Only pools of this category: `node`, `instance`, `ipv4` or `ipv6`.", stringvalidator.OneOf(operator.Categories...)),
			"pool_id": filter("Only this pool (`<cluster_id>/<name>`, or `<cluster_id>/parked/<block>` for the cooling addresses of a "+
				"released node block, as the listing shows them).", validListedPoolID()),
			"org_id":      filter("Only this org.", validID("org_id")),
			"env_id":      filter("Only this environment.", validID("env_id")),
			"node_id":     filter("Only this node (node addresses, and instances labelled with it).", validID("node_id")),
			"instance_id": filter("Only this instance.", validID("instance_id")),
			"state":       filter("Only this state: `active`, `reserved` or `cooling`.", stringvalidator.OneOf(operator.ListStates...)),
			"allocations": schema.ListNestedAttribute{
				MarkdownDescription: "The matching allocations, by cluster, pool and address order.",
				Computed:            true,
				NestedObject:        schema.NestedAttributeObject{Attributes: allocationAttributes()},
			},
		},
	}
}

func (d *allocationsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.store = storeFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *allocationsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	if !requireStore(d.store, &resp.Diagnostics) {
		return
	}
	m := allocationsDataSourceModel{}
	var idParts []string
	for _, x := range []struct {
		name string
		dst  *types.String
	}{
		{"cluster_id", &m.ClusterID}, {"category", &m.Category}, {"pool_id", &m.PoolID}, {"org_id", &m.OrgID},
		{"env_id", &m.EnvID}, {"node_id", &m.NodeID}, {"instance_id", &m.InstanceID}, {"state", &m.State},
	} {
		resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root(x.name), x.dst)...)
		if v := x.dst.ValueString(); v != "" {
			idParts = append(idParts, x.name+"="+v)
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	f := operator.ListFilter{ClusterID: m.ClusterID.ValueString(), Category: m.Category.ValueString(), PoolID: m.PoolID.ValueString(),
		OrgID: m.OrgID.ValueString(), EnvID: m.EnvID.ValueString(), NodeID: m.NodeID.ValueString(),
		InstanceID: m.InstanceID.ValueString(), State: m.State.ValueString()}
	views, err := operator.New(d.store).ListAllocations(ctx, f)
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to List Allocations", err)
		return
	}
	m.ID = types.StringValue("all")
	if len(idParts) > 0 {
		m.ID = types.StringValue(strings.Join(idParts, ","))
	}
	m.Allocations = make([]allocationModel, len(views))
	for i, v := range views {
		m.Allocations[i] = newAllocationModel(v.Allocation, v.Category, v.State)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}
