package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

var (
	_ resource.Resource                = &envIPv4Resource{}
	_ resource.ResourceWithConfigure   = &envIPv4Resource{}
	_ resource.ResourceWithImportState = &envIPv4Resource{}
	_ resource.ResourceWithModifyPlan  = &envIPv4Resource{}
)

// NewEnvIPv4Resource is the ipam_env_ipv4 resource.
func NewEnvIPv4Resource() resource.Resource { return &envIPv4Resource{} }

type envIPv4Resource struct {
	store *ipam.Client
	pd    *providerData
}

type envIPv4ResourceModel struct {
	ID          types.String `tfsdk:"id"`
	PoolID      types.String `tfsdk:"pool_id"`
	OrgID       types.String `tfsdk:"org_id"`
	EnvID       types.String `tfsdk:"env_id"`
	Address     types.String `tfsdk:"address"`
	CIDR        types.String `tfsdk:"cidr"`
	AllocatedAt types.String `tfsdk:"allocated_at"`
}

func (m *envIPv4ResourceModel) owner() ipam.Owner {
	id := m.EnvID.ValueString()
	return ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: id, EnvID: id, OrgID: m.OrgID.ValueString()}
}

// pool is the pool_id attribute as a pool reference (validated at plan time:
// a zero reference otherwise, which the core refuses).
func (m *envIPv4ResourceModel) pool() ipam.PoolRef {
	p, _ := ipam.ParsePoolRef("pool_id", m.PoolID.ValueString())
	return p
}

func (m *envIPv4ResourceModel) fill(a ipam.Allocation) {
	m.ID = types.StringValue(a.PoolID + "/" + a.Owner.ID)
	m.PoolID = types.StringValue(a.PoolID)
	m.OrgID = types.StringValue(a.Owner.OrgID)
	m.EnvID = types.StringValue(a.Owner.ID)
	m.Address = sameAddr(m.Address, a.Address)
	m.CIDR = types.StringValue(a.CIDR().String())
	m.AllocatedAt = timeString(a.AllocatedAt)
}

func (r *envIPv4Resource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_env_ipv4"
}

// IdentitySchema is the resource identity (Terraform 1.12+).
func (r *envIPv4Resource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = envIPv4Identity.schema()
}

func (r *envIPv4Resource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "The paid IPv4 add-on of one environment: one dedicated IPv4 address from an operator pool, linked " +
			"to the org and the environment. An environment holds at most one active IPv4 in a cluster (enforced by the " +
			"database). Destroy moves the address to cooling for the pool's cooldown. Events `env.ipv4_addon_enabled` and " +
			"`env.ipv4_addon_disabled` record both, with org and env.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "`<pool_id>/<env_id>`, that is `<cluster_id>/<pool name>/<env_id>`; also the import ID.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown(), idOf{"pool_id", "env_id"}},
			},
			"pool_id": schema.StringAttribute{
				MarkdownDescription: "The IPv4 pool (`ipam_pool.<name>.id`). Changing it replaces the resource.",
				Required:            true,
				Validators:          []validator.String{validPoolID()},
				PlanModifiers:       replace,
			},
			"org_id": schema.StringAttribute{
				MarkdownDescription: "The organization that owns the environment. Changing it replaces the resource and gives the environment another address: " +
					"an owner takes its own cooling address back only for the org that released it.",
				Required:      true,
				Validators:    []validator.String{validID("org_id")},
				PlanModifiers: replace,
			},
			"env_id": schema.StringAttribute{
				MarkdownDescription: "The environment: the owner of the address, so unique in the cluster across orgs (another " +
					"org's environment of the same id is refused with `owner_conflict`). Changing it replaces the resource.",
				Required:      true,
				Validators:    []validator.String{validID("env_id")},
				PlanModifiers: replace,
			},
			"address": schema.StringAttribute{
				MarkdownDescription: "The IPv4 address. Set it to claim exactly this address: it must be a usable address of the " +
					"pool, not active for another environment (`address_in_use`) and not cooling (`address_cooling`; the same " +
					"environment may take its own cooling address back). Leave it unset to get the oldest free address.",
				Optional:      true,
				Computed:      true,
				Validators:    []validator.String{validAddr()},
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown(), requiresReplaceIfClaimChanges()},
			},
			"cidr": schema.StringAttribute{
				MarkdownDescription: "The address with its block's prefix length, e.g. `198.51.100.7/24`.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"allocated_at": allocatedAtAttribute(),
		},
	}
}

func (r *envIPv4Resource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if r.pd = providerDataFrom(req.ProviderData, &resp.Diagnostics); r.pd != nil {
		r.store = r.pd.store
	}
}

func (r *envIPv4Resource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	checkClaimAtPlan(ctx, r.store, req, resp, plannedPool(ctx, req, "pool_id", func(p string) string { return p }))
	if req.Plan.Raw.IsNull() || !req.State.Raw.IsNull() || resp.Diagnostics.HasError() {
		return // only a create (or the create half of a replacement) takes a hold
	}
	var plan envIPv4ResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.Plan.Get, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	config := configAddress(ctx, req.Config)
	a, ok := reserveForPlan(ctx, r.pd, &resp.Diagnostics, replacedGeneration(ctx, req), plan.pool(), plan.owner(), !plan.PoolID.IsUnknown() && !plan.OrgID.IsUnknown() && !plan.EnvID.IsUnknown(), config)
	if !ok {
		return
	}
	plan.Address = sameAddr(config, a.Address)
	plan.CIDR = types.StringValue(a.CIDR().String())
	resp.Diagnostics.Append(setModel(ctx, &resp.Plan.Raw, resp.Plan.Schema.Type(), &plan)...)
}

func (r *envIPv4Resource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer envIPv4Identity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan envIPv4ResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.Plan.Get, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, ok := allocateAddress(ctx, r.store, plan.pool(), "pool_id", plan.owner(), configAddress(ctx, req.Config), plan.Address, &resp.Diagnostics)
	if !ok {
		return
	}
	plan.fill(res.Allocation)
	resp.Diagnostics.Append(setModel(ctx, &resp.State.Raw, resp.State.Schema.Type(), &plan)...)
	resp.Diagnostics.Append(setGeneration(ctx, resp.Private, res.Generation)...)
}

func (r *envIPv4Resource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer envIPv4Identity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics, &req.State)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state envIPv4ResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.State.Get, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	a, ok := readAddress(ctx, r.store, state.pool().ClusterID, ipam.OwnerEnvIPv4, state.EnvID.ValueString(), &resp.Diagnostics)
	if !ok {
		if !resp.Diagnostics.HasError() {
			resp.State.RemoveResource(ctx)
		}
		return
	}
	state.fill(a)
	resp.Diagnostics.Append(setModel(ctx, &resp.State.Raw, resp.State.Schema.Type(), &state)...)
	resp.Diagnostics.Append(setGeneration(ctx, resp.Private, a.Generation)...)
}

// Update has nothing to change in the database: every input replaces.
func (r *envIPv4Resource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer envIPv4Identity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	var plan envIPv4ResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.Plan.Get, &plan)...)
	resp.Diagnostics.Append(setModel(ctx, &resp.State.Raw, resp.State.Schema.Type(), &plan)...)
}

func (r *envIPv4Resource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state envIPv4ResourceModel
	resp.Diagnostics.Append(getModel(ctx, req.State.Get, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	releaseAddress(ctx, r.store, req, state.pool().ClusterID, state.owner(), &resp.Diagnostics)
}

// ImportState takes "<cluster_id>/<pool name>/<env_id>", or the address.
func (r *envIPv4Resource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id, ok := envIPv4Identity.importID(ctx, req, &resp.Diagnostics)
	if !ok {
		return
	}
	if addr, err := ipam.ParseAddr(id); err == nil {
		a, ok := importByAddress(ctx, r.store, addr, ipam.OwnerEnvIPv4, &resp.Diagnostics)
		if !ok {
			return
		}
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), a.PoolID+"/"+a.Owner.ID)...)
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("pool_id"), a.PoolID)...)
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("env_id"), a.Owner.ID)...)
		warnManagedElsewhere(ctx, r.store, a.PoolID+"/"+a.Owner.ID, a.ClusterID, ipam.OwnerEnvIPv4, a.Owner.ID, &resp.Diagnostics)
		return
	}
	i := strings.LastIndexByte(id, '/')
	if i <= 0 || validPoolIDString(id[:i]) != nil || ipam.ValidateID("env_id", id[i+1:]) != nil {
		resp.Diagnostics.AddError("Invalid Import ID", "Expected `<cluster_id>/<pool name>/<env_id>` or an address, got "+id)
		return
	}
	// The import adopts only what its ID names: an environment's IPv4 held
	// in another pool of the cluster is not this pool's, and adopting it
	// would record that other pool (and the next plan would move the
	// environment's public address).
	if r.store != nil {
		pool, err := ipam.ParsePoolRef("id", id[:i])
		if err == nil {
			a, err := r.store.GetActive(ctx, pool.ClusterID, ipam.OwnerEnvIPv4, id[i+1:])
			if err == nil && a.PoolID != pool.ID() {
				resp.Diagnostics.AddError("Import ID Names Another Pool",
					fmt.Sprintf("Environment %q holds its IPv4 %s in pool %s, not in pool %s: nothing was imported. To manage "+
						"that address, import it with the ID %s/%s (and pool_id = %q in the configuration).",
						id[i+1:], a.Address, a.PoolID, pool.ID(), a.PoolID, id[i+1:], a.PoolID))
				return
			}
		}
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("pool_id"), id[:i])...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("env_id"), id[i+1:])...)
	if pool, err := ipam.ParsePoolRef("id", id[:i]); err == nil {
		warnManagedElsewhere(ctx, r.store, id, pool.ClusterID, ipam.OwnerEnvIPv4, id[i+1:], &resp.Diagnostics)
	}
}
