package provider

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
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

func (s *addressState) fill(a ipam.Allocation, ownerID string) {
	s.ID = types.StringValue(a.ClusterID + "/" + ownerID)
	s.ClusterID = types.StringValue(a.ClusterID)
	s.planned(s.Address, a)
	s.AllocatedAt = timeString(a.AllocatedAt)
}

// planned fills what a plan shows of the allocation reserveForPlan found:
// its address. Not the time it was allocated, even for an allocation a
// replacement keeps: a replacement that destroys first releases it, and the
// create takes the owner's cooling address back, allocated anew.
func (s *addressState) planned(config types.String, a ipam.Allocation) {
	s.Address = sameAddr(config, a.Address)
	s.CIDR = types.StringValue(netip.PrefixFrom(a.Address, a.Address.BitLen()).String())
}

// addressAttributes are the attributes every single-address resource has.
func addressAttributes(ownerAttr, what string) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"id": schema.StringAttribute{
			MarkdownDescription: "`<cluster_id>/<" + ownerAttr + ">`; also the import ID.",
			Computed:            true,
			PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown(), idOf{"cluster_id", ownerAttr}},
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
		"allocated_at": allocatedAtAttribute(),
	}
}

// allocatedAtAttribute is the allocated_at attribute of every resource that
// holds one address (ipam_env_ipv4 too).
func allocatedAtAttribute() schema.StringAttribute {
	return schema.StringAttribute{
		MarkdownDescription: "When the address was allocated (RFC 3339, database time).",
		Computed:            true,
		PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
	}
}

// requiresReplaceIfClaimChanges replaces the resource when the configured
// exact address differs from the held one; an unset address keeps the held one.
func requiresReplaceIfClaimChanges() planmodifier.String {
	return stringplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
		if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() || req.StateValue.IsNull() {
			return
		}
		want, err1 := ipam.ParseAddr(req.ConfigValue.ValueString())
		held, err2 := ipam.ParseAddr(req.StateValue.ValueString())
		resp.RequiresReplace = err1 == nil && err2 == nil && want != held
	}, "Changing a claimed address replaces the resource.", "Changing a claimed `address` replaces the resource.")
}

// allocateAddress runs the core allocation for a create, through the core's
// one allocation entry point (the one the public Go API calls). poolAttr
// names the attribute that chose the pool ("cluster_id" or "pool_id"), for
// diagnostics.
func allocateAddress(ctx context.Context, st *ipam.Client, pool ipam.PoolRef, poolAttr string, owner ipam.Owner, config, planned types.String, diags *diag.Diagnostics) (ipam.AllocateResult, bool) {
	return allocateWith(titleCategory(owner.Kind), config, planned, diags, func(addr netip.Addr) (ipam.AllocateResult, error) {
		res, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: pool, Owner: owner, Address: addr})
		var ie *ipam.InvalidError
		if errors.Is(err, ipam.ErrPoolNotFound) && errors.As(err, &ie) {
			err = &ipam.InvalidError{Field: poolAttr, Msg: ie.Msg, Err: ie.Err}
		}
		return res, err
	})
}

// allocateWith runs a create's allocation: the configured or planned address
// is claimed exactly, and a planned one that was taken meanwhile says to plan again.
func allocateWith(title string, config, planned types.String, diags *diag.Diagnostics, alloc func(netip.Addr) (ipam.AllocateResult, error)) (ipam.AllocateResult, bool) {
	claim, fromHold := planClaim(config, planned)
	var addr netip.Addr
	if !claim.IsNull() && !claim.IsUnknown() {
		a, err := ipam.ParseAddr(claim.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("address"), "Invalid Address", err.Error())
			return ipam.AllocateResult{}, false
		}
		addr = a
	}
	res, err := alloc(addr)
	switch {
	case err != nil && fromHold && isTaken(err):
		holdLost(diags, title, claim, err)
		return res, false
	case err != nil:
		addCoreError(diags, "Unable to Allocate "+title, err)
		return res, false
	}
	return res, true
}

// poolName names a request's pool in a warning.
func poolName(p ipam.PoolRef) string {
	if p.Name == "" {
		return "Cluster " + p.ClusterID
	}
	return "Pool " + p.ID()
}

func titleCategory(c string) string {
	switch c {
	case ipam.CategoryNode:
		return "Node Address"
	case ipam.CategoryInstance:
		return "Instance Address"
	case ipam.OwnerEnvIPv4:
		return "Environment IPv4"
	}
	return c
}

// readAddress loads the owner's active allocation; false with no error means
// it is gone (released out of band) and the resource must leave state.
func readAddress(ctx context.Context, st *ipam.Client, clusterID, kind, ownerID string, diags *diag.Diagnostics) (ipam.Allocation, bool) {
	a, err := st.GetActive(ctx, clusterID, kind, ownerID)
	if errors.Is(err, ipam.ErrNotFound) {
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
func releaseAddress(ctx context.Context, st *ipam.Client, req resource.DeleteRequest, clusterID string, owner ipam.Owner, diags *diag.Diagnostics) {
	if _, err := st.Release(ctx, clusterID, owner, getGeneration(ctx, req.Private)); err != nil {
		addCoreError(diags, "Unable to Release "+titleCategory(owner.Kind), err)
	}
}

// importOwner parses "<cluster_id>/<owner_id>", or an address (whose active
// allocation names the owner), and seeds the state with it.
func importOwner(ctx context.Context, st *ipam.Client, id string, resp *resource.ImportStateResponse, kind, ownerAttr string) {
	if addr, err := ipam.ParseAddr(id); err == nil {
		a, ok := importByAddress(ctx, st, addr, kind, &resp.Diagnostics)
		if !ok {
			return
		}
		id = a.ClusterID + "/" + a.Owner.ID
	}
	importPair(ctx, id, resp, ownerAttr, " or an address")
	if cluster, owner, ok := splitID(id); ok && !resp.Diagnostics.HasError() {
		warnManagedElsewhere(ctx, st, id, cluster, kind, owner, &resp.Diagnostics)
	}
}

// warnManagedElsewhere warns an import of an allocation that another
// configuration created: both states would then manage it, and either
// one's destroy would release it under the other. It reads without
// recording a refresh (Peek); a failure to read is the refresh's to report.
func warnManagedElsewhere(ctx context.Context, st *ipam.Client, importID, clusterID, kind, ownerID string, diags *diag.Diagnostics) {
	if st == nil {
		return
	}
	if a, err := st.Peek().GetActive(ctx, clusterID, kind, ownerID); err == nil {
		warnCreatedBy(st, importID, a.Origin, diags)
		if st.Origin() != "" && a.Origin == st.Origin() {
			// Its own: a state rm and import again, or a second resource of
			// the configuration declaring the same owner.
			diags.AddWarning("Created by This Configuration",
				importID+" ("+a.Address.String()+") was created by this same configuration. If you removed it from the state "+
					"(terraform state rm) to import it again, this import is what you meant. If another resource of this "+
					"configuration still declares it, two resources now manage one address: destroying or replacing either "+
					"releases the address the other uses. Remove one of them from the state (terraform state rm).")
		}
	}
}

// warnObjectManagedElsewhere is warnManagedElsewhere for a cluster, a pool
// or an address set (kind: operator.ManagedCluster, ManagedPool,
// ManagedSet; importID names it as Managers does): the configuration that
// created it is the one `terraform query` names too.
func warnObjectManagedElsewhere(ctx context.Context, st *ipam.Client, kind, importID string, diags *diag.Diagnostics) {
	if st == nil {
		return
	}
	if managers, err := operator.New(st).Managers(ctx, kind, []string{importID}); err == nil {
		warnCreatedBy(st, importID, managers[importID], diags)
	}
}

// warnCreatedBy warns the import of importID, which the configuration of
// origin created ("" when none did, or only a read saw it), unless that is
// this configuration. Only the creator is judged: a refresh does not record
// which configuration read it, and an import block's plan has read what
// its apply imports again.
func warnCreatedBy(st *ipam.Client, importID, origin string, diags *diag.Diagnostics) {
	if origin == "" || origin == st.Origin() {
		return
	}
	summary, detail := managedWarning(listEntry{importID: importID, managedBy: origin})
	diags.AddWarning(summary, detail)
}

// importPair seeds the state of a resource imported by "<cluster_id>/<attr>":
// id, cluster_id and attr. hint extends the expected form in the error.
func importPair(ctx context.Context, id string, resp *resource.ImportStateResponse, attr, hint string) {
	cluster, second, ok := splitID(id)
	if !ok {
		resp.Diagnostics.AddError("Invalid Import ID", "Expected `<cluster_id>/<"+attr+">`"+hint+", got "+id)
		return
	}
	for _, x := range []struct{ what, v string }{{"cluster_id", cluster}, {attr, second}} {
		if err := ipam.ValidateID(x.what, x.v); err != nil {
			resp.Diagnostics.AddError("Invalid Import ID", err.Error())
			return
		}
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("cluster_id"), cluster)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(attr), second)...)
}

// importByAddress finds the active allocation of an address for an import,
// checking that it is of the resource's kind.
func importByAddress(ctx context.Context, st *ipam.Client, addr netip.Addr, kind string, diags *diag.Diagnostics) (ipam.Allocation, bool) {
	if !requireStore(st, diags) {
		return ipam.Allocation{}, false
	}
	a, err := st.FindActiveByAddress(ctx, addr)
	switch {
	case errors.Is(err, ipam.ErrNotFound) || errors.Is(err, ipam.ErrPoolNotFound):
		diags.AddError("Cannot Import Address", addr.String()+" is not active in any cluster.")
	case err != nil:
		addCoreError(diags, "Cannot Import Address", err)
	case a.Owner.Kind != kind:
		diags.AddError("Cannot Import Address", addr.String()+" is held by "+a.Owner.Kind+" "+a.Owner.ID+
			", not by a "+strings.ReplaceAll(kind, "_", " ")+"; import it into the matching resource type.")
	default:
		return a, true
	}
	return a, false
}

// checkClaimAtPlan rejects, at plan time, a claimed address that lies outside
// the pool (or is one it never hands out) when the pool already exists, so
// nothing is written. poolID returns the pool once its inputs are known.
func checkClaimAtPlan(ctx context.Context, st *ipam.Client, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, poolID func() (string, bool)) {
	if st == nil || req.Plan.Raw.IsNull() {
		return
	}
	var claim types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("address"), &claim)...)
	if resp.Diagnostics.HasError() || claim.IsNull() || claim.IsUnknown() {
		return
	}
	addr, err := ipam.ParseAddr(claim.ValueString())
	if err != nil {
		return // reported by the attribute validator
	}
	id, ok := poolID()
	if !ok {
		return
	}
	err = st.CheckClaim(ctx, id, addr)
	if ipam.Code(err) == ipam.CodeInvalid {
		addCoreError(&resp.Diagnostics, "Address Cannot Be Claimed", err)
	}
	uncheckedAtPlan(&resp.Diagnostics, path.Root("address"), "the address "+addr.String(), err)
	// Any other error (the pool does not exist yet, say) is left to apply.
}

// heldElsewhere is the warning of a plan whose owner (what) a plan of the
// same actor in another configuration holds (err, owner_conflict): the plan
// shows the held address, and the create fails.
func heldElsewhere(what string, err error) string {
	return "A plan of another configuration holds " + what + ": " + err.Error() + ". This plan shows the held address; " +
		"applying this create (a saved plan made there included) fails with the same error and allocates nothing. If that " +
		"configuration is this one in another directory (a saved plan applied where it was not made), give both the same " +
		"origin: the provider's origin attribute, or " + EnvOrigin + " in the environment."
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

// Reasons an address stays "known after apply", each warned about once.
const (
	reasonDisabled  = "reservations-disabled"
	reasonReadOnly  = "reservations-read-only"
	reasonUnknownID = "reservations-unknown-owner"
	reasonNoPool    = "reservations-no-pool"
	reasonExhausted = "reservations-exhausted"
	reasonDestroy   = "reservations-destroy"
	reasonNewBlocks = "reservations-new-blocks"
)

// heldByOther is what the owner a refusal names holds (another
// configuration's hold or allocation), as a plan shows it: its address with
// its block's CIDR; false when the refusal names no address.
func heldByOther(oc *ipam.OwnerConflictError) (ipam.Allocation, bool) {
	a, err := netip.ParseAddr(oc.Address)
	return ipam.Allocation{Address: a, Block: oc.Block}, err == nil
}

// holdsOff says (a warning, once) when this plan takes no plan-time holds
// at all: plan_reservations is false, or who this configuration is (origin,
// actor) is known only after apply, while a hold (and a replacement's
// mark) is its configuration's: one taken under another origin would
// refuse the apply's own create.
func (pd *providerData) holdsOff(diags *diag.Diagnostics) bool {
	switch {
	case !pd.reservations:
		pd.warnOnce(diags, reasonDisabled, "Addresses Known After Apply",
			"plan_reservations is false, so new addresses show as \"(known after apply)\" in this plan.")
		return true
	case pd.unknownWho != "":
		pd.warnOnce(diags, reasonDisabled, "Addresses Known After Apply",
			"The provider's "+pd.unknownWho+" depends on values known only after apply. A plan-time hold is its "+
				"configuration's, which is not known yet, so this plan takes none: new addresses show as \"(known after apply)\".")
		return true
	}
	return false
}

// reserveForPlan takes, or finds again, the plan-time hold of an owner being
// created and returns its address for the plan. It returns false, with a
// warning said once per run, where the address must stay unknown: holds
// switched off, owner keys not known yet, or a database role that may not
// write. A refusal that would fail the apply (owner_conflict, a claim in use
// or cooling) is a warning naming it, and the address stays unknown: the
// apply fails with the same error. It does not fail the plan, because
// `terraform destroy` plans the whole configuration first (a normal-mode
// refresh plan), and one new resource's conflict must not stop a destroy.
func reserveForPlan(ctx context.Context, pd *providerData, diags *diag.Diagnostics, replaces int64, pool ipam.PoolRef, owner ipam.Owner, keysKnown bool, claim types.String) (ipam.Allocation, bool) {
	switch {
	case pd == nil:
		return ipam.Allocation{}, false
	case pd.holdsOff(diags):
		return ipam.Allocation{}, false
	case currentRun().destroy:
		// The preliminary plan of a destroy plans the configuration's
		// creates too, but applies none: a hold would outlive it.
		pd.warnOnce(diags, reasonDestroy, "Addresses Not Reserved by a Destroy",
			"This command destroys: the addresses of resources it would create are not reserved, and show as \"(known after apply)\".")
		return ipam.Allocation{}, false
	case !keysKnown || claim.IsUnknown():
		pd.warnOnce(diags, reasonUnknownID, "Some Addresses Known After Apply",
			"A new address resource's owner or pool depends on values known only after apply, so its address cannot be "+
				"reserved at plan time and shows as \"(known after apply)\". Addresses of owners known at plan time are shown.")
		return ipam.Allocation{}, false
	}
	var addr netip.Addr
	if !claim.IsNull() {
		a, err := ipam.ParseAddr(claim.ValueString())
		if err != nil {
			return ipam.Allocation{}, false
		}
		addr = a
	}
	if replaces > 0 {
		// The create half of a replacement: the owner's allocation, if it
		// is still the replaced object's (its generation), is marked, so
		// that the create takes it over (the plan then shows the address it
		// keeps) instead of refusing it as another configuration's. Nothing
		// to mark (another cluster, a released allocation) is no error.
		_, _ = pd.store.MarkReplacement(ctx, pool.ClusterID, owner, replaces, pd.markTTL())
	}
	a, err := pd.store.Reserve(ctx, ipam.AllocateRequest{Pool: pool, Owner: owner, Address: addr}, pd.reservationTTL)
	var oc *ipam.OwnerConflictError
	var hl *ipam.HoldLostError
	switch {
	case err == nil:
		warnLostHold(diags, owner, a)
		pd.tookHold(a.PoolID)
		return a.Allocation, true
	case errors.As(err, &hl):
		// The plan shows the lost address again, so that a saved plan
		// that showed it, applied now, passes Terraform's re-plan and
		// fails at create with "Planned Address No Longer Available",
		// writing nothing. No hold is taken; the next plan takes one.
		diags.AddAttributeWarning(path.Root("address"), "Earlier Planned Address Was Taken",
			"An earlier plan held "+hl.Lost.Address.String()+" for "+owner.Kind+" "+owner.ID+", but that hold expired and "+
				hl.Lost.TakenBy+" took the address at "+hl.Lost.At.UTC().Format(time.RFC3339)+". If you are applying a saved "+
				"plan, its apply fails for this resource and allocates nothing. Run terraform plan again: the next plan "+
				"reserves a new address.")
		return ipam.Allocation{Address: hl.Lost.Address, Block: hl.Lost.Block}, true
	case errors.As(err, &oc) && a.Lost != nil:
		// This configuration's earlier plan held the owner, and another
		// manager took it once the hold expired. The plan shows the held
		// address again, so that a saved plan that showed it, applied now,
		// passes Terraform's re-plan and fails at create with this same
		// owner_conflict, writing nothing.
		lost := a.Lost.Address.String()
		diags.AddAttributeWarning(path.Root("address"), titleCategory(owner.Kind)+" Is Managed Elsewhere",
			"An earlier plan of this configuration held "+lost+" for "+owner.Kind+" "+owner.ID+", but that hold expired and "+
				a.Lost.TakenBy+" took the "+owner.Kind+" at "+a.Lost.At.UTC().Format(time.RFC3339)+": "+err.Error()+
				". Applying this create (a saved plan that showed "+lost+" included) fails with the same error and allocates nothing."+
				withHint(err))
		return ipam.Allocation{Address: a.Lost.Address, Block: a.Lost.Block}, true
	case errors.As(err, &oc) && oc.Actor == pd.store.Actor() && (replaces > 0 || oc.Replacing):
		// The owner still holds its old address under this actor: a
		// replacement that moves it. Apply takes the new address then.
		// (At apply, Terraform plans the create of a create_before_destroy
		// replacement again without the old object: its plan's mark says it.)
	case errors.As(err, &oc) && oc.Held && oc.Actor == pd.store.Actor():
		// A plan of this actor in another configuration holds the owner:
		// the plan shows the held address, so that a saved plan made there
		// and applied here passes Terraform's re-plan and fails at create
		// with this same owner_conflict, writing nothing.
		if held, ok := heldByOther(oc); ok {
			diags.AddAttributeWarning(path.Root("address"), titleCategory(owner.Kind)+" Is Managed Elsewhere",
				heldElsewhere(owner.Kind+" "+owner.ID, err))
			return held, true
		}
	case errors.As(err, &oc):
		diags.AddAttributeWarning(path.Root("address"), titleCategory(owner.Kind)+" Is Managed Elsewhere",
			"No address can be reserved for "+owner.Kind+" "+owner.ID+" at plan time: "+err.Error()+
				". Applying this create fails with the same error."+withHint(err))
		if held, ok := heldByOther(oc); ok && currentRun().applies {
			// The re-plan of an apply: its plan may have shown that
			// address (another configuration's live hold, above, which
			// that configuration has applied since), and Terraform
			// accepts the final plan only if it shows it again; the
			// create then fails with this owner_conflict. A plan that
			// showed it unknown accepts it too.
			return held, true
		}
	case ipam.Code(err) == ipam.CodeExhausted:
		// This same apply may grow the pool or release addresses first.
		pd.warnOnce(diags, reasonExhausted, "Some Addresses Known After Apply", exhaustedAtPlan(pd, err))
	case ipam.WriteRefused(err):
		pd.warnOnce(diags, reasonReadOnly, "Addresses Known After Apply",
			"The database refused the plan-time hold ("+err.Error()+"), so new addresses show as \"(known after apply)\". "+
				"Planning with a role that may not write, or against a read-only server, works; applying needs a role that may write, on the primary.")
	case isRefusal(err):
		diags.AddAttributeWarning(path.Root("address"), titleCategory(owner.Kind)+" Cannot Be Reserved",
			"No address can be reserved for "+owner.Kind+" "+owner.ID+" at plan time: "+err.Error()+
				". Its address shows as \"(known after apply)\"; applying it fails with the same error unless that is resolved first."+
				withHint(err))
	case errors.Is(err, ipam.ErrNotFound) || errors.Is(err, ipam.ErrPoolNotFound):
		pd.warnOnce(diags, reasonNoPool, "Some Addresses Known After Apply",
			poolName(pool)+" does not exist yet, so addresses from it cannot be reserved at plan time and show as "+
				"\"(known after apply)\". If this apply creates it, later plans show them; if nothing creates it, the apply "+
				"fails: check the name.")
	default:
		addCoreError(diags, "Unable to Reserve "+titleCategory(owner.Kind), err)
	}
	return ipam.Allocation{}, false
}

// exhaustedAtPlan is the warning of a plan that found no address to hold
// for a new resource: the apply tries again after the plan's other changes.
// The pool's figures count live plan-time holds apart from active
// allocations, since this plan's own other new addresses may be among them.
// A node's full blocks the apply grows (a hold never grows a node), so the
// warning says so rather than that the apply fails.
func exhaustedAtPlan(pd *providerData, err error) string {
	then := "fail with ipam_exhausted if none is free then."
	var ex *ipam.ExhaustedError
	if errors.As(err, &ex) {
		if ref, perr := ipam.ParsePoolRef("pool_id", ex.PoolID); perr == nil {
			if node, ok := ref.BlocksNode(); ok {
				then = fmt.Sprintf("grow node %q's blocks if they are still full, up to its max_blocks; it fails with "+
					"ipam_exhausted only beyond that.", node)
			}
		}
	}
	msg := "No address could be reserved at plan time (" + err.Error() + "); the apply will try again after the other " +
		"changes of this plan, and " + then
	if ex != nil && ex.Held > 0 {
		whose := "none of them taken by this run: the plan being applied holds some, if this is an apply; other plans, or an " +
			"abandoned one, may hold the others (`ipamctl list --state reserved` lists them)"
		if mine := min(pd.holdsIn(ex.PoolID), ex.Held); mine > 0 {
			whose = fmt.Sprintf("%d of them this plan's other new addresses from this pool", mine)
		}
		msg += fmt.Sprintf(" %d of the pool's addresses are held by plan-time holds (%s): they are not allocations yet, and "+
			"each becomes one when its plan is applied, or goes back to the pool when it expires (reservation_ttl).", ex.Held, whose)
	}
	return msg
}

// warnLostHold says, in the plan, that an earlier plan's hold of this owner
// expired and went to another owner. Terraform re-plans each resource right
// before applying it and compares with the saved plan, so a saved plan that
// showed the lost address fails there with "Provider produced inconsistent
// final plan" before anything is allocated: this warning, shown with that
// error, says why and what to do. Reserve looks the lost hold up in the round
// trip of its own first look.
func warnLostHold(diags *diag.Diagnostics, owner ipam.Owner, h ipam.Hold) {
	if h.Lost == nil || h.Lost.Address == h.Address {
		return
	}
	lost := h.Lost.Address.String()
	diags.AddWarning("Earlier Planned Address Was Taken",
		"An earlier plan held "+lost+" for "+owner.Kind+" "+owner.ID+", but that hold expired and "+h.Lost.TakenBy+
			" took the address at "+h.Lost.At.UTC().Format(time.RFC3339)+"; this plan shows "+h.Address.String()+" instead. "+
			"If you are applying a saved plan that showed "+lost+", Terraform reports \"Provider produced inconsistent "+
			"final plan\" for this resource: nothing was allocated for it, so run terraform plan again and apply the new plan.")
}

// planClaim turns a create's planned address into the request: an address
// the user set is a claim; one planned from a hold is claimed too, so the
// applied address always equals the planned one.
func planClaim(config, plan types.String) (claim types.String, fromHold bool) {
	if !config.IsNull() {
		return config, false
	}
	return plan, !plan.IsUnknown() && !plan.IsNull()
}

// holdLost explains a planned address that was taken before apply.
func holdLost(diags *diag.Diagnostics, title string, planned types.String, err error) {
	diags.AddAttributeError(path.Root("address"), "Planned Address No Longer Available",
		"The plan showed "+planned.ValueString()+" for this "+strings.ToLower(title)+", but its plan-time hold expired and "+
			"the address was taken before apply ("+err.Error()+"). Nothing was allocated: run terraform plan again.")
}

// isRefusal reports whether the core refused a request because an owner or
// address is someone else's: the apply would fail the same way.
func isRefusal(err error) bool {
	return isTaken(err) || ipam.Code(err) == ipam.CodeOwnerConflict
}

// isTaken reports whether an exact claim failed because the address is held by someone else.
func isTaken(err error) bool {
	c := ipam.Code(err)
	return c == ipam.CodeAddressInUse || c == ipam.CodeAddressCooling
}

// configAddress reads the configured (claimed) address.
func configAddress(ctx context.Context, config tfsdk.Config) types.String {
	var v types.String
	if d := config.GetAttribute(ctx, path.Root("address"), &v); d.HasError() {
		return types.StringNull()
	}
	return v
}

// requiresReplaceIfPrefixChanges replaces the resource when the configured
// prefix means another prefix than the state's, not when it is only spelled
// otherwise ("2001:DB8::/48"): that is an in-place update of the spelling.
func requiresReplaceIfPrefixChanges() planmodifier.String {
	return stringplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
		want, err1 := ipam.ParsePrefix(req.ConfigValue.ValueString())
		held, err2 := ipam.ParsePrefix(req.StateValue.ValueString())
		resp.RequiresReplace = err1 != nil || err2 != nil || want != held
	}, "Changing the prefix replaces the resource.", "Changing the `prefix` replaces the resource.")
}
