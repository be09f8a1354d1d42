package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// List resources (Terraform 1.14+ `terraform query`) find what no
// configuration manages yet (allocations made by ipamctl, by the platform's
// scheduler or before Terraform; clusters, pools, sets and node blocks made
// by another configuration or by hand) so that `terraform query
// -generate-config-out=FILE` writes their import blocks and configuration.
// Each result is exactly what adopting it gives: the resource's own
// ImportState of its string id, then its own Read.

// adoptable is a resource a list result is made with.
type adoptable interface {
	resource.ResourceWithImportState
	resource.ResourceWithConfigure
}

// listEntry is one thing found: the resource's string import id and the name
// `terraform query` shows for it, and whether a Terraform state holds it
// already (managedBy: the origin of the configuration that made it, if
// recorded).
type listEntry struct {
	importID, display string
	managed           bool
	managedBy         string
}

// inventoryList lists one resource type's objects.
type inventoryList struct {
	typeSuffix  string // after the provider's type name: "_node_address"
	noun        string // what is listed, for the filters' descriptions: "allocations"
	description string
	// filters are the optional string filters, by attribute.
	filters     map[string]listFilter
	newResource func() adoptable
	// find lists the entries matching the set filters (by attribute; unset
	// ones are absent). Without managedKind it says which a state holds,
	// leaves them out unless includeManaged, and returns at most limit
	// entries when limit > 0; with managedKind (an ipam.Managed* kind) it
	// returns every entry, and List asks Client.Managers which a state holds.
	find        func(ctx context.Context, st *ipam.Client, f map[string]string, includeManaged bool, limit int) ([]listEntry, error)
	managedKind string

	res   adoptable
	store *ipam.Client
}

var (
	_ list.ListResourceWithConfigure = &inventoryList{}
)

// listFilter is an optional filter: what it keeps ("in this cluster") and
// the check its value must pass, at validate time.
type listFilter struct {
	keeps string
	check validator.String
}

// The filters the list resources share.
var (
	filterCluster = listFilter{"in this cluster", validID("cluster_id")}
	filterOrg     = listFilter{"of this organization", validID("org_id")}
	filterEnv     = listFilter{"of this environment", validID("env_id")}
)

// operatorCategories are the categories of the pools ipam_pool manages.
var operatorCategories = []string{ipam.CategoryIPv4, ipam.CategoryIPv6}

func listResources() []func() list.ListResource {
	allocFilters := map[string]listFilter{
		"cluster_id": filterCluster,
		"pool_id":    {"from this pool (`<cluster_id>/<pool name>`; a node's blocks: `<cluster_id>/blocks/<node_id>`)", validPoolID()},
		"org_id":     filterOrg,
		"env_id":     filterEnv,
		"node_id":    {"of this node (a node's own address, or the instances placed on it)", validID("node_id")},
	}
	ownerID := func(v operator.AllocationView) string { return v.ClusterID + "/" + v.Owner.ID }
	allocations := func(suffix, kind, what string, newResource func() adoptable, importID func(operator.AllocationView) string) func() list.ListResource {
		return func() list.ListResource {
			return &inventoryList{typeSuffix: suffix, noun: "allocations", filters: allocFilters, newResource: newResource,
				description: "Finds the active " + what + " for `terraform query`, to adopt them",
				find: func(ctx context.Context, st *ipam.Client, f map[string]string, includeManaged bool, limit int) ([]listEntry, error) {
					views, err := operator.New(st).ListAllocations(ctx, operator.ListFilter{ClusterID: f["cluster_id"], PoolID: f["pool_id"],
						OrgID: f["org_id"], EnvID: f["env_id"], NodeID: f["node_id"],
						OwnerKind: kind, State: ipam.StateActive, Unmanaged: !includeManaged, Limit: limit})
					var out []listEntry
					for _, v := range views {
						out = append(out, listEntry{importID(v), v.Owner.ID + " (" + v.Address.String() + ")", v.StateHeld, v.Origin})
					}
					return out, err
				}}
		}
	}
	return []func() list.ListResource{
		allocations("_node_address", ipam.OwnerNode, "node overlay addresses",
			func() adoptable { return &nodeAddressResource{} }, ownerID),
		allocations("_instance_address", ipam.OwnerInstance, "instance addresses",
			func() adoptable { return &instanceAddressResource{} }, ownerID),
		allocations("_env_ipv4", ipam.OwnerEnvIPv4, "environment IPv4 addresses",
			func() adoptable { return &envIPv4Resource{} },
			func(v operator.AllocationView) string { return v.PoolID + "/" + v.Owner.ID }),
		func() list.ListResource {
			return &inventoryList{typeSuffix: "_cluster", noun: "clusters", filters: map[string]listFilter{},
				description: "Finds every cluster for `terraform query`, to adopt them",
				newResource: func() adoptable { return &clusterResource{} }, managedKind: operator.ManagedCluster,
				find: func(ctx context.Context, st *ipam.Client, _ map[string]string, _ bool, _ int) ([]listEntry, error) {
					ids, err := operator.New(st).ListClusterIDs(ctx)
					return entriesOf(ids, func(id string) string { return id }), err
				}}
		},
		func() list.ListResource {
			return &inventoryList{typeSuffix: "_pool", noun: "pools", newResource: func() adoptable { return &poolResource{} },
				managedKind: operator.ManagedPool,
				description: "Finds the operator pools (IPv4 add-on and extra IPv6 pools) for `terraform query`, to adopt them. " +
					"A cluster's own node and instance pools belong to its `ipam_cluster` and are not listed",
				filters: map[string]listFilter{"cluster_id": filterCluster,
					"category": {"of this category (`ipv4` or `ipv6`)", stringvalidator.OneOf(operatorCategories...)}},
				find: func(ctx context.Context, st *ipam.Client, f map[string]string, _ bool, _ int) ([]listEntry, error) {
					cats := operatorCategories
					if c, ok := f["category"]; ok {
						cats = []string{c}
					}
					refs, err := operator.New(st).ListPools(ctx, f["cluster_id"], cats...)
					return entriesOf(refs, ipam.PoolRef.ID), err
				}}
		},
		func() list.ListResource {
			return &inventoryList{typeSuffix: "_address_set", noun: "sets", newResource: func() adoptable { return &addressSetResource{} },
				managedKind: operator.ManagedSet,
				description: "Finds the address sets with at least one active member for `terraform query`, to adopt them",
				filters:     map[string]listFilter{"cluster_id": filterCluster, "org_id": filterOrg, "env_id": filterEnv},
				find: func(ctx context.Context, st *ipam.Client, f map[string]string, _ bool, _ int) ([]listEntry, error) {
					refs, err := operator.New(st).ListSets(ctx, f["cluster_id"], f["org_id"], f["env_id"])
					return entriesOf(refs, func(r operator.SetRef) string { return r.ClusterID + "/" + r.SetID }), err
				}}
		},
		func() list.ListResource {
			return &inventoryList{typeSuffix: "_node_instance_blocks", noun: "nodes", newResource: func() adoptable { return &nodeBlocksResource{} },
				managedKind: operator.ManagedNodeBlocks,
				description: "Finds the nodes that hold instance blocks for `terraform query`, to adopt their `ipam_node_instance_blocks`",
				filters:     map[string]listFilter{"cluster_id": filterCluster, "node_id": {"with this id", validID("node_id")}},
				find: func(ctx context.Context, st *ipam.Client, f map[string]string, _ bool, _ int) ([]listEntry, error) {
					nodes, err := st.NodesWithBlocks(ctx, f["cluster_id"])
					nodes = slices.DeleteFunc(nodes, func(n [2]string) bool { return f["node_id"] != "" && n[1] != f["node_id"] })
					return entriesOf(nodes, func(n [2]string) string { return n[0] + "/" + n[1] }), err
				}}
		},
	}
}

// entriesOf makes list entries shown by their import id.
func entriesOf[T any](xs []T, id func(T) string) []listEntry {
	out := make([]listEntry, 0, len(xs))
	for _, x := range xs {
		out = append(out, listEntry{importID: id(x), display: id(x)})
	}
	return out
}

func capped(es []listEntry, limit int) []listEntry {
	if limit > 0 && len(es) > limit {
		return es[:limit]
	}
	return es
}

// markManaged marks the entries a Terraform state holds (Client.Managers)
// and, unless includeManaged, leaves them out.
func markManaged(ctx context.Context, st *ipam.Client, kind string, es []listEntry, includeManaged bool) ([]listEntry, error) {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.importID
	}
	managers, err := operator.New(st).Managers(ctx, kind, ids)
	if err != nil {
		return nil, err
	}
	out := es[:0]
	for _, e := range es {
		e.managedBy, e.managed = managers[e.importID]
		if !e.managed || includeManaged {
			out = append(out, e)
		}
	}
	return out, nil
}

// includeManagedAttr is the list attribute that lists what a state holds too.
const includeManagedAttr = "include_managed"

// managedWarning says, on a list result, that a state holds it already.
func managedWarning(e listEntry) (summary, detail string) {
	by := "a Terraform state (a refresh or an import read it)"
	if e.managedBy != "" {
		by = fmt.Sprintf("the Terraform configuration in %q (it created it)", e.managedBy)
	}
	return "Managed by Another Configuration",
		e.importID + " is managed by " + by + ". Adopting it here as well would let two states manage it, and either one's " +
			"destroy would remove it under the other. To move it on purpose: `terraform state rm` it from the other " +
			"configuration first, then apply this one's import block."
}

func (l *inventoryList) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + l.typeSuffix
}

func (l *inventoryList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	attrs := map[string]schema.Attribute{
		includeManagedAttr: schema.BoolAttribute{Optional: true, MarkdownDescription: "List " + l.noun + " a Terraform state " +
			"already holds too (one another configuration created, or whose refresh or import read it), each with a " +
			"warning naming that configuration. Default `false`: they are left out, since adopting one would let two " +
			"states manage it."},
	}
	for name, f := range l.filters {
		attrs[name] = schema.StringAttribute{Optional: true, MarkdownDescription: "Only " + l.noun + " " + f.keeps + ".",
			Validators: []validator.String{f.check}}
	}
	desc := l.description + ": `terraform query -generate-config-out=FILE` writes an import block and the configuration of each."
	if len(l.filters) > 0 {
		desc += " Every filter is optional; set filters narrow the list together."
	}
	desc += " What a Terraform state already holds is left out unless `include_managed` is true."
	resp.Schema = schema.Schema{MarkdownDescription: desc, Attributes: attrs}
}

func (l *inventoryList) Configure(ctx context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	pd := providerDataFrom(req.ProviderData, &resp.Diagnostics)
	if pd == nil {
		return
	}
	// A listing reads what no state holds yet: its reads must not mark
	// another manager's allocation as held by a state (ipam.Client.Peek).
	peek := &providerData{store: pd.store.Peek(), reservations: pd.reservations, reservationTTL: pd.reservationTTL}
	l.store = peek.store
	l.res = l.newResource()
	req.ProviderData = peek
	l.res.Configure(ctx, req, resp)
}

func (l *inventoryList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var diags diag.Diagnostics
	f := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(l.filters)) {
		var v types.String
		diags.Append(req.Config.GetAttribute(ctx, path.Root(name), &v)...)
		if !v.IsNull() && !v.IsUnknown() {
			f[name] = v.ValueString()
		}
	}
	var include types.Bool
	diags.Append(req.Config.GetAttribute(ctx, path.Root(includeManagedAttr), &include)...)
	if !requireStore(l.store, &diags) || diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	entries, err := l.find(ctx, l.store, f, include.ValueBool(), int(req.Limit))
	if err == nil && l.managedKind != "" {
		entries, err = markManaged(ctx, l.store, l.managedKind, entries, include.ValueBool())
		entries = capped(entries, int(req.Limit))
	}
	if err != nil {
		addCoreError(&diags, "Unable to List", err)
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	stream.Results = func(push func(list.ListResult) bool) {
		for _, e := range entries {
			result, ok := adopt(ctx, l.res, e.importID, req)
			if !ok {
				continue // gone since it was listed
			}
			result.DisplayName = e.display
			if e.managed {
				result.DisplayName += " (managed elsewhere)"
				result.Diagnostics.AddWarning(managedWarning(e))
			}
			if !push(result) {
				return
			}
		}
	}
}

// adopt is the list result of a resource imported by id: its ImportState,
// then its Read, as `terraform import` would run them. ok is false when the
// resource is gone by the time it is read.
func adopt(ctx context.Context, r adoptable, id string, req list.ListRequest) (list.ListResult, bool) {
	result := req.NewListResult(ctx)
	state := tfsdk.State{Schema: req.ResourceSchema, Raw: tftypes.NewValue(req.ResourceSchema.Type().TerraformType(ctx), nil)}
	imp := resource.ImportStateResponse{State: state, Identity: result.Identity}
	r.ImportState(ctx, resource.ImportStateRequest{ID: id}, &imp)
	result.Diagnostics.Append(imp.Diagnostics...)
	if imp.Diagnostics.HasError() {
		return result, true
	}
	read := resource.ReadResponse{State: imp.State, Identity: imp.Identity}
	r.Read(ctx, resource.ReadRequest{State: imp.State, Identity: imp.Identity}, &read)
	result.Diagnostics.Append(read.Diagnostics...)
	if read.State.Raw.IsNull() && !read.Diagnostics.HasError() {
		return result, false
	}
	result.Identity = read.Identity
	if req.IncludeResource {
		result.Resource.Raw = read.State.Raw
	}
	return result, true
}
