package provider

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

var (
	_ resource.Resource                   = &addressSetResource{}
	_ resource.ResourceWithConfigure      = &addressSetResource{}
	_ resource.ResourceWithImportState    = &addressSetResource{}
	_ resource.ResourceWithModifyPlan     = &addressSetResource{}
	_ resource.ResourceWithValidateConfig = &addressSetResource{}
)

// NewAddressSetResource is the ipam_address_set resource.
func NewAddressSetResource() resource.Resource { return &addressSetResource{} }

type addressSetResource struct {
	store *ipam.Client
	pd    *providerData
}

type addressSetModel struct {
	ID         types.String `tfsdk:"id"`
	ClusterID  types.String `tfsdk:"cluster_id"`
	OwnerID    types.String `tfsdk:"owner_id"`
	OrgID      types.String `tfsdk:"org_id"`
	EnvID      types.String `tfsdk:"env_id"`
	NodeID     types.String `tfsdk:"node_id"`
	InstanceID types.String `tfsdk:"instance_id"`
	Addresses  types.Map    `tfsdk:"addresses"`
}

type setEntryModel struct {
	Pools   types.List   `tfsdk:"pools"`
	Family  types.String `tfsdk:"family"`
	Address types.String `tfsdk:"address"`
	CIDR    types.String `tfsdk:"cidr"`
	PoolID  types.String `tfsdk:"pool_id"`
}

var setEntryType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"pools":   types.ListType{ElemType: types.StringType},
	"family":  types.StringType,
	"address": types.StringType,
	"cidr":    types.StringType,
	"pool_id": types.StringType,
}}

func (r *addressSetResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_address_set"
}

// IdentitySchema is the resource identity (Terraform 1.12+).
func (r *addressSetResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = addressSetIdentity.schema()
}

// tenantLabel is org_id or env_id of a set: a label for lookups, and with
// the other one the addresses' tenant. An address goes to another tenant
// only after its cooldown (the core refuses to relabel it), so a change
// from one value to another, or its removal, replaces the set: its
// addresses cool down and the new set gets others, as an
// ipam_instance_address does. Set where it was unset (no tenant named),
// it updates in place.
func tenantLabel(name, other, desc string) schema.StringAttribute {
	return schema.StringAttribute{
		MarkdownDescription: desc + " A label for lookups, and with `" + other + "` the addresses' tenant: set where it was " +
			"unset, it updates in place; changed or removed, it replaces the set (its addresses cool down and the new set gets " +
			"others), since an address goes to another tenant only after its cooldown.",
		Optional:   true,
		Validators: []validator.String{validID(name)},
		PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIf(
			func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
				resp.RequiresReplace = req.StateValue.ValueString() != "" && !req.PlanValue.Equal(req.StateValue)
			},
			"a change of tenant replaces the set", "A change of tenant replaces the set.")},
	}
}

func (r *addressSetResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	label := func(name, desc string) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc + " A label for lookups; changes update in place.",
			Optional: true, Validators: []validator.String{validID(name)}}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Several addresses held by one owner, across pools and address families: a microVM with its IPv6 " +
			"overlay address and IPv4 addresses from several pools, say. Each address has a key of your choosing. " +
			"Adding a key allocates only that address, removing a key releases only that address into cooling, and " +
			"changing one key's request replaces only that key's address (unless the address still satisfies the new " +
			"request, as when its pools are reordered: then it stays); no edit ever moves another key's address. All " +
			"keys of one apply are allocated in one transaction: all or nothing.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "`<cluster_id>/<owner_id>`; also the import ID.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown(), idOf{"cluster_id", "owner_id"}},
			},
			"cluster_id": schema.StringAttribute{
				MarkdownDescription: "The cluster whose pools the addresses come from. Changing it replaces the set.",
				Required:            true,
				Validators:          []validator.String{validID("cluster_id")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"owner_id": schema.StringAttribute{
				MarkdownDescription: "Who holds the addresses (an instance, a NIC, a load balancer...). Changing it replaces the set.",
				Required:            true,
				Validators:          []validator.String{validID("owner_id")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"org_id":      tenantLabel("org_id", "env_id", "The organization."),
			"env_id":      tenantLabel("env_id", "org_id", "The environment."),
			"node_id":     label("node_id", "The node."),
			"instance_id": label("instance_id", "The instance."),
			"addresses": schema.MapNestedAttribute{
				MarkdownDescription: "The addresses, by key (1 to 63 letters, digits, `_`, `.`, `-`). Each asks for `pools` " +
					"(tried in order when one is full), or `family` (any address from the cluster's default pool of that family: " +
					"the pool marked `default`, else for IPv6 the instance pool, else the only pool of the family), or `address` " +
					"(exactly this one). Pools listed together must agree on their family and network properties (MTU, gateway).",
				Required: true,
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"pools": schema.ListAttribute{
						MarkdownDescription: "Pool ids to try in order, e.g. `[ipam_pool.a.id, ipam_pool.b.id]`. A key that already " +
							"lives in one of them, or cools there (the set replaced, or the key removed and added again), is tried there " +
							"first: it keeps its address, or takes it back, rather than moving to an earlier pool that has room again. " +
							"A node's blocks (`ipam_node_instance_blocks.n.pool_id`) grow when they are full, up to their `max_blocks`, " +
							"before the key passes to the next pool.",
						ElementType: types.StringType,
						Optional:    true,
						// pools, family and address are judged for all keys
						// at once by ValidateConfig (checkSetEntries).
					},
					"family": schema.StringAttribute{
						MarkdownDescription: "`ipv4` or `ipv6`. Set it to ask for any address of that family; otherwise it reports the family of the address.",
						Optional:            true,
						Computed:            true,
					},
					"address": schema.StringAttribute{
						MarkdownDescription: "Set it to claim exactly this address; otherwise it reports the address allocated.",
						Optional:            true,
						Computed:            true,
					},
					"cidr": schema.StringAttribute{
						MarkdownDescription: "The address as a CIDR: an IPv6 address as its `/128` (as `ipam_instance_address` gives it), an IPv4 address with its pool block's prefix length (as `ipam_env_ipv4`, e.g. `198.51.100.7/24`).",
						Computed:            true,
					},
					"pool_id": schema.StringAttribute{
						MarkdownDescription: "The pool the address came from.",
						Computed:            true,
					},
				}},
			},
		},
	}
}

func (r *addressSetResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if r.pd = providerDataFrom(req.ProviderData, &resp.Diagnostics); r.pd != nil {
		r.store = r.pd.store
	}
}

func (m *addressSetModel) labels() ipam.Owner {
	return ipam.Owner{ID: m.OwnerID.ValueString(), OrgID: m.OrgID.ValueString(), EnvID: m.EnvID.ValueString(),
		NodeID: m.NodeID.ValueString(), InstanceID: m.InstanceID.ValueString()}
}

func entries(ctx context.Context, m types.Map, diags *diag.Diagnostics) map[string]setEntryModel {
	out := map[string]setEntryModel{}
	if m.IsNull() || m.IsUnknown() {
		return out
	}
	diags.Append(m.ElementsAs(ctx, &out, false)...)
	return out
}

func entriesValue(ctx context.Context, es map[string]setEntryModel, diags *diag.Diagnostics) types.Map {
	v, d := types.MapValueFrom(ctx, setEntryType, es)
	diags.Append(d...)
	return v
}

func familyNumber(s string) int {
	switch s {
	case "ipv4":
		return 4
	case "ipv6":
		return 6
	}
	return 0
}

func (e setEntryModel) pools(ctx context.Context) []string {
	var ps []string
	if !e.Pools.IsNull() && !e.Pools.IsUnknown() {
		e.Pools.ElementsAs(ctx, &ps, false)
	}
	return ps
}

// core converts a key's request; planned is the address the plan holds for it.
func (e setEntryModel) core(ctx context.Context, key string, config setEntryModel) (ipam.SetEntry, error) {
	se := ipam.SetEntry{Key: key, Pools: e.pools(ctx), Family: familyNumber(config.Family.ValueString())}
	if !e.Address.IsNull() && !e.Address.IsUnknown() {
		a, err := ipam.ParseAddr(e.Address.ValueString())
		if err != nil {
			return se, &ipam.InvalidError{Field: "addresses", Msg: fmt.Sprintf("key %q: %v", key, err)}
		}
		se.Address = a
		se.Requested = !config.Address.IsNull()
	}
	return se, nil
}

// unchanged reports whether a key's configuration is still satisfied by what
// the key holds, so its address stays: the claimed address is the held one,
// the family is the held one's, and the held pool is still listed.
func unchanged(ctx context.Context, config, held setEntryModel) bool {
	switch {
	case held.Address.IsNull() || held.Address.IsUnknown():
		return false
	case !config.Address.IsNull() && (config.Address.IsUnknown() || !sameAddrString(config.Address.ValueString(), held.Address.ValueString())):
		return false
	case !config.Family.IsNull() && config.Family.ValueString() != held.Family.ValueString():
		return false
	case config.Pools.IsUnknown():
		return false
	}
	if ps := config.pools(ctx); len(ps) > 0 && !slices.Contains(ps, held.PoolID.ValueString()) {
		return false
	}
	if config.Pools.IsNull() && config.Address.IsNull() && config.Family.IsNull() {
		return false
	}
	return true
}

func sameAddrString(a, b string) bool {
	x, err1 := ipam.ParseAddr(a)
	y, err2 := ipam.ParseAddr(b)
	return err1 == nil && err2 == nil && x == y
}

func (r *addressSetResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m addressSetModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var out problemDiags
	checkSetEntries(m.Addresses, &out)
	out.report(&resp.Diagnostics)
}

// checkSetEntries judges every key of addresses and what it asks for (its
// family, its address, its pools: none null, each a pool id, none twice) in
// one pass, keys in order. Its problems share one bound (problemDiags): a set
// of 20,000 bad keys, or a key listing 20,000 bad pool ids, gets five
// diagnostics, the last counting the rest. These checks are not validators
// of the nested attributes, which the framework would run key by key, each
// reporting on its own.
func checkSetEntries(addrs types.Map, out *problemDiags) {
	if addrs.IsNull() || addrs.IsUnknown() {
		return
	}
	elems := addrs.Elements()
	keys := make([]string, 0, len(elems))
	for k := range elems {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pools := listCheck{noun: "pool ids", elem: validPoolID(), unique: true}
	address := validAddr()
	for _, key := range keys {
		at := path.Root("addresses").AtMapKey(key)
		if err := ipam.ValidateSetKey(key); err != nil {
			out.add(at, "Invalid Address Key", "address keys that are not valid", err.Error)
		}
		obj, ok := elems[key].(types.Object)
		if !ok || obj.IsNull() || obj.IsUnknown() {
			continue
		}
		// The attributes as they are (not obj.As, whose reflection costs
		// more than the checks).
		var e setEntryModel
		attrs := obj.Attributes()
		e.Pools, _ = attrs["pools"].(types.List)
		e.Family, _ = attrs["family"].(types.String)
		e.Address, _ = attrs["address"].(types.String)
		if e.Pools.IsNull() && e.Family.IsNull() && e.Address.IsNull() {
			out.add(at, "Empty Address Request", "keys asking for nothing", func() string {
				return "Key " + key + " asks for nothing: set pools, family or address."
			})
		}
		if f := e.Family; !f.IsNull() && !f.IsUnknown() && familyNumber(f.ValueString()) == 0 {
			fp := at.AtName("family")
			out.add(fp, "Invalid "+fp.String(), "family values that are not ipv4 or ipv6", func() string {
				return fmt.Sprintf("%s value must be one of: \"ipv4\", \"ipv6\"; got %q", fp, truncateForMsg(f.ValueString()))
			})
		}
		if a := e.Address; !a.IsNull() && !a.IsUnknown() {
			if err := address.check(a.ValueString()); err != nil {
				ap := at.AtName("address")
				out.add(ap, "Invalid "+ap.String(), "addresses that are not plain IP addresses", err.Error)
			}
		}
		if ps := e.Pools; !ps.IsNull() && !ps.IsUnknown() {
			pp := at.AtName("pools")
			if len(ps.Elements()) == 0 {
				out.add(pp, "Invalid "+pp.String(), "empty pools lists", func() string {
					return fmt.Sprintf("%s lists no pool: list at least one pool id, or leave pools unset and set family or address", pp)
				})
			}
			pools.check(pp, ps.Elements(), out)
		}
	}
}

// ModifyPlan keeps the computed values of unchanged keys, reserves addresses
// for new or changed keys, and checks that pools listed together agree on
// their network properties.
func (r *addressSetResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan, config addressSetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() || plan.Addresses.IsUnknown() {
		return
	}
	held := map[string]setEntryModel{}
	if !req.State.Raw.IsNull() {
		var state addressSetModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if state.ClusterID.Equal(plan.ClusterID) && state.OwnerID.Equal(plan.OwnerID) {
			held = entries(ctx, state.Addresses, &resp.Diagnostics)
		}
	}
	cfg := entries(ctx, config.Addresses, &resp.Diagnostics)
	planned := entries(ctx, plan.Addresses, &resp.Diagnostics)
	keysKnown := !plan.ClusterID.IsUnknown() && !plan.OwnerID.IsUnknown()
	if gens := replacedMembers(ctx, req); len(gens) > 0 && r.store != nil && keysKnown && !currentRun().destroy {
		// The create half of a replacement: the members the replaced
		// object holds, if still at its generations, are marked, so that
		// the create takes each over (keeping its address) instead of
		// refusing it as another configuration's. Nothing to mark (another
		// cluster or set, a released member) is no error.
		_ = r.store.MarkSetReplacement(ctx, plan.ClusterID.ValueString(), plan.OwnerID.ValueString(), gens, r.pd.markTTL())
	}
	keys := make([]string, 0, len(planned))
	for k := range planned {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// The problems of all keys share one bound each (problemDiags), and a
	// pool listed by many keys is read once. Every key's pools are judged
	// before any key is held: a plan that fails on one key's pools leaves
	// no hold behind for the others.
	var disagree, refused problemDiags
	refused.warn = true
	pools := map[string]*ipam.Pool{}
	for _, key := range keys {
		if h, ok := held[key]; ok && unchanged(ctx, cfg[key], h) {
			// Held as configured: its address stays, whatever its pools
			// became since (an MTU changed, say), as the apply judges only
			// the keys it adds.
			continue
		}
		r.checkPoolsAgree(ctx, key, cfg[key], pools, &disagree)
	}
	for _, key := range keys {
		c, e := cfg[key], planned[key]
		if h, ok := held[key]; ok && unchanged(ctx, c, h) {
			e.Address, e.CIDR, e.PoolID, e.Family = h.Address, h.CIDR, h.PoolID, h.Family
			planned[key] = e
			continue
		}
		e.CIDR, e.PoolID = types.StringUnknown(), types.StringUnknown()
		if c.Family.IsNull() {
			e.Family = types.StringUnknown()
		}
		if c.Address.IsNull() {
			e.Address = types.StringUnknown()
		}
		if r.store != nil && keysKnown && !c.Pools.IsUnknown() && !resp.Diagnostics.HasError() && disagree.len() == 0 {
			_, changed := held[key]
			if m, ok := r.reserve(ctx, plan, key, c, changed, &resp.Diagnostics, &refused); ok {
				e.Address = sameAddr(c.Address, m.Address)
				e.CIDR = types.StringValue(memberCIDR(m.CIDR()))
				e.PoolID = types.StringValue(m.PoolID)
				e.Family = types.StringValue(familyName(m.Family))
			}
		} else if r.pd != nil && !keysKnown {
			r.pd.warnOnce(&resp.Diagnostics, reasonUnknownID, "Some Addresses Known After Apply",
				"A new address's owner or pool depends on values known only after apply, so it shows as \"(known after apply)\".")
		}
		planned[key] = e
	}
	disagree.report(&resp.Diagnostics)
	refused.report(&resp.Diagnostics)
	plan.Addresses = entriesValue(ctx, planned, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.Plan.Set(ctx, plan)...)
}

// reserve takes the plan-time hold of one new or changed key (changed: the
// set's state holds the key); a refusal is a warning in refused.
func (r *addressSetResource) reserve(ctx context.Context, plan addressSetModel, key string, c setEntryModel, changed bool, diags *diag.Diagnostics, refused *problemDiags) (ipam.SetMember, bool) {
	pd := r.pd
	if pd.holdsOff(diags) {
		return ipam.SetMember{}, false
	}
	se, err := c.core(ctx, key, c)
	if err != nil {
		return ipam.SetMember{}, false
	}
	m, err := r.store.ReserveSetEntry(ctx, plan.ClusterID.ValueString(), plan.labels(), se, pd.reservationTTL)
	var oc *ipam.OwnerConflictError
	var hl *ipam.HoldLostError
	switch {
	case err == nil:
		pd.tookHold(m.PoolID)
		return m, true
	case errors.As(err, &hl) || (errors.As(err, &oc) && m.Lost != nil):
		// The key's earlier plan held an address that another owner took,
		// or another configuration took the key once that hold expired:
		// the plan shows the lost address again, as for a single address,
		// so that a saved plan that showed it, applied now, passes
		// Terraform's re-plan and fails at create, writing nothing. No
		// hold is taken; the next plan takes one.
		lost := m.Lost
		if hl != nil {
			lost = &hl.Lost
		}
		if lm, ok := r.memberAt(ctx, lost.Address, lost.PoolID); ok {
			next := "Run terraform plan again: the next plan reserves a new address."
			if hl == nil {
				next = "The key is managed by that configuration now: declare it in one configuration only (plans here " +
					"fail with the same error until then)."
			}
			refused.add(path.Root("addresses").AtMapKey(key), "Earlier Planned Address Was Taken", "keys whose earlier planned address was taken", func() string {
				return "An earlier plan held " + lost.Address.String() + " for key " + key + ", but that hold expired and " +
					lost.TakenBy + " took it at " + lost.At.UTC().Format(time.RFC3339) + " (" + err.Error() + "). If you are " +
					"applying a saved plan, its apply fails for this set and allocates nothing. " + next
			})
			return lm, true
		}
	case errors.As(err, &oc) && oc.Held && oc.Actor == r.store.Actor():
		// A plan of this actor in another configuration holds the key:
		// shown, as for a single address (heldElsewhere), with its pool's
		// block, so that a saved plan made there passes the re-plan here.
		if held, perr := netip.ParseAddr(oc.Address); perr != nil {
			break
		} else if m, ok := r.memberAt(ctx, held, oc.PoolID); ok {
			refused.add(path.Root("addresses").AtMapKey(key), "Address Is Managed Elsewhere", "keys held by another configuration's plan", func() string {
				return heldElsewhere("key "+key, err)
			})
			return m, true
		}
	case errors.As(err, &oc) && oc.Actor == r.store.Actor() && changed:
		// The key still holds its old address: a changed key released at
		// apply. (A new key that another configuration manages is a
		// refusal, below.)
	case ipam.WriteRefused(err):
		pd.warnOnce(diags, reasonReadOnly, "Addresses Known After Apply",
			"The database refused the plan-time hold ("+err.Error()+"), so new addresses show as \"(known after apply)\".")
	case ipam.Code(err) == ipam.CodeExhausted:
		pd.warnOnce(diags, reasonExhausted, "Some Addresses Known After Apply", exhaustedAtPlan(pd, err))
	case errors.Is(err, ipam.ErrNotFound):
		pd.warnOnce(diags, reasonExhausted, "Some Addresses Known After Apply",
			"No address could be reserved at plan time ("+err.Error()+"); the apply tries again after the other changes of this plan.")
	case ipam.Code(err) == ipam.CodeInvalid && isMissingPool(err):
		pd.warnOnce(diags, reasonNoPool, "Some Addresses Known After Apply",
			"A pool of this set does not exist yet ("+err.Error()+"), so its addresses show as \"(known after apply)\". "+
				"If this apply creates it, later plans show them; if nothing creates it, the apply fails: check the pool ids, "+
				"and that each claimed address lies in one of the cluster's pools.")
	case isRefusal(err):
		// As for a single address: a warning, so that a conflict of one new
		// member never fails the plan terraform destroy runs first.
		refused.add(path.Root("addresses").AtMapKey(key), "Address Cannot Be Reserved", "keys whose address cannot be reserved", func() string {
			return "No address can be reserved for key " + key + " at plan time: " + err.Error() +
				". It shows as \"(known after apply)\"; applying it fails with the same error unless that is resolved first." +
				withHint(err)
		})
	default:
		addCoreError(diags, "Unable to Reserve Address "+key, err)
	}
	return ipam.SetMember{}, false
}

// memberAt is a member at addr in pool poolID, as a plan shows one it does
// not hold: another configuration's plan holds it (as a conflict names
// it), or the key's earlier plan lost it. Its pool's family and the block
// holding it are read from the pool.
func (r *addressSetResource) memberAt(ctx context.Context, addr netip.Addr, poolID string) (ipam.SetMember, bool) {
	if !addr.IsValid() || poolID == "" {
		return ipam.SetMember{}, false
	}
	p, err := r.store.GetPool(ctx, poolID)
	if err != nil {
		return ipam.SetMember{}, false
	}
	m := ipam.SetMember{Allocation: ipam.Allocation{Address: addr, PoolID: poolID}, Family: p.Family}
	for _, c := range p.CIDRs {
		if c.Contains(addr) {
			m.Block = c
		}
	}
	return m, m.Block.IsValid()
}

func isMissingPool(err error) bool { return errors.Is(err, ipam.ErrPoolNotFound) }

// checkPoolsAgree: pools listed for one key must agree on family, MTU and
// gateway (Pool.AgreesWith, the rule the core applies at apply), checked at
// plan time too when reservations are off.
// Pools are read once per plan (pools caches them; nil: not there yet).
func (r *addressSetResource) checkPoolsAgree(ctx context.Context, key string, c setEntryModel, pools map[string]*ipam.Pool, out *problemDiags) {
	ids := c.pools(ctx)
	if r.store == nil || len(ids) < 2 || c.Pools.IsUnknown() {
		return
	}
	var first ipam.Pool
	for i, id := range ids {
		p, seen := pools[id]
		if !seen {
			if got, err := r.store.GetPool(ctx, id); err == nil {
				p = &got
			}
			pools[id] = p
		}
		if p == nil {
			return // created in this apply: checked when it exists
		}
		if i == 0 {
			first = *p
			continue
		}
		if err := first.AgreesWith(*p); err != nil {
			out.add(path.Root("addresses").AtMapKey(key).AtName("pools"), "Pools Disagree on Network Properties", "keys listing pools that disagree", func() string {
				return "P" + err.Error()[1:] + "."
			})
			return
		}
	}
}

// fill writes the members held in the database into the model: every key
// that is still held, with its request as stored (so an import reads back
// the configuration) and its address.
func fill(ctx context.Context, m *addressSetModel, members []ipam.SetMember, diags *diag.Diagnostics) {
	prior := entries(ctx, m.Addresses, diags)
	out := map[string]setEntryModel{}
	for _, mem := range members {
		e := setEntryModel{Pools: types.ListNull(types.StringType), Family: types.StringValue(familyName(mem.Family))}
		if p, ok := prior[mem.Key]; ok {
			e.Address = p.Address
		}
		if len(mem.Request.Pools) > 0 {
			e.Pools, _ = types.ListValueFrom(ctx, types.StringType, mem.Request.Pools)
		}
		e.Address = sameAddr(e.Address, mem.Address)
		e.CIDR = types.StringValue(memberCIDR(mem.CIDR()))
		e.PoolID = types.StringValue(mem.PoolID)
		out[mem.Key] = e
	}
	m.Addresses = entriesValue(ctx, out, diags)
	if len(members) > 0 {
		l := members[0].Owner
		m.OrgID, m.EnvID, m.NodeID, m.InstanceID = optString(l.OrgID), optString(l.EnvID), optString(l.NodeID), optString(l.InstanceID)
	}
}

// replacedMembers: in the plan of a create, the member generations of the
// set object it replaces (see replacedGeneration), or nil.
func replacedMembers(ctx context.Context, req resource.ModifyPlanRequest) map[string]int64 {
	if !req.State.Raw.IsNull() || req.Private == nil {
		return nil
	}
	return memberGenerations(ctx, req.Private)
}

// setEdit is what an apply changes of a set's keys: removed, added (a key
// whose address changes is both), restated (a new request its address
// still satisfies), and whether the labels change.
type setEdit struct {
	remove, add, restate []string
	relabel              bool
}

// apply runs one set change: keys to release, keys to allocate (the
// planned addresses claimed exactly) and keys whose new request is only
// stored. It returns the members the set holds afterwards, or nil when it
// failed.
func (r *addressSetResource) apply(ctx context.Context, plan *addressSetModel, configMap types.Map, ed setEdit, diags *diag.Diagnostics) []ipam.SetMember {
	planned := entries(ctx, plan.Addresses, diags)
	cfg := entries(ctx, configMap, diags)
	ch := ipam.SetChange{ClusterID: plan.ClusterID.ValueString(), Owner: plan.labels(), Remove: ed.remove, Relabel: ed.relabel}
	fromHold := false
	for _, key := range slices.Concat(ed.add, ed.restate) {
		se, err := planned[key].core(ctx, key, cfg[key])
		if err != nil {
			addCoreError(diags, "Invalid Address Set", err)
			return nil
		}
		if slices.Contains(ed.restate, key) {
			ch.Restate = append(ch.Restate, se)
			continue
		}
		fromHold = fromHold || (se.Address.IsValid() && !se.Requested)
		ch.Add = append(ch.Add, se)
	}
	members, err := r.store.ApplySet(ctx, ch)
	if err != nil {
		if fromHold && isTaken(err) {
			diags.AddAttributeError(path.Root("addresses"), "Planned Address No Longer Available",
				"A plan-time hold of this set expired and its address was taken before apply ("+err.Error()+"). "+
					"Nothing was changed: run terraform plan again.")
			return nil
		}
		addCoreError(diags, "Unable to Apply Address Set", err)
		return nil
	}
	fill(ctx, plan, members, diags)
	if members == nil {
		members = []ipam.SetMember{}
	}
	return members
}

func (r *addressSetResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer addressSetIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan, config addressSetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var add []string
	for k := range entries(ctx, plan.Addresses, &resp.Diagnostics) {
		add = append(add, k)
	}
	sort.Strings(add)
	members := r.apply(ctx, &plan, config.Addresses, setEdit{add: add}, &resp.Diagnostics)
	if members == nil {
		return
	}
	resp.Diagnostics.Append(setMemberGenerations(ctx, resp.Private, members)...)
	plan.ID = types.StringValue(plan.ClusterID.ValueString() + "/" + plan.OwnerID.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, keepLabels(plan, config))...)
}

// keepLabels keeps the configured labels (fill reads them from the database).
func keepLabels(m, config addressSetModel) addressSetModel {
	m.OrgID, m.EnvID, m.NodeID, m.InstanceID = config.OrgID, config.EnvID, config.NodeID, config.InstanceID
	return m
}

func (r *addressSetResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer addressSetIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics, &req.State)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state addressSetModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	members, err := r.store.GetSet(ctx, state.ClusterID.ValueString(), state.OwnerID.ValueString())
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Read Address Set", err)
		return
	}
	had := len(entries(ctx, state.Addresses, &resp.Diagnostics))
	if len(members) == 0 && (had > 0 || state.Addresses.IsNull()) {
		resp.State.RemoveResource(ctx) // every address was released out of band (or nothing to import)
		return
	}
	fill(ctx, &state, members, &resp.Diagnostics)
	resp.Diagnostics.Append(setMemberGenerations(ctx, resp.Private, members)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

func (r *addressSetResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer addressSetIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan, state, config addressSetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() {
		return
	}
	held := entries(ctx, state.Addresses, &resp.Diagnostics)
	want := entries(ctx, plan.Addresses, &resp.Diagnostics)
	var remove, add, restate []string
	for k, h := range held {
		w, ok := want[k]
		switch {
		case !ok:
			remove = append(remove, k)
		case !w.Address.Equal(h.Address) || !w.PoolID.Equal(h.PoolID):
			remove, add = append(remove, k), append(add, k) // this key's request changed: replace only it
		case !w.Pools.Equal(h.Pools):
			restate = append(restate, k) // a new request its address still satisfies: stored, the address stays
		}
	}
	for k := range want {
		if _, ok := held[k]; !ok {
			add = append(add, k)
		}
	}
	sort.Strings(remove)
	sort.Strings(add)
	sort.Strings(restate)
	// Labels and members change in one transaction: all or nothing.
	relabel := !plan.OrgID.Equal(state.OrgID) || !plan.EnvID.Equal(state.EnvID) || !plan.NodeID.Equal(state.NodeID) || !plan.InstanceID.Equal(state.InstanceID)
	members := r.apply(ctx, &plan, config.Addresses, setEdit{remove: remove, add: add, restate: restate, relabel: relabel}, &resp.Diagnostics)
	if members == nil {
		return
	}
	resp.Diagnostics.Append(setMemberGenerations(ctx, resp.Private, members)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, keepLabels(plan, config))...)
}

func (r *addressSetResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state addressSetModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// The members at the generations this state read: none that the create
	// half of a replacement took over. A state written before generations
	// were kept releases the whole set.
	var err error
	if gens := memberGenerations(ctx, req.Private); gens != nil {
		err = r.store.ReleaseSetAt(ctx, state.ClusterID.ValueString(), state.OwnerID.ValueString(), gens)
	} else {
		err = r.store.ReleaseSet(ctx, state.ClusterID.ValueString(), state.OwnerID.ValueString())
	}
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Release Address Set", err)
	}
}

// ImportState takes "<cluster_id>/<owner_id>": the whole set of that owner.
func (r *addressSetResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id, ok := addressSetIdentity.importID(ctx, req, &resp.Diagnostics)
	if !ok {
		return
	}
	importPair(ctx, id, resp, "owner_id", "")
	if !resp.Diagnostics.HasError() {
		warnObjectManagedElsewhere(ctx, r.store, operator.ManagedSet, id, &resp.Diagnostics)
	}
}

// memberCIDR is a member's cidr: an IPv6 address as its /128, as
// ipam_instance_address and ipam_node_address give it (the instance's overlay
// address, not the /64 it came from); an IPv4 address with its pool block's
// length, as ipam_env_ipv4 gives it.
func memberCIDR(p netip.Prefix) string {
	if p.Addr().Is6() {
		return netip.PrefixFrom(p.Addr(), 128).String()
	}
	return p.String()
}
