package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

var (
	_ resource.Resource                = &instanceAddressResource{}
	_ resource.ResourceWithConfigure   = &instanceAddressResource{}
	_ resource.ResourceWithImportState = &instanceAddressResource{}
	_ resource.ResourceWithModifyPlan  = &instanceAddressResource{}
)

// NewInstanceAddressResource is the ipam_instance_address resource.
func NewInstanceAddressResource() resource.Resource { return &instanceAddressResource{} }

type instanceAddressResource struct {
	store *ipam.Client
	pd    *providerData
}

type instanceAddressResourceModel struct {
	addressState
	InstanceID  types.String `tfsdk:"instance_id"`
	OrgID       types.String `tfsdk:"org_id"`
	EnvID       types.String `tfsdk:"env_id"`
	NodeID      types.String `tfsdk:"node_id"`
	GatewayIPv6 types.String `tfsdk:"gateway_ipv6"`
	MTU         types.Int64  `tfsdk:"mtu"`
	DNSServers  types.List   `tfsdk:"dns_servers"`
	// ClusterNetworkRevision: the cluster's network_revision, as given.
	ClusterNetworkRevision types.String `tfsdk:"cluster_network_revision"`
}

func (m *instanceAddressResourceModel) owner() ipam.Owner {
	id := m.InstanceID.ValueString()
	return ipam.Owner{Kind: ipam.OwnerInstance, ID: id, InstanceID: id,
		OrgID: m.OrgID.ValueString(), EnvID: m.EnvID.ValueString(), NodeID: m.NodeID.ValueString()}
}

// fillNetwork copies the WorkloadSpec network block from the cluster.
func (m *instanceAddressResourceModel) fillNetwork(n ipam.Network) {
	m.GatewayIPv6 = sameAddr(m.GatewayIPv6, n.GatewayIPv6)
	m.MTU = types.Int64Value(int64(n.MTU))
	m.DNSServers = addrList(m.DNSServers, n.DNSServers)
	if m.ClusterNetworkRevision.IsNull() || m.ClusterNetworkRevision.IsUnknown() {
		// Unset (or imported): the cluster's, so that a configuration that
		// gives the cluster's revision plans nothing after an import.
		m.ClusterNetworkRevision = types.StringValue(networkRevision(n))
	}
}

func (m *instanceAddressResourceModel) fillLabels(a ipam.Allocation) {
	m.InstanceID = types.StringValue(a.Owner.ID)
	m.OrgID = types.StringValue(a.Owner.OrgID)
	m.EnvID = types.StringValue(a.Owner.EnvID)
	m.NodeID = optString(a.Owner.NodeID)
}

func (r *instanceAddressResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_instance_address"
}

// IdentitySchema is the resource identity (Terraform 1.12+).
func (r *instanceAddressResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = instanceIdentity.schema()
}

func (r *instanceAddressResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := addressAttributes("instance_id", "instance")
	replaceID := func(name, desc string) schema.StringAttribute {
		return schema.StringAttribute{
			MarkdownDescription: desc + " Changing it replaces the resource.",
			Required:            true,
			Validators:          []validator.String{validID(name)},
			PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		}
	}
	attrs["instance_id"] = replaceID("instance_id", "The instance (one microVM) the address belongs to.")
	attrs["org_id"] = replaceID("org_id", "The organization owning the instance; any instance address maps back to (org, env, instance). "+
		"A new value gives the instance another address: an instance takes its own cooling address back only for the org and env that released it.")
	attrs["env_id"] = replaceID("env_id", "The environment the instance runs in. A new value gives the instance another address, as a new `org_id` does.")
	attrs["node_id"] = schema.StringAttribute{
		MarkdownDescription: "The node the instance runs on. When the node has instance blocks (`ipam_node_instance_blocks`), the address " +
			"comes from them. Changing it updates the record in place and the address stays, unless the old or the new node " +
			"has instance blocks: then the instance is replaced, with an address from the new node's blocks. On a node with " +
			"blocks, take it from them (`node_id = ipam_node_instance_blocks.NAME.node_id`): Terraform then creates the blocks " +
			"before the instance and destroys the instance before them, and a plan that creates both leaves the address to the " +
			"apply, which allocates it inside them.",
		Optional:   true,
		Validators: []validator.String{validID("node_id")},
	}
	attrs["cluster_network_revision"] = schema.StringAttribute{
		MarkdownDescription: "Set it to the cluster's `network_revision` (`ipam_cluster.NAME.network_revision`, or the " +
			"`ipam_cluster` data source's) so that a change of the cluster's `gateway_ipv6`, `mtu` or `dns_servers` updates " +
			"this instance's network block (and what is built from it) in the same apply; without it the block follows " +
			"the cluster at the next refresh. Only its change matters: the address stays. Unset, it records the cluster's " +
			"revision when the instance was created or imported.",
		Optional:      true,
		Computed:      true,
		PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
	}
	attrs["gateway_ipv6"] = schema.StringAttribute{
		MarkdownDescription: "WorkloadSpec `network.gateway_ipv6`, from the cluster.",
		Computed:            true,
		PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
	}
	attrs["mtu"] = schema.Int64Attribute{
		MarkdownDescription: "WorkloadSpec `network.mtu`, from the cluster.",
		Computed:            true,
		PlanModifiers:       []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
	}
	attrs["dns_servers"] = schema.ListAttribute{
		MarkdownDescription: "WorkloadSpec DNS servers, from the cluster.",
		ElementType:         types.StringType,
		Computed:            true,
		PlanModifiers:       []planmodifier.List{listplanmodifier.UseStateForUnknown()},
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "An instance's (one microVM's) `/128` from the cluster's instance prefix, with the WorkloadSpec " +
			"network block (`address` is `network.overlay_ipv6`, plus gateway, MTU and DNS servers). On destroy the address " +
			"cools down for the cluster's `instance_cooldown`; the same instance re-created meanwhile, for the same org and env, gets it back.",
		Attributes: attrs,
	}
}

func (r *instanceAddressResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if r.pd = providerDataFrom(req.ProviderData, &resp.Diagnostics); r.pd != nil {
		r.store = r.pd.store
	}
}

// load reads the allocation and its cluster into the model; false when the
// allocation is gone. fresh reads the cluster from the database (Create and
// Update: a change to the cluster earlier in the same apply must show).
func (r *instanceAddressResource) load(ctx context.Context, m *instanceAddressResourceModel, a ipam.Allocation, fresh bool, diagsAdd func(string, error)) bool {
	c, err := r.pd.cluster(ctx, a.ClusterID, fresh)
	if err != nil {
		diagsAdd("Unable to Read Cluster", err)
		return false
	}
	m.fill(a, a.Owner.ID)
	m.fillLabels(a)
	m.fillNetwork(c.Network())
	return true
}

func (r *instanceAddressResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer instanceIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan instanceAddressResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.Plan.Get, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, ok := allocateAddress(ctx, r.store, ipam.ClusterPools(plan.ClusterID.ValueString()), "cluster_id", plan.owner(),
		configAddress(ctx, req.Config), plan.Address, &resp.Diagnostics)
	if !ok {
		return
	}
	// The allocation read the cluster's network block as it is now.
	plan.fill(res.Allocation, res.Owner.ID)
	plan.fillLabels(res.Allocation)
	plan.fillNetwork(res.Network)
	resp.Diagnostics.Append(setModel(ctx, &resp.State.Raw, resp.State.Schema.Type(), &plan)...)
	resp.Diagnostics.Append(setGeneration(ctx, resp.Private, res.Generation)...)
}

func (r *instanceAddressResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer instanceIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics, &req.State)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state instanceAddressResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.State.Get, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	a, ok := readAddress(ctx, r.store, state.ClusterID.ValueString(), ipam.OwnerInstance, state.InstanceID.ValueString(), &resp.Diagnostics)
	if !ok {
		if !resp.Diagnostics.HasError() {
			resp.State.RemoveResource(ctx)
		}
		return
	}
	if !r.load(ctx, &state, a, false, func(s string, err error) { addCoreError(&resp.Diagnostics, s, err) }) {
		return
	}
	resp.Diagnostics.Append(setModel(ctx, &resp.State.Raw, resp.State.Schema.Type(), &state)...)
	resp.Diagnostics.Append(setGeneration(ctx, resp.Private, a.Generation)...)
}

// Update changes the node label in place; everything else replaces.
func (r *instanceAddressResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer instanceIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan instanceAddressResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.Plan.Get, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	a, err := r.store.UpdateLabels(ctx, plan.ClusterID.ValueString(), plan.owner())
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Update Instance Address", err)
		return
	}
	planned := plan
	if !r.load(ctx, &plan, a, true, func(s string, err error) { addCoreError(&resp.Diagnostics, s, err) }) {
		return
	}
	if !planned.MTU.IsUnknown() {
		// The plan showed the network block (its revision unchanged,
		// networkUnknownOnUpdate): the apply keeps that promise, and a
		// change of the cluster's made since shows at the next refresh.
		plan.GatewayIPv6, plan.MTU, plan.DNSServers = planned.GatewayIPv6, planned.MTU, planned.DNSServers
	}
	resp.Diagnostics.Append(setModel(ctx, &resp.State.Raw, resp.State.Schema.Type(), &plan)...)
}

func (r *instanceAddressResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state instanceAddressResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.State.Get, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	releaseAddress(ctx, r.store, req, state.ClusterID.ValueString(), state.owner(), &resp.Diagnostics)
}

func (r *instanceAddressResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id, ok := instanceIdentity.importID(ctx, req, &resp.Diagnostics)
	if !ok {
		return
	}
	importOwner(ctx, r.store, id, resp, ipam.OwnerInstance, "instance_id")
}

// ModifyPlan checks a claimed address against the cluster at plan time.
func (r *instanceAddressResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	checkClaimAtPlan(ctx, r.store, req, resp, r.plannedPool(ctx, req))
	if planNode, stateNode, ok := updatedNode(ctx, req, &resp.Diagnostics); ok && r.store != nil {
		r.replaceOnNodeMove(ctx, req, resp, planNode, stateNode)
		r.moveIntoNodeBlocks(ctx, req, resp, planNode, stateNode)
	}
	networkUnknownOnUpdate(ctx, req, resp)
	if req.Plan.Raw.IsNull() || !req.State.Raw.IsNull() || resp.Diagnostics.HasError() {
		return // only a create (or the create half of a replacement) takes a hold
	}
	var plan instanceAddressResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.Plan.Get, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	config := configAddress(ctx, req.Config)
	if r.pd == nil {
		return
	}
	if !plan.ClusterID.IsUnknown() && !plan.NodeID.IsUnknown() && !plan.NodeID.IsNull() &&
		r.pd.plannedNewBlocks(ctx, plan.ClusterID.ValueString(), plan.NodeID.ValueString()) {
		r.pd.warnOnce(&resp.Diagnostics, reasonNewBlocks, "Some Addresses Known After Apply",
			"This plan creates instance blocks for node "+plan.NodeID.ValueString()+" (and possibly others), so the addresses of "+
				"new instances on such a node are allocated inside its blocks when the apply has created them, and show as "+
				"\"(known after apply)\". Later plans show them.")
		return
	}
	a, ok := reserveForPlan(ctx, r.pd, &resp.Diagnostics, replacedGeneration(ctx, req), ipam.ClusterPools(plan.ClusterID.ValueString()), plan.owner(),
		!plan.ClusterID.IsUnknown() && !plan.InstanceID.IsUnknown() && !plan.OrgID.IsUnknown() && !plan.EnvID.IsUnknown() && !plan.NodeID.IsUnknown(), config)
	if !ok {
		return
	}
	plan.planned(config, a)
	resp.Diagnostics.Append(setModel(ctx, &resp.Plan.Raw, resp.Plan.Schema.Type(), &plan)...)
}

// networkUnknownOnUpdate: an in-place update writes the network block as the
// cluster has it when it applies, and a change to the cluster in the same
// apply (an mtu, say) is not visible to this plan: the block is unknown
// rather than a promise the apply would break.
func networkUnknownOnUpdate(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() || req.Plan.Raw.Equal(req.State.Raw) || resp.Diagnostics.HasError() {
		return
	}
	// A configuration that gives the cluster's network_revision says
	// whether the network changes: the same revision keeps the block (an
	// update of the node, say, shows it as it is).
	var cfgRev, stateRev types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("cluster_network_revision"), &cfgRev)...)
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("cluster_network_revision"), &stateRev)...)
	if !cfgRev.IsNull() && !cfgRev.IsUnknown() && cfgRev.Equal(stateRev) {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("gateway_ipv6"), types.StringUnknown())...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("mtu"), types.Int64Unknown())...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("dns_servers"), types.ListUnknown(types.StringType))...)
}

// plannedPool resolves the pool a planned instance draws from: its node's
// blocks when the node has some, else the cluster's instance pool.
func (r *instanceAddressResource) plannedPool(ctx context.Context, req resource.ModifyPlanRequest) func() (string, bool) {
	return func() (string, bool) {
		var cluster, node types.String
		req.Plan.GetAttribute(ctx, path.Root("cluster_id"), &cluster)
		req.Plan.GetAttribute(ctx, path.Root("node_id"), &node)
		if cluster.IsNull() || cluster.IsUnknown() || node.IsUnknown() {
			return "", false
		}
		id, err := r.pd.instancePool(ctx, cluster.ValueString(), node.ValueString())
		return id, err == nil
	}
}

// updatedNode reads node_id from the plan and the state of an update (false
// for a create or a destroy): one attribute each, not the whole model, since
// every refresh plans every instance again.
func updatedNode(ctx context.Context, req resource.ModifyPlanRequest, diags *diag.Diagnostics) (plan, state types.String, ok bool) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return plan, state, false
	}
	diags.Append(req.Plan.GetAttribute(ctx, path.Root("node_id"), &plan)...)
	diags.Append(req.State.GetAttribute(ctx, path.Root("node_id"), &state)...)
	return plan, state, !diags.HasError()
}

// stateStrings reads string attributes of the prior state.
func stateStrings(ctx context.Context, req resource.ModifyPlanRequest, diags *diag.Diagnostics, attrs map[string]*types.String) bool {
	for name, v := range attrs {
		diags.Append(req.State.GetAttribute(ctx, path.Root(name), v)...)
	}
	return !diags.HasError()
}

// moveIntoNodeBlocks replaces an instance whose address lies outside its
// node's blocks while the node has some: placed before the node's blocks
// existed (the same apply created both, and the plan had fixed the address),
// it moves into them with the next apply instead of staying outside for good.
func (r *instanceAddressResource) moveIntoNodeBlocks(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, planNode, stateNode types.String) {
	if resp.Diagnostics.HasError() || !planNode.Equal(stateNode) || stateNode.IsNull() {
		return
	}
	var cluster, address, instanceID types.String
	if !stateStrings(ctx, req, &resp.Diagnostics, map[string]*types.String{"cluster_id": &cluster, "address": &address, "instance_id": &instanceID}) ||
		address.IsNull() {
		return
	}
	addr, err := ipam.ParseAddr(address.ValueString())
	if err != nil {
		return
	}
	node := stateNode.ValueString()
	id, err := r.pd.instancePool(ctx, cluster.ValueString(), node)
	if err != nil || id != ipam.NodeBlocksPool(cluster.ValueString(), node).ID() || r.store.CheckClaim(ctx, id, addr) == nil {
		return
	}
	// Terraform replaces only for a path whose planned value differs.
	for _, attr := range []string{"address", "cidr", "allocated_at"} {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(attr), types.StringUnknown())...)
	}
	resp.RequiresReplace = append(resp.RequiresReplace, path.Root("address"))
	resp.Diagnostics.AddAttributeWarning(path.Root("address"), "Instance Moves Into Its Node's Blocks",
		"Instance "+instanceID.ValueString()+" holds "+addr.String()+", outside the instance blocks node "+node+
			" has now (it was placed before they existed), so it is replaced by an address inside them.")
}

// replaceOnNodeMove: moving an instance between nodes keeps its address (a
// label change) unless either node has instance blocks, where the address
// must come from the new node's blocks: then it is a replacement.
func (r *instanceAddressResource) replaceOnNodeMove(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, planNode, stateNode types.String) {
	if planNode.Equal(stateNode) {
		return
	}
	if planNode.IsUnknown() {
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("node_id"))
		return
	}
	var cluster types.String
	if !stateStrings(ctx, req, &resp.Diagnostics, map[string]*types.String{"cluster_id": &cluster}) {
		return
	}
	for _, n := range []types.String{stateNode, planNode} {
		id, err := r.pd.instancePool(ctx, cluster.ValueString(), n.ValueString())
		if err == nil && id != ipam.InstancePool(cluster.ValueString()).ID() {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("node_id"))
			return
		}
	}
}
