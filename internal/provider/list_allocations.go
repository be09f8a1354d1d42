package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// List resources (Terraform 1.14+ `terraform query`) find the allocations
// that no configuration manages yet (made by ipamctl, by the platform's
// scheduler, or before Terraform) so that `terraform query
// -generate-config-out=FILE` writes their import blocks and configuration.
// Each result is exactly what adopting it gives: the resource's own
// ImportState of its string id, then its own Read.

// adoptable is a resource a list result is made with.
type adoptable interface {
	resource.ResourceWithImportState
	resource.ResourceWithConfigure
}

// allocationList lists the active allocations of one owner kind.
type allocationList struct {
	typeSuffix  string // after the provider's type name: "_node_address"
	kind        string // ipam.OwnerNode, ...
	what        string // "node addresses", for the description
	newResource func() adoptable
	// importID is the resource's string import id of an allocation.
	importID func(ipam.AllocationView) string

	res   adoptable
	store *ipam.Client
}

var (
	_ list.ListResourceWithConfigure = &allocationList{}
)

func listResources() []func() list.ListResource {
	ownerID := func(v ipam.AllocationView) string { return v.ClusterID + "/" + v.Owner.ID }
	return []func() list.ListResource{
		func() list.ListResource {
			return &allocationList{typeSuffix: "_node_address", kind: ipam.OwnerNode, what: "node overlay addresses",
				newResource: func() adoptable { return &nodeAddressResource{} }, importID: ownerID}
		},
		func() list.ListResource {
			return &allocationList{typeSuffix: "_instance_address", kind: ipam.OwnerInstance, what: "instance addresses",
				newResource: func() adoptable { return &instanceAddressResource{} }, importID: ownerID}
		},
		func() list.ListResource {
			return &allocationList{typeSuffix: "_env_ipv4", kind: ipam.OwnerEnvIPv4, what: "environment IPv4 addresses",
				newResource: func() adoptable { return &envIPv4Resource{} },
				importID:    func(v ipam.AllocationView) string { return v.PoolID + "/" + v.Owner.ID }}
		},
	}
}

type allocationListModel struct {
	ClusterID types.String `tfsdk:"cluster_id"`
	PoolID    types.String `tfsdk:"pool_id"`
	OrgID     types.String `tfsdk:"org_id"`
	EnvID     types.String `tfsdk:"env_id"`
	NodeID    types.String `tfsdk:"node_id"`
}

func (l *allocationList) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + l.typeSuffix
}

func (l *allocationList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	filter := func(what string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, MarkdownDescription: "Only allocations " + what + "."}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Finds the active " + l.what + " for `terraform query`, to adopt them: " +
			"`terraform query -generate-config-out=FILE` writes an import block and the configuration of each. " +
			"Every filter is optional; set filters narrow the list together.",
		Attributes: map[string]schema.Attribute{
			"cluster_id": filter("in this cluster"),
			"pool_id":    filter("from this pool (`<cluster_id>/<pool name>`)"),
			"org_id":     filter("of this organization"),
			"env_id":     filter("of this environment"),
			"node_id":    filter("of this node (a node's own address, or the instances placed on it)"),
		},
	}
}

func (l *allocationList) Configure(ctx context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	pd := providerDataFrom(req.ProviderData, &resp.Diagnostics)
	if pd == nil {
		return
	}
	l.store = pd.store
	l.res = l.newResource()
	l.res.Configure(ctx, req, resp)
}

func (l *allocationList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var diags diag.Diagnostics
	var f allocationListModel
	diags.Append(req.Config.Get(ctx, &f)...)
	if !requireStore(l.store, &diags) || diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	views, err := l.store.ListAllocations(ctx, ipam.ListFilter{ClusterID: f.ClusterID.ValueString(), PoolID: f.PoolID.ValueString(),
		OrgID: f.OrgID.ValueString(), EnvID: f.EnvID.ValueString(), NodeID: f.NodeID.ValueString(),
		OwnerKind: l.kind, State: ipam.StateActive, Limit: int(req.Limit)})
	if err != nil {
		addCoreError(&diags, "Unable to List Allocations", err)
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	stream.Results = func(push func(list.ListResult) bool) {
		for _, v := range views {
			result, ok := adopt(ctx, l.res, l.importID(v), req)
			if !ok {
				continue // released since it was listed
			}
			result.DisplayName = v.Owner.ID + " (" + v.Address.String() + ")"
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
