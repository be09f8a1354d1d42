package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

var (
	_ resource.Resource                = &nodeAddressResource{}
	_ resource.ResourceWithConfigure   = &nodeAddressResource{}
	_ resource.ResourceWithImportState = &nodeAddressResource{}
	_ resource.ResourceWithModifyPlan  = &nodeAddressResource{}
)

// NewNodeAddressResource is the ipam_node_address resource.
func NewNodeAddressResource() resource.Resource { return &nodeAddressResource{} }

type nodeAddressResource struct {
	store *ipam.Client
	pd    *providerData
}

type nodeAddressResourceModel struct {
	addressState
	NodeID types.String `tfsdk:"node_id"`
}

func (m *nodeAddressResourceModel) owner() ipam.Owner {
	id := m.NodeID.ValueString()
	return ipam.Owner{Kind: ipam.OwnerNode, ID: id, NodeID: id}
}

func (r *nodeAddressResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_address"
}

// IdentitySchema is the resource identity (Terraform 1.12+).
func (r *nodeAddressResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nodeAddressIdentity.schema()
}

func (r *nodeAddressResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := addressAttributes("node_id", "node")
	attrs["node_id"] = schema.StringAttribute{
		MarkdownDescription: "The node's identity. A node holds one overlay address per cluster. Changing it replaces the resource.",
		Required:            true,
		Validators:          []validator.String{validID("node_id")},
		PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A node's stable `/128` on the WireGuard overlay, allocated sequentially from the cluster's node " +
			"prefix at enrollment. On destroy the address cools down for the cluster's `node_cooldown` (30 days by default) " +
			"before anyone else may get it; the same node re-enrolled meanwhile gets it back. An address released out of band " +
			"disappears from state on refresh and the next plan allocates it again.",
		Attributes: attrs,
	}
}

func (r *nodeAddressResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if r.pd = providerDataFrom(req.ProviderData, &resp.Diagnostics); r.pd != nil {
		r.store = r.pd.store
	}
}

func (r *nodeAddressResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer nodeAddressIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan nodeAddressResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.Plan.Get, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, ok := allocateAddress(ctx, r.store, ipam.ClusterPools(plan.ClusterID.ValueString()), "cluster_id", plan.owner(), configAddress(ctx, req.Config), plan.Address, &resp.Diagnostics)
	if !ok {
		return
	}
	plan.fill(res.Allocation, plan.NodeID.ValueString())
	resp.Diagnostics.Append(setModel(ctx, &resp.State.Raw, resp.State.Schema.Type(), &plan)...)
	resp.Diagnostics.Append(setGeneration(ctx, resp.Private, res.Generation)...)
}

func (r *nodeAddressResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer nodeAddressIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics, &req.State)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state nodeAddressResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.State.Get, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	a, ok := readAddress(ctx, r.store, state.ClusterID.ValueString(), ipam.OwnerNode, state.NodeID.ValueString(), &resp.Diagnostics)
	if !ok {
		if !resp.Diagnostics.HasError() {
			resp.State.RemoveResource(ctx)
		}
		return
	}
	state.fill(a, state.NodeID.ValueString())
	resp.Diagnostics.Append(setModel(ctx, &resp.State.Raw, resp.State.Schema.Type(), &state)...)
	resp.Diagnostics.Append(setGeneration(ctx, resp.Private, a.Generation)...)
}

// Update has nothing to change in the database: every input either replaces
// the resource or, for an unset address, keeps the held one.
func (r *nodeAddressResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer nodeAddressIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	var plan nodeAddressResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.Plan.Get, &plan)...)
	resp.Diagnostics.Append(setModel(ctx, &resp.State.Raw, resp.State.Schema.Type(), &plan)...)
}

func (r *nodeAddressResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state nodeAddressResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.State.Get, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	releaseAddress(ctx, r.store, req, state.ClusterID.ValueString(), state.owner(), &resp.Diagnostics)
}

func (r *nodeAddressResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id, ok := nodeAddressIdentity.importID(ctx, req, &resp.Diagnostics)
	if !ok {
		return
	}
	importOwner(ctx, r.store, id, resp, ipam.OwnerNode, "node_id")
}

// ModifyPlan checks a claimed address against the cluster at plan time.
func (r *nodeAddressResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	checkClaimAtPlan(ctx, r.store, req, resp, plannedPool(ctx, req, "cluster_id", func(c string) string {
		return ipam.NodePool(c).ID()
	}))
	if req.Plan.Raw.IsNull() || !req.State.Raw.IsNull() || resp.Diagnostics.HasError() {
		return // only a create (or the create half of a replacement) takes a hold
	}
	var plan nodeAddressResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.Plan.Get, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	config := configAddress(ctx, req.Config)
	a, ok := reserveForPlan(ctx, r.pd, &resp.Diagnostics, replacedGeneration(ctx, req), ipam.ClusterPools(plan.ClusterID.ValueString()), plan.owner(), !plan.ClusterID.IsUnknown() && !plan.NodeID.IsUnknown(), config)
	if !ok {
		return
	}
	plan.planned(config, a)
	resp.Diagnostics.Append(setModel(ctx, &resp.Plan.Raw, resp.Plan.Schema.Type(), &plan)...)
}
