package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
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
	_ resource.Resource                   = &clusterResource{}
	_ resource.ResourceWithConfigure      = &clusterResource{}
	_ resource.ResourceWithImportState    = &clusterResource{}
	_ resource.ResourceWithValidateConfig = &clusterResource{}
	_ resource.ResourceWithModifyPlan     = &clusterResource{}
)

// NewClusterResource is the ipam_cluster resource.
func NewClusterResource() resource.Resource { return &clusterResource{} }

type clusterResource struct {
	store *ipam.Client
	pd    *providerData
}

type clusterResourceModel struct {
	ID               types.String `tfsdk:"id"`
	Name             types.String `tfsdk:"name"`
	Prefix           types.String `tfsdk:"prefix"`
	NodePrefix       types.String `tfsdk:"node_prefix"`
	InstancePrefix   types.String `tfsdk:"instance_prefix"`
	NodeCooldown     types.String `tfsdk:"node_cooldown"`
	InstanceCooldown types.String `tfsdk:"instance_cooldown"`
	GatewayIPv6      types.String `tfsdk:"gateway_ipv6"`
	MTU              types.Int64  `tfsdk:"mtu"`
	DNSServers       types.List   `tfsdk:"dns_servers"`
	ForceDestroy     types.Bool   `tfsdk:"force_destroy"`
	NetworkRevision  types.String `tfsdk:"network_revision"`
}

func (r *clusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster"
}

// IdentitySchema is the resource identity (Terraform 1.12+).
func (r *clusterResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = clusterIdentity.schema()
}

func (r *clusterResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A cluster: its IPv6 prefix, carved into a node sub-prefix (WireGuard overlay addresses of the nodes) " +
			"and an instance sub-prefix (one address per microVM) that never overlap, with the cooldowns that keep a released " +
			"address out of use before it is handed out again, and the WorkloadSpec network settings handed to instances.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The cluster's name.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the cluster, unique in the database. Changing it replaces the cluster.",
				Required:            true,
				Validators:          []validator.String{validID("name")},
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"prefix": schema.StringAttribute{
				MarkdownDescription: "The cluster's IPv6 prefix: at least a `/64`, ideally a `/56` or `/48`. Prefixes of two clusters never overlap. Changing it replaces the cluster, which its active addresses prevent: while any is active, the plan fails naming them (destroy their resources first, or move them to a new cluster). The replacement's destroy deletes the cluster's pools: its `id` is unknown until the apply, so that an `ipam_pool` (or node blocks) whose `cluster_id` refers to it is replaced with it, and the plan warns of every pool it deletes.",
				Required:            true,
				Validators:          []validator.String{validClusterPrefix()},
				PlanModifiers:       []planmodifier.String{requiresReplaceIfPrefixChanges()},
			},
			"node_prefix": schema.StringAttribute{
				MarkdownDescription: "Sub-prefix the node overlay addresses come from. Defaults to sub-prefix #0 of length " +
					"max(64, cluster length + 1): `2001:db8:abcd::/48` gives `2001:db8:abcd::/64`. An explicit value must lie inside " +
					"`prefix`, must not overlap `instance_prefix`, and may be small. Changing it replaces the cluster.",
				Optional:   true,
				Computed:   true,
				Validators: []validator.String{validIPv6Prefix()},
			},
			"instance_prefix": schema.StringAttribute{
				MarkdownDescription: "Sub-prefix the instance addresses come from. Defaults to sub-prefix #1 of length " +
					"max(64, cluster length + 1): `2001:db8:abcd::/48` gives `2001:db8:abcd:1::/64`. Changing it replaces the cluster.",
				Optional:   true,
				Computed:   true,
				Validators: []validator.String{validIPv6Prefix()},
			},
			"node_cooldown": schema.StringAttribute{
				MarkdownDescription: "How long a released node address stays out of use (default `\"30d\"`). Go duration syntax plus days, e.g. `\"30d\"`, `\"720h\"`.",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString("30d"),
				Validators:          []validator.String{validDuration(0)},
			},
			"instance_cooldown": schema.StringAttribute{
				MarkdownDescription: "How long a released instance address stays out of use (default `\"24h\"`, at least `\"1h\"`).",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString("24h"),
				Validators:          []validator.String{validDuration(ipam.MinInstanceCooldown)},
			},
			"gateway_ipv6": schema.StringAttribute{
				MarkdownDescription: "Gateway handed to instances in their WorkloadSpec network block (default `fe80::1`, link-local on the host side). Never handed out as an address.",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(ipam.DefaultGatewayIPv6),
				Validators:          []validator.String{validIPv6Addr()},
			},
			"mtu": schema.Int64Attribute{
				MarkdownDescription: "MTU handed to instances (default `1420`, the WireGuard overlay's; between 1280 and 65535).",
				Optional:            true,
				Computed:            true,
				Default:             int64default.StaticInt64(ipam.DefaultMTU),
				Validators:          []validator.Int64{int64validator.Between(1280, 65535)},
			},
			"dns_servers": schema.ListAttribute{
				MarkdownDescription: "IPv6 DNS servers handed to instances (default none).",
				ElementType:         types.StringType,
				Optional:            true,
				Computed:            true,
				Default:             listdefault.StaticValue(types.ListValueMust(types.StringType, []attr.Value{})),
				Validators:          []validator.List{listCheck{noun: "DNS servers", elem: validIPv6Addr(), unique: true}},
			},
			"network_revision": schema.StringAttribute{
				MarkdownDescription: "Changes, in the plan, whenever `gateway_ipv6`, `mtu` or `dns_servers` change (a digest of them). " +
					"Give it to each `ipam_instance_address` of the cluster as `cluster_network_revision`, so that a change of " +
					"these settings updates every instance's network block, and the WorkloadSpec outputs built from it, in " +
					"the same apply.",
				Computed: true,
			},
			"force_destroy": schema.BoolAttribute{
				MarkdownDescription: "Default `false`. Without it, a destroy fails only while the cluster holds an active address; otherwise it drops plan-time holds " +
					"and leaves the addresses inside their cooldown as tombstones, which a cluster created later over them inherits. " +
					"With `true`, active addresses (meant for ones no Terraform state manages) are released into their cooldown first, and plan-time holds are dropped all the same; " +
					"an address another configuration's state holds is released too, and that configuration allocates again at its next apply. " +
					"A destroy reads it from the state, as for any resource: set it, apply (an in-place update that changes nothing else), then destroy.",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
		},
	}
}

func (r *clusterResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if r.pd = providerDataFrom(req.ProviderData, &resp.Diagnostics); r.pd != nil {
		r.store = r.pd.store
	}
}

// ValidateConfig checks the sub-prefixes against the cluster prefix as soon as
// the values are known, so overlapping or outside prefixes fail at plan.
func (r *clusterResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m clusterResourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.Prefix.IsNull() || m.Prefix.IsUnknown() || m.NodePrefix.IsUnknown() || m.InstancePrefix.IsUnknown() {
		return
	}
	c, err := m.plannedSubPrefixes()
	if err != nil {
		return // the attribute validators report malformed values
	}
	err = ipam.ValidateSubPrefixes(c.Prefix, c.NodePrefix, c.InstancePrefix)
	switch {
	case err == nil:
	case c.NodePrefix.Overlaps(c.InstancePrefix) && m.NodePrefix.IsNull() != m.InstancePrefix.IsNull():
		// One of the two is the default: the error names the one written,
		// and says which default it meets.
		set, def, setP, defP := "instance_prefix", "node_prefix", c.InstancePrefix, c.NodePrefix
		if m.InstancePrefix.IsNull() {
			set, def, setP, defP = def, set, defP, setP
		}
		resp.Diagnostics.AddAttributeError(path.Root(set), "Invalid Cluster Sub-Prefix",
			fmt.Sprintf("%s %s overlaps the default %s, %s (carved from the cluster prefix %s); the two must not overlap. "+
				"Set %s to a sub-prefix of %s that does not overlap %s, or choose another %s.",
				set, setP, def, defP, c.Prefix, def, c.Prefix, setP, set))
	default:
		addCoreError(&resp.Diagnostics, "Invalid Cluster Sub-Prefix", err)
	}
}

// plannedSubPrefixes parses the prefixes and fills the defaults of the unset ones.
func (m *clusterResourceModel) plannedSubPrefixes() (ipam.Cluster, error) {
	var c ipam.Cluster
	var err error
	if c.Prefix, err = ipam.ParsePrefix(m.Prefix.ValueString()); err != nil {
		return c, err
	}
	if err := ipam.ValidateClusterPrefix(c.Prefix); err != nil {
		return c, err
	}
	if !m.NodePrefix.IsNull() && !m.NodePrefix.IsUnknown() {
		if c.NodePrefix, err = ipam.ParsePrefix(m.NodePrefix.ValueString()); err != nil {
			return c, err
		}
	}
	if !m.InstancePrefix.IsNull() && !m.InstancePrefix.IsUnknown() {
		if c.InstancePrefix, err = ipam.ParsePrefix(m.InstancePrefix.ValueString()); err != nil {
			return c, err
		}
	}
	return c, c.ApplyDefaults()
}

// ModifyPlan shows the carved sub-prefixes in the plan and replaces the
// cluster when they change (including when a new prefix changes the defaults).
// overlapsOwnClusters reports whether the one cluster other than id whose
// prefix overlaps prefix has exactly that prefix and was created by this
// configuration (its origin): a renamed cluster, which this apply destroys
// before it creates the new one. Any other overlap (a new cluster of this
// configuration overlapping one it has) fails the plan.
func (r *clusterResource) overlapsOwnClusters(ctx context.Context, id string, prefix netip.Prefix) bool {
	others, err := r.store.OverlappingClusters(ctx, id, prefix)
	if err != nil || len(others) != 1 || others[0].Prefix != prefix || r.store.Origin() == "" {
		return false
	}
	managers, err := operator.New(r.store).Managers(ctx, operator.ManagedCluster, []string{others[0].ID})
	return err == nil && managers[others[0].ID] == r.store.Origin()
}

func (r *clusterResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		var state clusterResourceModel
		if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); !resp.Diagnostics.HasError() && !state.ForceDestroy.ValueBool() {
			warnDestroyHeldElsewhere(ctx, r.store, &resp.Diagnostics, "cluster", state.ID.ValueString())
		}
		return
	}
	var plan, config clusterResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() || plan.Prefix.IsUnknown() || config.NodePrefix.IsUnknown() || config.InstancePrefix.IsUnknown() {
		return
	}
	if !plan.Name.IsUnknown() {
		plan.ID = plan.Name // known at plan, so address resources can reserve against it
	}
	plan.NetworkRevision = plannedNetworkRevision(ctx, plan)
	config.Prefix = plan.Prefix
	c, err := config.plannedSubPrefixes()
	if err != nil {
		return
	}
	var state *clusterResourceModel
	if !req.State.Raw.IsNull() {
		state = &clusterResourceModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
	}
	if r.store != nil && !plan.Name.IsUnknown() && !currentRun().destroy && state == nil {
		// A cluster of that name that no state of this configuration holds
		// fails the plan, as it would fail the create.
		replaced := judgeNew(ctx, r.store, &resp.Diagnostics, path.Root("name"), "cluster", operator.ManagedCluster, plan.Name.ValueString(), "Unable to Create Cluster")
		if resp.Diagnostics.HasError() {
			return
		}
		if replaced {
			// The create of a replacement under the same name (a new
			// prefix, or -replace): its id is unknown until the apply, so
			// that what takes cluster_id from it (its pools, node blocks,
			// addresses) is replaced with it, as its destroy deletes them.
			plan.ID = types.StringUnknown()
		}
	}
	if r.store != nil && !plan.Name.IsUnknown() && !currentRun().destroy &&
		(state == nil || !state.Prefix.Equal(plan.Prefix)) {
		// Another cluster's overlapping prefix fails the plan, as it would
		// fail the apply (a destroy's preliminary plan is left alone).
		err := r.store.CheckClusterPrefix(ctx, plan.Name.ValueString(), c.Prefix)
		if ipam.Code(err) == ipam.CodeInvalid {
			if state == nil && r.overlapsOwnClusters(ctx, plan.Name.ValueString(), c.Prefix) {
				// The create of a replacement (a renamed cluster): the old
				// one is this configuration's, with the same prefix, and is
				// gone before the create.
				resp.Diagnostics.AddAttributeWarning(path.Root("prefix"), "Prefix Overlaps a Cluster of This Configuration",
					err.Error()+". That cluster is this configuration's, with the same prefix: if this apply destroys it "+
						"before creating this one (it is being replaced, its name having changed, or it was removed from the "+
						"configuration), the create succeeds; otherwise (create_before_destroy, or the cluster is kept) the apply "+
						"fails with this error.")
			} else {
				addCoreError(&resp.Diagnostics, "Invalid Cluster", err)
				return
			}
		}
		uncheckedAtPlan(&resp.Diagnostics, path.Root("prefix"), "whether the prefix overlaps another cluster's", err)
	}
	for _, x := range []struct {
		name     string
		value    netip.Prefix
		dst      *types.String
		config   types.String
		selectSt func(*clusterResourceModel) types.String
	}{
		{"node_prefix", c.NodePrefix, &plan.NodePrefix, config.NodePrefix, func(m *clusterResourceModel) types.String { return m.NodePrefix }},
		{"instance_prefix", c.InstancePrefix, &plan.InstancePrefix, config.InstancePrefix, func(m *clusterResourceModel) types.String { return m.InstancePrefix }},
	} {
		// The configured spelling if there is one (the plan must match it),
		// else the state's when it means the same.
		prior := x.config
		if prior.IsNull() && state != nil {
			prior = x.selectSt(state)
		}
		*x.dst = samePrefix(prior, x.value)
		if state != nil {
			if p, err := ipam.ParsePrefix(x.selectSt(state).ValueString()); err != nil || p != x.value {
				resp.RequiresReplace = append(resp.RequiresReplace, path.Root(x.name))
			}
		}
	}
	if state != nil && (len(resp.RequiresReplace) > 0 || !state.Prefix.Equal(plan.Prefix)) && state.Name.Equal(plan.Name) {
		r.strandedByReplacement(ctx, *state, &resp.Diagnostics)
		// Warned here: Terraform does not show the diagnostics of the
		// plan of a replacement's create.
		r.poolsDeletedByReplacement(ctx, state.ID.ValueString(), &resp.Diagnostics)
	}
	if r.store != nil && state != nil && len(resp.RequiresReplace) == 0 && state.Prefix.Equal(plan.Prefix) && !currentRun().destroy &&
		!plan.GatewayIPv6.IsUnknown() && !plan.GatewayIPv6.IsNull() && !plan.GatewayIPv6.Equal(state.GatewayIPv6) {
		// A new gateway that an owner holds: the update's refusal, at plan.
		if gw, err := ipam.ParseAddr(plan.GatewayIPv6.ValueString()); err == nil {
			err := r.store.CheckGateway(ctx, state.Name.ValueString(), gw)
			if ipam.Code(err) == ipam.CodeInvalid {
				addCoreError(&resp.Diagnostics, "Invalid Cluster", err)
			}
			uncheckedAtPlan(&resp.Diagnostics, path.Root("gateway_ipv6"), "whether an owner holds the new gateway", err)
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, plan)...)
}

// strandedByReplacement says, at plan, what replacing the cluster (a new
// prefix or sub-prefix) would do to its active addresses: the destroy half
// is refused while any is active, so without force_destroy the plan fails
// naming them and what to do; with it, a warning says they are released
// into their cooldown while the resources that hold them keep them. A
// destroy's preliminary plan is left alone, and so is a failed look-up
// (the apply decides).
func (r *clusterResource) strandedByReplacement(ctx context.Context, state clusterResourceModel, diags *diag.Diagnostics) {
	if r.store == nil || currentRun().destroy {
		return
	}
	u, err := operator.New(r.store).PoolUsage(ctx, state.ID.ValueString())
	if err != nil {
		return
	}
	var active int64
	var per []string
	for _, c := range u.Categories {
		if c.Active > 0 {
			active += c.Active
			per = append(per, fmt.Sprintf("%d %s", c.Active, c.Category))
		}
	}
	if active == 0 {
		return
	}
	what := fmt.Sprintf("Changing the prefix (or a sub-prefix) of cluster %q replaces it, and it holds %d active %s (%s). ",
		state.ID.ValueString(), active, map[bool]string{true: "address", false: "addresses"}[active == 1], strings.Join(per, ", "))
	if state.ForceDestroy.ValueBool() {
		diags.AddAttributeWarning(path.Root("prefix"), "Replacing the Cluster Releases Its Addresses",
			what+"force_destroy is true, so the replacement releases them into their cooldown. A resource of this "+
				"configuration whose cluster_id refers to this cluster's id is replaced with it, as this plan shows: it "+
				"gets an address from the new prefix in this apply. Any other that holds one (another configuration's, one "+
				"that names the cluster as a literal string, the scheduler's) keeps it in its state: its next refresh drops "+
				"it and its next apply allocates again from the new prefix.")
		return
	}
	diags.AddAttributeError(path.Root("prefix"), "Cluster Replacement Would Strand Its Addresses",
		what+"A cluster is destroyed only once no address in it is active, so this apply would fail half-way. Either "+
			"destroy the resources that hold the addresses first (a separate apply, or terraform destroy -target=...), then "+
			"change the prefix; or declare a new ipam_cluster with another name and the new prefix and move the resources "+
			"to it. Do not set force_destroy for this: it would release addresses that those resources still hold.")
}

// poolsDeletedByReplacement warns, at the plan of a replacement under the
// same name, which operator pools the old cluster's destroy deletes with it: those
// that take cluster_id from the cluster's id are replaced with it (the id
// is unknown until the apply), any other (its cluster written out, or
// another configuration's) is gone after the apply.
func (r *clusterResource) poolsDeletedByReplacement(ctx context.Context, id string, diags *diag.Diagnostics) {
	if r.store == nil || currentRun().destroy {
		return
	}
	u, err := operator.New(r.store).PoolUsage(ctx, id)
	if err != nil {
		return
	}
	var pools []string
	for _, p := range u.Pools {
		if p.Category == ipam.CategoryIPv4 || p.Category == ipam.CategoryIPv6 {
			pools = append(pools, fmt.Sprintf("%s (%d cooling)", p.PoolID, p.Cooling))
		}
	}
	if len(pools) == 0 {
		return
	}
	diags.AddAttributeWarning(path.Root("name"), "Replacing the Cluster Deletes Its Pools",
		fmt.Sprintf("This apply replaces cluster %q, and its destroy deletes its %d operator %s with it: %s. Their cooling "+
			"addresses keep their cooldown. An ipam_pool whose cluster_id refers to this cluster's id is replaced with it, "+
			"as this plan shows; one that names the cluster as a literal string, or that another configuration manages, "+
			"is not created again: refer to the id (cluster_id = ipam_cluster.<name>.id), or apply that configuration after this one.",
			id, len(pools), map[bool]string{true: "pool", false: "pools"}[len(pools) == 1], strings.Join(pools, ", ")))
}

// networkRevision is a digest of the network settings instances are
// handed: the same settings, however spelled, give the same revision.
func networkRevision(n ipam.Network) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s|%d", n.GatewayIPv6, n.MTU)
	for _, d := range n.DNSServers {
		fmt.Fprintf(h, "|%s", d)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// plannedNetworkRevision is the plan's network_revision: unknown while a
// setting is.
func plannedNetworkRevision(ctx context.Context, m clusterResourceModel) types.String {
	if m.GatewayIPv6.IsUnknown() || m.MTU.IsUnknown() || m.DNSServers.IsUnknown() {
		return types.StringUnknown()
	}
	c, err := m.networkOf(ctx)
	if err != nil {
		return types.StringUnknown()
	}
	return types.StringValue(networkRevision(c))
}

// networkOf reads the network settings of a known model.
func (m *clusterResourceModel) networkOf(ctx context.Context) (ipam.Network, error) {
	var n ipam.Network
	var err error
	if n.GatewayIPv6, err = ipam.ParseAddr(m.GatewayIPv6.ValueString()); err != nil {
		return n, &ipam.InvalidError{Field: "gateway_ipv6", Msg: err.Error()}
	}
	n.MTU = int(m.MTU.ValueInt64())
	var dns []string
	m.DNSServers.ElementsAs(ctx, &dns, false)
	n.DNSServers = []netip.Addr{}
	for _, d := range dns {
		a, err := ipam.ParseAddr(d)
		if err != nil {
			return n, &ipam.InvalidError{Field: "dns_servers", Msg: err.Error()}
		}
		n.DNSServers = append(n.DNSServers, a)
	}
	return n, nil
}

// toCore converts a fully known plan to the core's cluster.
func (m *clusterResourceModel) toCore(ctx context.Context) (ipam.Cluster, error) {
	c, err := m.plannedSubPrefixes()
	if err != nil {
		return c, err
	}
	c.ID = m.Name.ValueString()
	if c.NodeCooldown, err = ipam.ParseDuration(m.NodeCooldown.ValueString()); err != nil {
		return c, &ipam.InvalidError{Field: "node_cooldown", Msg: err.Error()}
	}
	if c.InstanceCooldown, err = ipam.ParseDuration(m.InstanceCooldown.ValueString()); err != nil {
		return c, &ipam.InvalidError{Field: "instance_cooldown", Msg: err.Error()}
	}
	c.AsWritten = map[string]string{"node_cooldown": m.NodeCooldown.ValueString(), "instance_cooldown": m.InstanceCooldown.ValueString(),
		"prefix": m.Prefix.ValueString(), "node_prefix": m.NodePrefix.ValueString(), "instance_prefix": m.InstancePrefix.ValueString()}
	n, err := m.networkOf(ctx)
	c.GatewayIPv6, c.MTU, c.DNSServers = n.GatewayIPv6, n.MTU, n.DNSServers
	return c, err
}

// fromCore fills the model from the core's cluster, keeping the user's
// spelling of values that are unchanged.
func (m *clusterResourceModel) fromCore(c ipam.Cluster) {
	m.ID = types.StringValue(c.ID)
	m.Name = types.StringValue(c.ID)
	m.Prefix = samePrefix(m.Prefix, c.Prefix, c.AsWritten["prefix"])
	m.NodePrefix = samePrefix(m.NodePrefix, c.NodePrefix, c.AsWritten["node_prefix"])
	m.InstancePrefix = samePrefix(m.InstancePrefix, c.InstancePrefix, c.AsWritten["instance_prefix"])
	m.NodeCooldown = sameDuration(m.NodeCooldown, c.NodeCooldown, c.AsWritten["node_cooldown"])
	m.InstanceCooldown = sameDuration(m.InstanceCooldown, c.InstanceCooldown, c.AsWritten["instance_cooldown"])
	m.GatewayIPv6 = sameAddr(m.GatewayIPv6, c.GatewayIPv6)
	m.MTU = types.Int64Value(int64(c.MTU))
	m.DNSServers = addrList(m.DNSServers, c.DNSServers)
	m.NetworkRevision = types.StringValue(networkRevision(c.Network()))
	if m.ForceDestroy.IsNull() || m.ForceDestroy.IsUnknown() {
		m.ForceDestroy = types.BoolValue(false)
	}
}

func (r *clusterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	defer clusterIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan clusterResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := plan.toCore(ctx)
	if err == nil {
		c, err = r.store.CreateCluster(ctx, c)
	}
	r.pd.forgetCluster(c.ID)
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Create Cluster", err)
		return
	}
	plan.fromCore(c)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *clusterResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	defer clusterIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics, &req.State)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state clusterResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := r.store.GetCluster(ctx, state.ID.ValueString())
	if errors.Is(err, ipam.ErrNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Read Cluster", err)
		return
	}
	// This state holds the cluster now: `terraform query` leaves it out of
	// its listing unless asked. A failed mark (a read-only role) changes
	// nothing, as for an address.
	_ = operator.New(r.store).ConfirmCluster(ctx, c.ID)
	state.fromCore(c)
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

func (r *clusterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	defer clusterIdentity.set(ctx, &resp.State, resp.Identity, &resp.Diagnostics)
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var plan clusterResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := plan.toCore(ctx)
	if err == nil {
		c, err = r.store.UpdateCluster(ctx, c)
	}
	r.pd.forgetCluster(plan.Name.ValueString())
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Update Cluster", err)
		return
	}
	plan.fromCore(c)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *clusterResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if !requireStore(r.store, &resp.Diagnostics) {
		return
	}
	var state clusterResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	err := r.store.DeleteCluster(ctx, state.ID.ValueString(), state.ForceDestroy.ValueBool())
	r.pd.forgetCluster(state.ID.ValueString())
	r.pd.forgetInstancePools() // a forced destroy releases the nodes' blocks
	if err != nil && !errors.Is(err, ipam.ErrNotFound) {
		addCoreError(&resp.Diagnostics, "Unable to Delete Cluster", err)
	}
}

func (r *clusterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id, ok := clusterIdentity.importID(ctx, req, &resp.Diagnostics)
	if !ok {
		return
	}
	if err := ipam.ValidateID("cluster name", id); err != nil {
		resp.Diagnostics.AddError("Invalid Import ID", "Import a cluster by its name: "+err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("force_destroy"), false)...)
	warnObjectManagedElsewhere(ctx, r.store, operator.ManagedCluster, id, &resp.Diagnostics)
}

// warnDestroyHeldElsewhere warns, in the plan of a cluster's or pool's
// destroy without force_destroy, when it holds active addresses that this
// configuration did not allocate: Terraform destroys this plan's resources
// that depend on it first, and then the destroy is refused (conflict),
// half-way. The look is advice: a failure to make it is no error.
func warnDestroyHeldElsewhere(ctx context.Context, store *ipam.Client, diags *diag.Diagnostics, kind, id string) {
	if store == nil || id == "" {
		return
	}
	n, list, err := store.HeldElsewhere(ctx, kind, id)
	if err != nil || n == 0 {
		return
	}
	diags.AddWarning(map[string]string{"cluster": "Cluster", "pool": "Pool"}[kind]+" Destroy Will Be Refused", fmt.Sprintf("%s %q holds %d active %s that this configuration "+
		"did not allocate: %s. Terraform destroys the resources of this plan that depend on the %s first, and then the %s's "+
		"destroy fails with conflict, half-way. Release those addresses first (from their configuration, or ipamctl release), "+
		"or set force_destroy = true and apply it before destroying, to release them into their cooldown with the %s.",
		kind, id, n, map[bool]string{true: "address", false: "addresses"}[n == 1], list, kind, kind, kind))
}
