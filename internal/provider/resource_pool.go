package provider

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

var (
	_ resource.Resource                   = &poolResource{}
	_ resource.ResourceWithConfigure      = &poolResource{}
	_ resource.ResourceWithImportState    = &poolResource{}
	_ resource.ResourceWithValidateConfig = &poolResource{}
	_ resource.ResourceWithModifyPlan     = &poolResource{}
)

// NewPoolResource is the ipam_pool resource.
func NewPoolResource() resource.Resource { return &poolResource{} }

type poolResource struct {
	store *ipam.Client
	pd    *providerData
}

type poolResourceModel struct {
	ID           types.String `tfsdk:"id"`
	ClusterID    types.String `tfsdk:"cluster_id"`
	Name         types.String `tfsdk:"name"`
	CIDRs        types.List   `tfsdk:"cidrs"`
	Exclude      types.List   `tfsdk:"exclude"`
	Cooldown     types.String `tfsdk:"cooldown"`
	MTU          types.Int64  `tfsdk:"mtu"`
	Gateway      types.String `tfsdk:"gateway"`
	ForceDestroy types.Bool   `tfsdk:"force_destroy"`
	Default      types.Bool   `tfsdk:"default"`
	Family       types.String `tfsdk:"family"`
	Size         types.Int64  `tfsdk:"size"`
}

func (r *poolResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pool"
}

// IdentitySchema is the resource identity (Terraform 1.12+).
func (r *poolResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = poolIdentity.schema()
}

func (r *poolResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "An operator-provided pool of addresses in a cluster, such as the IPv4 blocks of the paid IPv4 add-on. " +
			"IPv4 pools store one row per usable address (gaps are absent rows) and hand out the oldest free address first: " +
			"never-used addresses in block order, then released ones least-recently-used once their cooldown has passed. " +
			"IPv6 pools use the striped counter allocator of the cluster's own pools. Pools of a cluster never overlap each " +
			"other or the cluster's node and instance prefixes, and a public IPv4 block belongs to one pool only. " +
			"An IPv4 block is either wholly private (inside 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10, " +
			"127.0.0.0/8 or 169.254.0.0/16), and may then be reused by other clusters, or holds no private address at all; " +
			"a block that mixes the two is refused at plan.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "`<cluster_id>/<name>`; also the import ID and the `pool_id` of allocations.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"cluster_id": schema.StringAttribute{
				MarkdownDescription: "The cluster the pool belongs to. Changing it replaces the pool.",
				Required:            true,
				Validators:          []validator.String{validID("cluster_id")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the pool in its cluster (not `node` or `instance`). Changing it replaces the pool.",
				Required:            true,
				Validators:          []validator.String{validID("name")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"cidrs": schema.ListAttribute{
				MarkdownDescription: "The pool's blocks, in order of preference: earlier blocks are handed out first. All of one " +
					"family. The network and broadcast addresses of IPv4 blocks (and the `::0` of IPv6 blocks) are never handed out, " +
					"except in /31, /32, /127 and /128 blocks. Adding blocks updates the pool in place (IPv6 pools only at the end); " +
					"an IPv4 pool may drop or shrink blocks, which fails while they hold active, held or cooling addresses and lists " +
					"them; an IPv6 pool only grows at the end, and removing any of its blocks, even an unused one, is refused (replace " +
					"the pool instead, once it holds no active address).",
				ElementType: types.StringType,
				Required:    true,
				Validators:  []validator.List{listvalidator.SizeAtLeast(1), listCheck{noun: "blocks", elem: validPrefix()}},
			},
			"exclude": schema.ListAttribute{
				MarkdownDescription: "Addresses or CIDRs inside the pool that are never handed out: the gaps. Adding exclusions " +
					"updates in place; excluding an address that is active or cooling fails and lists it.",
				ElementType: types.StringType,
				Optional:    true,
				Computed:    true,
				Default:     listdefault.StaticValue(types.ListValueMust(types.StringType, []attr.Value{})),
				Validators:  []validator.List{listCheck{noun: "exclusions", elem: validAddrOrPrefix()}},
			},
			"cooldown": schema.StringAttribute{
				MarkdownDescription: "How long a released address stays out of use (default `\"24h\"`).",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString("24h"),
				Validators:          []validator.String{validDuration(0)},
			},
			"mtu": schema.Int64Attribute{
				MarkdownDescription: "MTU of the pool's network, if it has one to hand out.",
				Optional:            true,
				Validators:          []validator.Int64{int64validator.Between(68, 65535)},
			},
			"gateway": schema.StringAttribute{
				MarkdownDescription: "Gateway of the pool's network, if any. A gateway inside the pool is never handed out.",
				Optional:            true,
				Validators:          []validator.String{validAddr()},
			},
			"force_destroy": schema.BoolAttribute{
				MarkdownDescription: "Default `false`. Without it, a destroy fails only while the pool holds an active address; otherwise it drops plan-time holds " +
					"and leaves the addresses inside their cooldown as tombstones, which a pool created later over them inherits. " +
					"With `true`, active addresses (meant for ones no Terraform state manages) are released into their cooldown first, and plan-time holds are dropped all the same; " +
					"an address another configuration's state holds is released too, and that configuration allocates again at its next apply. " +
					"A destroy reads it from the state, as for any resource: set it, apply (an in-place update that changes nothing else), then destroy.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"default": schema.BoolAttribute{
				MarkdownDescription: "Make this the cluster's default pool of its family (default `false`): the pool an " +
					"`ipam_address_set` key asking for `family = \"ipv4\"` (or `ipv6`) draws from. At most one per family and cluster.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"family": schema.StringAttribute{
				MarkdownDescription: "`ipv4` or `ipv6`, from the blocks.",
				Computed:            true,
			},
			"size": schema.Int64Attribute{
				MarkdownDescription: "Number of addresses the pool can hand out (blocks minus network, broadcast, gateway and exclusions).",
				Computed:            true,
			},
		},
	}
}

func (r *poolResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.store = storeFrom(req.ProviderData, &resp.Diagnostics)
	r.pd = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// parseAddrOrPrefix reads an exclusion: a CIDR, or one address as its host prefix.
func parseAddrOrPrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return ipam.ParsePrefix(s)
	}
	a, err := ipam.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// toCore converts the model to a core pool; ok is false while a value is unknown.
func (m *poolResourceModel) toCore(ctx context.Context) (p ipam.Pool, ok bool, err error) {
	if m.ClusterID.IsUnknown() || m.Name.IsUnknown() || m.CIDRs.IsUnknown() || m.Exclude.IsUnknown() ||
		m.Cooldown.IsUnknown() || m.Gateway.IsUnknown() || m.MTU.IsUnknown() || m.Default.IsUnknown() {
		return p, false, nil
	}
	p.ClusterID, p.Name = m.ClusterID.ValueString(), m.Name.ValueString()
	var cidrs, excl []types.String
	m.CIDRs.ElementsAs(ctx, &cidrs, false)
	m.Exclude.ElementsAs(ctx, &excl, false)
	for _, c := range cidrs {
		if c.IsUnknown() {
			return p, false, nil
		}
		pp, err := ipam.ParsePrefix(c.ValueString())
		if err != nil {
			return p, true, &ipam.InvalidError{Field: "cidrs", Msg: err.Error()}
		}
		p.CIDRs = append(p.CIDRs, pp)
	}
	for _, e := range excl {
		if e.IsUnknown() {
			return p, false, nil
		}
		pp, err := parseAddrOrPrefix(e.ValueString())
		if err != nil {
			return p, true, &ipam.InvalidError{Field: "exclude", Msg: err.Error()}
		}
		p.Exclude = append(p.Exclude, pp)
	}
	p.Cooldown = ipam.DefaultPoolCooldown
	if !m.Cooldown.IsNull() {
		if p.Cooldown, err = ipam.ParseDuration(m.Cooldown.ValueString()); err != nil {
			return p, true, &ipam.InvalidError{Field: "cooldown", Msg: err.Error()}
		}
		if p.Cooldown == 0 {
			p.Cooldown = ipam.NoCooldown // "0s": none, not the core's default for an unset one
		}
		p.AsWritten = map[string]string{"cooldown": m.Cooldown.ValueString()}
	}
	if !m.Gateway.IsNull() {
		if p.Gateway, err = ipam.ParseAddr(m.Gateway.ValueString()); err != nil {
			return p, true, &ipam.InvalidError{Field: "gateway", Msg: err.Error()}
		}
	}
	p.MTU = int(m.MTU.ValueInt64())
	p.Default = m.Default.ValueBool()
	return p, true, nil
}

func familyName(f int) string { return fmt.Sprintf("ipv%d", f) }

// fromCore fills the model, keeping the user's spelling of unchanged values.
func (m *poolResourceModel) fromCore(p ipam.Pool) {
	m.ID = types.StringValue(p.ID)
	m.ClusterID = types.StringValue(p.ClusterID)
	m.Name = types.StringValue(p.Name)
	m.CIDRs = prefixList(m.CIDRs, p.CIDRs, false)
	m.Exclude = prefixList(m.Exclude, p.Exclude, true)
	m.Cooldown = sameDuration(m.Cooldown, max(p.Cooldown, 0), p.AsWritten["cooldown"])
	m.MTU = types.Int64Null()
	if p.MTU != 0 {
		m.MTU = types.Int64Value(int64(p.MTU))
	}
	m.Gateway = types.StringNull()
	if p.Gateway.IsValid() {
		m.Gateway = sameAddr(m.Gateway, p.Gateway)
	}
	if m.ForceDestroy.IsNull() || m.ForceDestroy.IsUnknown() {
		m.ForceDestroy = types.BoolValue(false)
	}
	m.Family = types.StringValue(familyName(p.Family))
	m.Size = types.Int64Value(p.Size)
	m.Default = types.BoolValue(p.Default)
}

// prefixList renders prefixes, keeping prior spellings; with hostsAsAddrs a
// /32 or /128 is written as a bare address.
func prefixList(prior types.List, ps []netip.Prefix, hostsAsAddrs bool) types.List {
	var old []types.String
	if !prior.IsNull() && !prior.IsUnknown() {
		_ = prior.ElementsAs(context.Background(), &old, false)
	}
	vals := make([]attr.Value, len(ps))
	for i, p := range ps {
		if i < len(old) && !old[i].IsNull() && !old[i].IsUnknown() {
			if q, err := parseAddrOrPrefix(old[i].ValueString()); err == nil && q == p {
				vals[i] = old[i]
				continue
			}
		}
		if hostsAsAddrs && p.IsSingleIP() {
			vals[i] = types.StringValue(p.Addr().String())
		} else {
			vals[i] = types.StringValue(p.String())
		}
	}
	return types.ListValueMust(types.StringType, vals)
}

// withPlaceholderKeys stands in for a cluster id or name not known yet (a
// reference to a resource still to be created): the blocks can be checked and
// the size computed without them. It reports whether both were known.
func (m *poolResourceModel) withPlaceholderKeys() bool {
	known := true
	if m.ClusterID.IsUnknown() {
		m.ClusterID, known = types.StringValue("unknown"), false
	}
	if m.Name.IsUnknown() {
		m.Name, known = types.StringValue("unknown"), false
	}
	return known
}

func (r *poolResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m poolResourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.Exclude.IsNull() {
		m.Exclude = types.ListValueMust(types.StringType, nil)
	}
	if m.ClusterID.IsNull() || m.Name.IsNull() {
		return
	}
	m.withPlaceholderKeys()
	p, ok, err := m.toCore(ctx)
	if !ok || err != nil {
		return // unknown yet, or malformed (reported by the attribute validators)
	}
	if err := ipam.PreparePool(&p); err != nil {
		addCoreError(&resp.Diagnostics, "Invalid Pool", err)
	}
}

// ModifyPlan shows family and size in the plan, checks the pool's placement
// against the cluster and its other pools when the cluster exists, and
// replaces the pool when its family would change.
func (r *poolResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		var state poolResourceModel
		if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); !resp.Diagnostics.HasError() && !state.ForceDestroy.ValueBool() {
			warnDestroyHeldElsewhere(ctx, r.store, &resp.Diagnostics, "pool", state.ID.ValueString())
		}
		return
	}
	var plan poolResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	keyed := plan
	clusterKnown := keyed.withPlaceholderKeys()
	p, ok, err := keyed.toCore(ctx)
	if !ok || err != nil {
		return
	}
	if err := ipam.PreparePool(&p); err != nil {
		return
	}
	plan.Family = types.StringValue(familyName(p.Family))
	plan.Size = types.Int64Value(p.Size)
	if clusterKnown {
		plan.ID = types.StringValue(p.ID) // known at plan, so allocations can reserve against it
	}
	newBlocks := req.State.Raw.IsNull() // a create, or (below) a change of the blocks
	if !req.State.Raw.IsNull() {
		var state poolResourceModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if state.Family.ValueString() != plan.Family.ValueString() {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("cidrs"))
		}
		newBlocks = !state.CIDRs.Equal(plan.CIDRs)
	}
	if r.store != nil && clusterKnown && req.State.Raw.IsNull() && !currentRun().destroy {
		// A pool of that id that no state of this configuration holds fails
		// the plan, as it would fail the create.
		judgeNew(ctx, r.store, &resp.Diagnostics, path.Root("name"), "pool", operator.ManagedPool, p.ID, "Unable to Create Pool")
	}
	if r.pd != nil && clusterKnown && newBlocks && !currentRun().destroy {
		// Another pool this plan creates or changes, over the same blocks:
		// the database knows neither yet.
		if other, theirs, ours := r.pd.plannedOverlap(p.ClusterID, p.ID, p.CIDRs); other != "" {
			resp.Diagnostics.AddAttributeError(path.Root("cidrs"), "Invalid Pool",
				fmt.Sprintf("%s overlaps %s of pool %s, which this plan also creates or changes: the blocks of two pools of a "+
					"cluster never overlap, and the apply would fail half-way. Give the two pools blocks apart.", ours, theirs, other))
		}
	}
	if r.store != nil && clusterKnown {
		// Every placement problem the database can tell now (a block another
		// pool holds, here or, for public IPv4, in another cluster), all of
		// them; a cluster this same apply creates is no problem.
		check := r.store.CheckPool
		if !req.State.Raw.IsNull() && len(resp.RequiresReplace) == 0 {
			// An update in place: also what the apply's UpdatePool would
			// refuse (an IPv6 pool changed but at its end, addresses in use,
			// held or cooling that would leave the pool), so that the plan
			// does not show a change the apply cannot make.
			check = r.store.CheckPoolUpdate
		}
		err := check(ctx, p)
		if err != nil && ipam.Code(err) == ipam.CodeInvalid {
			for _, e := range problems(err) {
				if !errors.Is(e, ipam.ErrNotFound) {
					addCoreError(&resp.Diagnostics, "Invalid Pool", e)
				}
			}
		}
		uncheckedAtPlan(&resp.Diagnostics, path.Root("cidrs"), "the pool's blocks (their overlaps, and addresses in use that would leave the pool)", err)
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, plan)...)
}

func (r *poolResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer poolIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan poolResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, _, err := plan.toCore(ctx)
	if err == nil {
		p, err = r.store.CreatePool(ctx, p)
	}
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Create Pool", err)
		return
	}
	plan.fromCore(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *poolResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer poolIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics, &req.State)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state poolResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := r.store.GetPool(ctx, state.ID.ValueString())
	if errors.Is(err, ipam.ErrNotFound) || (err == nil && p.Category != ipam.CategoryIPv4 && p.Category != ipam.CategoryIPv6) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Read Pool", err)
		return
	}
	_ = operator.New(r.store).ConfirmPool(ctx, p.ID) // as a cluster's Read does
	state.fromCore(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

func (r *poolResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer poolIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan poolResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, _, err := plan.toCore(ctx)
	if err == nil {
		p, err = r.store.UpdatePool(ctx, p)
	}
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Update Pool", err)
		return
	}
	plan.fromCore(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *poolResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state poolResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.store.DeletePool(ctx, state.ID.ValueString(), state.ForceDestroy.ValueBool()); err != nil && !errors.Is(err, ipam.ErrNotFound) {
		addCoreError(&resp.Diagnostics, "Unable to Delete Pool", err)
	}
}

func (r *poolResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id, ok := poolIdentity.importID(ctx, req, &resp.Diagnostics)
	if !ok {
		return
	}
	importPair(ctx, id, resp, "name", "")
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("force_destroy"), false)...)
	warnObjectManagedElsewhere(ctx, r.store, operator.ManagedPool, id, &resp.Diagnostics)
}
