package provider

import (
	"context"
	"errors"
	"net/netip"

	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

var (
	_ resource.Resource                   = &nodeBlocksResource{}
	_ resource.ResourceWithConfigure      = &nodeBlocksResource{}
	_ resource.ResourceWithImportState    = &nodeBlocksResource{}
	_ resource.ResourceWithModifyPlan     = &nodeBlocksResource{}
	_ resource.ResourceWithValidateConfig = &nodeBlocksResource{}
)

// NewNodeInstanceBlocksResource is the ipam_node_instance_blocks resource.
func NewNodeInstanceBlocksResource() resource.Resource { return &nodeBlocksResource{} }

type nodeBlocksResource struct {
	store *ipam.Client
	pd    *providerData
}

type nodeBlocksModel struct {
	ID                types.String  `tfsdk:"id"`
	ClusterID         types.String  `tfsdk:"cluster_id"`
	NodeID            types.String  `tfsdk:"node_id"`
	PoolID            types.String  `tfsdk:"pool_id"`
	BlockPrefixLength types.Int64   `tfsdk:"block_prefix_length"`
	MinFreeFraction   types.Float64 `tfsdk:"min_free_fraction"`
	MaxFreeFraction   types.Float64 `tfsdk:"max_free_fraction"`
	MaxBlocks         types.Int64   `tfsdk:"max_blocks"`
	Demand            types.Int64   `tfsdk:"demand"`
	Blocks            types.List    `tfsdk:"blocks"`
	Capacity          types.Int64   `tfsdk:"capacity"`
	Used              types.Int64   `tfsdk:"used"`
	Free              types.Int64   `tfsdk:"free"`
	TargetBlocks      types.Int64   `tfsdk:"target_blocks"`
}

func (r *nodeBlocksResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_instance_blocks"
}

// IdentitySchema is the resource identity (Terraform 1.12+).
func (r *nodeBlocksResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nodeBlocksIdentity.schema()
}

func (r *nodeBlocksResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	computedInt := func(desc string) schema.Int64Attribute {
		return schema.Int64Attribute{MarkdownDescription: desc, Computed: true}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Per-node blocks of the cluster's instance prefix, sized to demand in one step. With blocks of B " +
			"addresses (a `/124` is 16), the node holds target = ceil(mf + used / B) blocks, capped at `max_blocks`, never " +
			"fewer than one: with B = 16 and mf = 0.5, 25 addresses in use give 3 blocks (48 addresses). Growth adds every " +
			"missing block at once. Shrinking starts only when more than Mf x B addresses are free, and then releases a surplus " +
			"block (into cooling, for the instance cooldown) only when it is empty on two consecutive scalings and is not the " +
			"node's last block. Instances placed on the node (`ipam_instance_address` with this `node_id`) take their " +
			"addresses inside its blocks; when the blocks are full, the allocation grows the node in the same transaction, up " +
			"to `max_blocks`. `blocks` is ready for the node's WireGuard `AllowedIPs`; instances that grow the node in the " +
			"same apply do so after this resource was applied, so read `blocks` from the `ipam_node_instance_blocks` data " +
			"source with `depends_on` on those instances to have every block in that apply.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "`<cluster_id>/<node_id>`; also the import ID.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown(), idOf{"cluster_id", "node_id"}},
			},
			"cluster_id": schema.StringAttribute{
				MarkdownDescription: "The cluster. Changing it replaces the resource.",
				Required:            true,
				Validators:          []validator.String{validID("cluster_id")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"node_id": schema.StringAttribute{
				MarkdownDescription: "The node. Changing it replaces the resource.",
				Required:            true,
				Validators:          []validator.String{validID("node_id")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"pool_id": schema.StringAttribute{
				MarkdownDescription: nodeBlocksDocs.poolID,
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown(), nodePoolIDOf{}},
			},
			"block_prefix_length": schema.Int64Attribute{
				MarkdownDescription: "Length of each block (default `124`: 16 addresses, the batch size B). Every node of a cluster uses the same length. A node's blocks keep a row per address, so block size x `max_blocks` may be at most 1,048,576 addresses (a `/108` with `max_blocks = 1`). Changing it replaces the resource.",
				Optional:            true,
				Computed:            true,
				Default:             int64default.StaticInt64(ipam.DefaultBlockPrefixLength),
				Validators:          []validator.Int64{blockLengthRange},
				PlanModifiers:       []planmodifier.Int64{int64planmodifier.RequiresReplace()},
			},
			"min_free_fraction": schema.Float64Attribute{
				MarkdownDescription: "mf: free addresses to keep, in batches (default `0.5`).",
				Optional:            true,
				Computed:            true,
				Default:             float64default.StaticFloat64(ipam.DefaultMinFreeFraction),
				Validators:          []validator.Float64{minFreeRange},
			},
			"max_free_fraction": schema.Float64Attribute{
				MarkdownDescription: "Mf: free addresses, in batches, above which surplus blocks are released (default `1.5`; at least `min_free_fraction + 1`, which the scaling needs to converge).",
				Optional:            true,
				Computed:            true,
				Default:             float64default.StaticFloat64(ipam.DefaultMaxFreeFraction),
			},
			"max_blocks": schema.Int64Attribute{
				MarkdownDescription: "Most blocks the node may hold (default `16`).",
				Optional:            true,
				Computed:            true,
				Default:             int64default.StaticInt64(ipam.DefaultMaxBlocks),
				Validators:          []validator.Int64{maxBlocksRange},
			},
			"demand": schema.Int64Attribute{
				MarkdownDescription: "Instance addresses expected on the node. When unset, the node's current use counts, and a plan scales the node whenever its use calls for it.",
				Optional:            true,
				Validators:          []validator.Int64{demandRange},
			},
			"blocks": schema.ListAttribute{
				MarkdownDescription: nodeBlocksDocs.blocks,
				ElementType:         types.StringType,
				Computed:            true,
			},
			"capacity":      computedInt(nodeBlocksDocs.capacity),
			"used":          computedInt(nodeBlocksDocs.used),
			"free":          computedInt(nodeBlocksDocs.free),
			"target_blocks": computedInt(nodeBlocksDocs.target),
		},
	}
}

// nodeBlocksDocs describes what the resource and the data source both read.
var nodeBlocksDocs = struct{ poolID, blocks, capacity, used, free, target string }{
	poolID: "The node's pool, `<cluster_id>/blocks/<node_id>`: the `pool_id` of the addresses in its blocks. An " +
		"`ipam_address_set` key that lists it in its `pools` draws from the node's blocks, and grows them when they are " +
		"full, as the node's instances do.",
	blocks:   "The node's blocks (CIDRs), oldest first: its WireGuard AllowedIPs for instances.",
	capacity: "Addresses in the node's blocks.",
	used:     "Instance addresses in use on the node (active and held).",
	free:     "`capacity` minus `used`.",
	target:   "The number of blocks the scaling aims for: ceil(mf + used / B), capped at `max_blocks`, at least 1.",
}

func (r *nodeBlocksResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if r.pd = providerDataFrom(req.ProviderData, &resp.Diagnostics); r.pd != nil {
		r.store = r.pd.store
	}
}

func (m *nodeBlocksModel) scaling() ipam.BlockScaling {
	sc := ipam.BlockScaling{PrefixLength: int(m.BlockPrefixLength.ValueInt64()), MinFree: m.MinFreeFraction.ValueFloat64(),
		MaxFree: m.MaxFreeFraction.ValueFloat64(), MaxBlocks: int(m.MaxBlocks.ValueInt64())}
	if !m.Demand.IsNull() && !m.Demand.IsUnknown() {
		d := m.Demand.ValueInt64()
		sc.Demand = &d
	}
	return sc
}

func (m *nodeBlocksModel) fill(nb ipam.NodeBlocks) {
	m.ID = types.StringValue(nb.ClusterID + "/" + nb.NodeID)
	m.ClusterID, m.NodeID = types.StringValue(nb.ClusterID), types.StringValue(nb.NodeID)
	m.PoolID = types.StringValue(ipam.NodeBlocksPool(nb.ClusterID, nb.NodeID).ID())
	m.BlockPrefixLength = types.Int64Value(int64(nb.Scaling.PrefixLength))
	m.MinFreeFraction = types.Float64Value(nb.Scaling.MinFree)
	m.MaxFreeFraction = types.Float64Value(nb.Scaling.MaxFree)
	m.MaxBlocks = types.Int64Value(int64(nb.Scaling.MaxBlocks))
	m.Demand = types.Int64Null()
	if nb.Scaling.Demand != nil {
		m.Demand = types.Int64Value(*nb.Scaling.Demand)
	}
	m.Blocks = cidrList(nb.Blocks)
	m.Capacity = types.Int64Value(nb.Capacity)
	m.Used = types.Int64Value(nb.Used)
	m.Free = types.Int64Value(nb.Free())
	m.TargetBlocks = types.Int64Value(int64(nb.TargetBlocks))
}

// nodePoolIDOf plans a new node's pool_id once its cluster_id and node_id
// are known.
type nodePoolIDOf struct{}

func (nodePoolIDOf) Description(context.Context) string {
	return "the pool_id of a new node's blocks is <cluster_id>/blocks/<node_id>, known once they are"
}

func (m nodePoolIDOf) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }

func (nodePoolIDOf) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if ids, ok := plannedStrings(ctx, req, []string{"cluster_id", "node_id"}); ok {
		resp.PlanValue = types.StringValue(ipam.NodeBlocksPool(ids[0], ids[1]).ID())
	}
}

func cidrList(ps []netip.Prefix) types.List {
	vals := make([]attr.Value, len(ps))
	for i, p := range ps {
		vals[i] = types.StringValue(p.String())
	}
	return types.ListValueMust(types.StringType, vals)
}

func (r *nodeBlocksResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m nodeBlocksModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Unset values take their defaults; unknown ones are checked at apply.
	if m.BlockPrefixLength.IsNull() {
		m.BlockPrefixLength = types.Int64Value(ipam.DefaultBlockPrefixLength)
	}
	if m.MinFreeFraction.IsNull() {
		m.MinFreeFraction = types.Float64Value(ipam.DefaultMinFreeFraction)
	}
	if m.MaxFreeFraction.IsNull() {
		m.MaxFreeFraction = types.Float64Value(ipam.DefaultMaxFreeFraction)
	}
	if m.MaxBlocks.IsNull() {
		m.MaxBlocks = types.Int64Value(ipam.DefaultMaxBlocks)
	}
	if m.BlockPrefixLength.IsUnknown() || m.MinFreeFraction.IsUnknown() || m.MaxFreeFraction.IsUnknown() || m.MaxBlocks.IsUnknown() || m.Demand.IsUnknown() {
		return
	}
	// A value out of its attribute's own range is that validator's error,
	// named once; the settings are judged together only when each is in it.
	if !passesInt64(ctx, blockLengthRange, m.BlockPrefixLength) || !passesFloat64(ctx, minFreeRange, m.MinFreeFraction) ||
		!passesInt64(ctx, maxBlocksRange, m.MaxBlocks) || !passesInt64(ctx, demandRange, m.Demand) {
		return
	}
	if err := m.scaling().Validate(); err != nil {
		// Titled with the attribute at fault, as the attributes' own
		// validators title theirs.
		summary := "Invalid Block Scaling"
		if ie := (*ipam.InvalidError)(nil); errors.As(err, &ie) && ie.Field != "" {
			summary = "Invalid " + ie.Field
		}
		addCoreError(&resp.Diagnostics, summary, err)
	}
}

// The ranges of the block settings' attributes (their schema validators).
var (
	blockLengthRange = int64validator.Between(65, 128)
	minFreeRange     = float64validator.AtLeast(0)
	maxBlocksRange   = int64validator.AtLeast(1)
	demandRange      = int64validator.AtLeast(0)
)

func passesInt64(ctx context.Context, v validator.Int64, val types.Int64) bool {
	var r validator.Int64Response
	v.ValidateInt64(ctx, validator.Int64Request{ConfigValue: val}, &r)
	return !r.Diagnostics.HasError()
}

func passesFloat64(ctx context.Context, v validator.Float64, val types.Float64) bool {
	var r validator.Float64Response
	v.ValidateFloat64(ctx, validator.Float64Request{ConfigValue: val}, &r)
	return !r.Diagnostics.HasError()
}

// ModifyPlan previews the scaling: the plan shows the target, and an update
// whenever a scaling would change the blocks now (growth needed, or empty
// surplus to look at), so use alone (demand unset) drives the node's size.
func (r *nodeBlocksResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.store == nil {
		return
	}
	if req.State.Raw.IsNull() {
		var cluster, node types.String
		resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("cluster_id"), &cluster)...)
		resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("node_id"), &node)...)
		if !cluster.IsUnknown() && !node.IsUnknown() {
			r.pd.planNewBlocks(cluster.ValueString(), node.ValueString())
		}
		r.markReplaced(ctx, req, resp)
		r.checkCreate(ctx, req, resp)
		return
	}
	var plan, state nodeBlocksModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || plan.Demand.IsUnknown() || !plan.ClusterID.Equal(state.ClusterID) || !plan.NodeID.Equal(state.NodeID) {
		return
	}
	nb, change, err := r.store.PreviewNodeBlocks(ctx, plan.ClusterID.ValueString(), plan.NodeID.ValueString(), plan.scaling())
	if err != nil {
		return // a node without blocks yet, or the database away: apply decides
	}
	settingsChanged := !plan.MinFreeFraction.Equal(state.MinFreeFraction) || !plan.MaxFreeFraction.Equal(state.MaxFreeFraction) ||
		!plan.MaxBlocks.Equal(state.MaxBlocks) || !plan.Demand.Equal(state.Demand)
	if !change && !settingsChanged {
		return
	}
	plan.TargetBlocks = types.Int64Value(int64(nb.TargetBlocks))
	plan.Blocks = types.ListUnknown(types.StringType)
	plan.Capacity, plan.Used, plan.Free = types.Int64Unknown(), types.Int64Unknown(), types.Int64Unknown()
	resp.Diagnostics.Append(resp.Plan.Set(ctx, plan)...)
}

// checkCreate tells at plan what the create would refuse: a block length
// other than the cluster's (an error), and blocks of the node that another
// manager holds (a warning, as the address resources give one: the plan
// terraform destroy runs first must not fail on it; the apply fails with
// owner_conflict). A cluster this same apply creates is no problem.
func (r *nodeBlocksResource) checkCreate(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if resp.Diagnostics.HasError() || r.pd == nil || currentRun().destroy {
		return
	}
	var plan nodeBlocksModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || plan.ClusterID.IsUnknown() || plan.NodeID.IsUnknown() || plan.BlockPrefixLength.IsUnknown() ||
		plan.MinFreeFraction.IsUnknown() || plan.MaxFreeFraction.IsUnknown() || plan.MaxBlocks.IsUnknown() || plan.Demand.IsUnknown() {
		return
	}
	err := r.store.CheckNodeBlocks(ctx, plan.ClusterID.ValueString(), plan.NodeID.ValueString(), plan.scaling())
	var oc *ipam.OwnerConflictError
	switch {
	case err == nil:
	case errors.As(err, &oc):
		resp.Diagnostics.AddAttributeWarning(path.Root("node_id"), "Node Instance Blocks Are Managed Elsewhere",
			"Node "+plan.NodeID.ValueString()+" has instance blocks this configuration cannot take: "+err.Error()+
				". Applying this create fails with the same error."+withHint(err))
	case ipam.Code(err) == ipam.CodeInvalid:
		addCoreError(&resp.Diagnostics, "Invalid Node Instance Blocks", err)
	default:
		uncheckedAtPlan(&resp.Diagnostics, path.Root("node_id"), "the node's instance blocks", err)
	}
}

// markReplaced: in the plan of the create half of a replacement, the
// node's blocks, if still the replaced object's (its generation), are
// marked, so that the create takes them over instead of refusing them as
// another configuration's. Nothing to mark (another node or cluster,
// released blocks) is no error; neither is a failed mark (a read-only
// role): the apply then fails with owner_conflict, as before.
func (r *nodeBlocksResource) markReplaced(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	gen := replacedGeneration(ctx, req)
	if gen <= 0 || r.pd == nil || currentRun().destroy {
		return
	}
	var plan nodeBlocksModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || plan.ClusterID.IsUnknown() || plan.NodeID.IsUnknown() {
		return
	}
	_ = r.store.MarkNodeBlocksReplacement(ctx, plan.ClusterID.ValueString(), plan.NodeID.ValueString(), gen, r.pd.markTTL())
}

func (r *nodeBlocksResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer nodeBlocksIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan nodeBlocksModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	nb, err := r.store.CreateNodeBlocks(ctx, plan.ClusterID.ValueString(), plan.NodeID.ValueString(), plan.scaling())
	r.pd.forgetInstancePools()
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Create Node Instance Blocks", err)
		return
	}
	plan.fill(nb)
	resp.Diagnostics.Append(setGeneration(ctx, resp.Private, nb.Generation)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *nodeBlocksResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer nodeBlocksIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics, &req.State)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state nodeBlocksModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	nb, err := r.store.GetNodeBlocks(ctx, state.ClusterID.ValueString(), state.NodeID.ValueString())
	if errors.Is(err, ipam.ErrNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Read Node Instance Blocks", err)
		return
	}
	// This state holds the blocks now: a create elsewhere is refused. A
	// failed mark (a read-only role) changes nothing, as for an address.
	_ = r.store.ConfirmNodeBlocks(ctx, state.ClusterID.ValueString(), state.NodeID.ValueString())
	state.fill(nb)
	resp.Diagnostics.Append(setGeneration(ctx, resp.Private, nb.Generation)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

func (r *nodeBlocksResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer nodeBlocksIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan nodeBlocksModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	nb, err := r.store.ScaleNodeBlocks(ctx, plan.ClusterID.ValueString(), plan.NodeID.ValueString(), plan.scaling())
	r.pd.forgetInstancePools()
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Scale Node Instance Blocks", err)
		return
	}
	plan.fill(nb)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *nodeBlocksResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state nodeBlocksModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Carrying the generation this state read: blocks that the create half
	// of a replacement took over are not released (0, a state written
	// before generations were kept: whatever the node has).
	_, err := r.store.ReleaseNodeBlocksAt(ctx, state.ClusterID.ValueString(), state.NodeID.ValueString(), getGeneration(ctx, req.Private))
	r.pd.forgetInstancePools()
	if err != nil && !errors.Is(err, ipam.ErrNotFound) {
		addCoreError(&resp.Diagnostics, "Unable to Release Node Instance Blocks", err)
	}
}

func (r *nodeBlocksResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id, ok := nodeBlocksIdentity.importID(ctx, req, &resp.Diagnostics)
	if !ok {
		return
	}
	importPair(ctx, id, resp, "node_id", "")
}
