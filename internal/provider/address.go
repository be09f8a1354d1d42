package provider

import (
	"context"
	"errors"
	"net/netip"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/internal/ipamcore"
)

// The parts shared by the resources that hold one address for one owner
// (ipam_node_address, ipam_instance_address): the computed attributes, the
// exact-address claim, and the create/read/delete calls into the core.

// addressState is the part of an address resource's model the shared code fills.
type addressState struct {
	ID          types.String `tfsdk:"id"`
	ClusterID   types.String `tfsdk:"cluster_id"`
	Address     types.String `tfsdk:"address"`
	CIDR        types.String `tfsdk:"cidr"`
	AllocatedAt types.String `tfsdk:"allocated_at"`
}

func (s *addressState) fill(a ipamcore.Allocation, ownerID string) {
	s.ID = types.StringValue(a.ClusterID + "/" + ownerID)
	s.ClusterID = types.StringValue(a.ClusterID)
	s.Address = sameAddr(s.Address, a.Address)
	s.CIDR = types.StringValue(netip.PrefixFrom(a.Address, a.Address.BitLen()).String())
	s.AllocatedAt = timeString(a.AllocatedAt)
}

// addressAttributes are the attributes every single-address resource has.
func addressAttributes(ownerAttr, what string) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"id": schema.StringAttribute{
			MarkdownDescription: "`<cluster_id>/<" + ownerAttr + ">`; also the import ID.",
			Computed:            true,
			PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"cluster_id": schema.StringAttribute{
			MarkdownDescription: "The cluster the address comes from. Changing it replaces the resource.",
			Required:            true,
			Validators:          []validator.String{validID("cluster_id")},
			PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"address": schema.StringAttribute{
			MarkdownDescription: "The " + what + " address. Set it to claim exactly this address (it must lie in the " +
				"cluster's " + what + " prefix and be neither active for another owner nor cooling); leave it unset to " +
				"get the next free one. Changing a claimed address replaces the resource; an address is never renumbered in place.",
			Optional:      true,
			Computed:      true,
			Validators:    []validator.String{validIPv6Addr()},
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), requiresReplaceIfClaimChanges()},
		},
		"cidr": schema.StringAttribute{
			MarkdownDescription: "The address as a `/128`.",
			Computed:            true,
			PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"allocated_at": schema.StringAttribute{
			MarkdownDescription: "When the address was allocated (RFC 3339, database time).",
			Computed:            true,
			PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
	}
}

// requiresReplaceIfClaimChanges replaces the resource when the configured
// exact address differs from the held one; an unset address keeps the held one.
func requiresReplaceIfClaimChanges() planmodifier.String {
	return stringplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
		if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() || req.StateValue.IsNull() {
			return
		}
		want, err1 := ipamcore.ParseAddr(req.ConfigValue.ValueString())
		held, err2 := ipamcore.ParseAddr(req.StateValue.ValueString())
		resp.RequiresReplace = err1 == nil && err2 == nil && want != held
	}, "Changing a claimed address replaces the resource.", "Changing a claimed `address` replaces the resource.")
}

// allocateAddress runs the core allocation for a create. poolAttr names the
// attribute that chose the pool ("cluster_id" or "pool_id"), for diagnostics.
func allocateAddress(ctx context.Context, st *ipamcore.Store, poolID, poolAttr, title string, owner ipamcore.Owner, claim types.String, diags *diag.Diagnostics) (ipamcore.AllocateResult, bool) {
	req := ipamcore.AllocateRequest{PoolID: poolID, Owner: owner}
	if !claim.IsNull() && !claim.IsUnknown() {
		a, err := ipamcore.ParseAddr(claim.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("address"), "Invalid Address", err.Error())
			return ipamcore.AllocateResult{}, false
		}
		req.Address = a
	}
	if _, err := st.GetPool(ctx, poolID); errors.Is(err, ipamcore.ErrNotFound) {
		diags.AddAttributeError(path.Root(poolAttr), "Unknown "+poolAttr, "pool "+poolID+" does not exist; create it (or its cluster) first")
		return ipamcore.AllocateResult{}, false
	}
	res, err := st.Allocate(ctx, req)
	if err != nil {
		addCoreError(diags, "Unable to Allocate "+title, err)
		return res, false
	}
	return res, true
}

func titleCategory(c string) string {
	switch c {
	case ipamcore.CategoryNode:
		return "Node Address"
	case ipamcore.CategoryInstance:
		return "Instance Address"
	case ipamcore.OwnerEnvIPv4:
		return "Environment IPv4"
	}
	return c
}

// readAddress loads the owner's active allocation; false with no error means
// it is gone (released out of band) and the resource must leave state.
func readAddress(ctx context.Context, st *ipamcore.Store, clusterID, kind, ownerID string, diags *diag.Diagnostics) (ipamcore.Allocation, bool) {
	a, err := st.GetActive(ctx, clusterID, kind, ownerID)
	if errors.Is(err, ipamcore.ErrNotFound) {
		return a, false
	}
	if err != nil {
		addCoreError(diags, "Unable to Read "+titleCategory(kind), err)
		return a, false
	}
	return a, true
}

// releaseAddress moves the address to cooling, carrying the generation this
// state last saw (a stale delete is a no-op).
func releaseAddress(ctx context.Context, st *ipamcore.Store, req resource.DeleteRequest, clusterID string, owner ipamcore.Owner, diags *diag.Diagnostics) {
	if _, err := st.Release(ctx, clusterID, owner, getGeneration(ctx, req.Private)); err != nil {
		addCoreError(diags, "Unable to Release "+titleCategory(owner.Kind), err)
	}
}

// importOwner parses "<cluster_id>/<owner_id>" and seeds the state with it.
func importOwner(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse, ownerAttr string) {
	cluster, owner, ok := splitID(req.ID)
	if !ok {
		resp.Diagnostics.AddError("Invalid Import ID", "Expected `<cluster_id>/<"+ownerAttr+">`, got "+req.ID)
		return
	}
	for _, x := range []struct{ what, v string }{{"cluster_id", cluster}, {ownerAttr, owner}} {
		if err := ipamcore.ValidateID(x.what, x.v); err != nil {
			resp.Diagnostics.AddError("Invalid Import ID", err.Error())
			return
		}
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("cluster_id"), cluster)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(ownerAttr), owner)...)
}

// checkClaimAtPlan rejects, at plan time, a claimed address that lies outside
// the pool (or is one it never hands out) when the pool already exists, so
// nothing is written. poolID returns the pool once its inputs are known.
func checkClaimAtPlan(ctx context.Context, st *ipamcore.Store, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, poolID func() (string, bool)) {
	if st == nil || req.Plan.Raw.IsNull() {
		return
	}
	var claim types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("address"), &claim)...)
	if resp.Diagnostics.HasError() || claim.IsNull() || claim.IsUnknown() {
		return
	}
	addr, err := ipamcore.ParseAddr(claim.ValueString())
	if err != nil {
		return // reported by the attribute validator
	}
	id, ok := poolID()
	if !ok {
		return
	}
	err = st.CheckClaim(ctx, id, addr)
	if ipamcore.Code(err) == ipamcore.CodeInvalid {
		addCoreError(&resp.Diagnostics, "Address Cannot Be Claimed", err)
	}
	// Any other error (the pool does not exist yet, say) is left to apply.
}

// plannedPool reads a string attribute of the plan and maps it to a pool id.
func plannedPool(ctx context.Context, req resource.ModifyPlanRequest, attr string, toPool func(string) string) func() (string, bool) {
	return func() (string, bool) {
		var v types.String
		if d := req.Plan.GetAttribute(ctx, path.Root(attr), &v); d.HasError() || v.IsNull() || v.IsUnknown() {
			return "", false
		}
		return toPool(v.ValueString()), true
	}
}
