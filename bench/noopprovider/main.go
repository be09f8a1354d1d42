// Command noopprovider is the benchmark's do-nothing Terraform provider: the
// fair reference of section 4. terraform_data runs inside terraform, while
// every external provider pays the plugin protocol (process start, gRPC,
// msgpack, the framework's schema walk) on each validate, plan, apply and
// read. This one pays exactly that and nothing else: one resource, noop_thing,
// with no I/O. It is served the way the real provider is (main.go: the same
// framework, protocol version, logging and garbage collection), so that the
// ratio of ipam_instance_address to noop_thing is the IPAM's own cost.
//
// The benchmark builds it as terraform-provider-noop next to the real
// provider and points a dev_overrides entry for
// registry.terraform.io/overlayipam/noop at it; it is never released.
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"log"
	"net/netip"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	ipamprovider "github.com/overlayipam/terraform-provider-ipam/internal/provider"
)

// providerAddress is the provider's source address; bench/terraform.go
// repeats it in the dev_overrides and the configurations.
const providerAddress = "registry.terraform.io/overlayipam/noop"

func main() {
	// The real provider's process defaults (the plugin SDKs at WARN unless
	// someone asked for logs, its garbage collector's target), so that
	// logging and collection cost both the same.
	ipamprovider.ProcessDefaults()
	// providerserver.Serve speaks protocol version 6, as the real provider.
	err := providerserver.Serve(context.Background(), func() provider.Provider { return noopProvider{} }, providerserver.ServeOpts{Address: providerAddress})
	if err != nil {
		log.Fatal(err.Error())
	}
}

type noopProvider struct{}

func (noopProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "noop"
	resp.Version = "bench"
}

func (noopProvider) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse) {}

func (noopProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
	// No settings and nothing to open: the real provider's pool and schema
	// check are part of what the benchmark measures.
}

func (noopProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return thing{} }, func() resource.Resource { return instance{} }}
}

func (noopProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }

var _ resource.ResourceWithImportState = thing{}

// thing is noop_thing. Its configuration has the shape of the benchmark's
// ipam_instance_address (an owner name and two labels), its computed id and
// address the plan modifiers of the real address attributes.
type thing struct{}

type thingModel struct {
	ID      types.String `tfsdk:"id"`
	Name    types.String `tfsdk:"name"`
	OrgID   types.String `tfsdk:"org_id"`
	EnvID   types.String `tfsdk:"env_id"`
	Address types.String `tfsdk:"address"`
}

func (thing) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_thing"
}

// computed is a computed string kept from the state, as the real address
// attributes are.
func computed() schema.StringAttribute {
	return schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
}

// replacing is a required string whose change replaces the resource.
func replacing() schema.StringAttribute {
	return schema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}}
}

// updateFromPlan is both resources' Update: the state becomes the plan.
func updateFromPlan[M any](ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (thing) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"id":      computed(),
		"name":    replacing(),
		"org_id":  schema.StringAttribute{Optional: true},
		"env_id":  schema.StringAttribute{Optional: true},
		"address": computed(),
	}}
}

// Create derives the computed values from the name alone: the same name
// always gives the same id and address, and the labels may change in place.
func (thing) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m thingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.ID = m.Name
	m.Address = types.StringValue(nameAddr(m.Name.ValueString()).String())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// nameAddr is a name's address in 2001:db8::/32, the documentation prefix.
func nameAddr(name string) netip.Addr {
	a := [16]byte{0x20, 0x01, 0x0d, 0xb8}
	binary.BigEndian.PutUint64(a[8:], nameHash(name))
	return netip.AddrFrom16(a)
}

func nameHash(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}

// Read leaves the state as it is (the framework starts the response from it).
func (thing) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

// Update takes the labels from the plan; id and address are kept there by
// UseStateForUnknown (a new name replaces the resource).
func (thing) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	updateFromPlan[thingModel](ctx, req, resp)
}

func (thing) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

func (thing) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

// instance has ipam_instance_address's attributes (names, types, required,
// optional and computed, the same kept-from-state plan modifiers) and nothing
// else: no validators, no plan-time work, no identity, no I/O. Set next to
// noop_thing, it shows what the schema's size costs terraform and the
// framework apart from what the real resource does. Its values are about as
// long as the real ones, since terraform rewrites the whole state file after
// each resource an apply changes (TestInstanceHasTheRealSchema keeps the
// attributes the same).
type instance struct{}

type instanceModel struct {
	ID          types.String `tfsdk:"id"`
	ClusterID   types.String `tfsdk:"cluster_id"`
	InstanceID  types.String `tfsdk:"instance_id"`
	OrgID       types.String `tfsdk:"org_id"`
	EnvID       types.String `tfsdk:"env_id"`
	NodeID      types.String `tfsdk:"node_id"`
	Address     types.String `tfsdk:"address"`
	CIDR        types.String `tfsdk:"cidr"`
	AllocatedAt types.String `tfsdk:"allocated_at"`
	GatewayIPv6 types.String `tfsdk:"gateway_ipv6"`
	MTU         types.Int64  `tfsdk:"mtu"`
	DNSServers  types.List   `tfsdk:"dns_servers"`
	Revision    types.String `tfsdk:"cluster_network_revision"`
}

func (instance) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_instance"
}

func (instance) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"id":           computed(),
		"cluster_id":   replacing(),
		"instance_id":  replacing(),
		"org_id":       replacing(),
		"env_id":       replacing(),
		"node_id":      schema.StringAttribute{Optional: true},
		"address":      schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"cidr":         computed(),
		"allocated_at": computed(),
		"gateway_ipv6": computed(),
		"mtu":          schema.Int64Attribute{Computed: true, PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()}},
		"dns_servers":  schema.ListAttribute{ElementType: types.StringType, Computed: true, PlanModifiers: []planmodifier.List{listplanmodifier.UseStateForUnknown()}},
		"cluster_network_revision": schema.StringAttribute{Optional: true, Computed: true,
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
	}}
}

// Create derives every computed value from the instance id, as thing does.
func (instance) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m instanceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.ID = types.StringValue(m.ClusterID.ValueString() + "/" + m.InstanceID.ValueString())
	if m.Address.IsUnknown() {
		// As long as the real ones (2001:db8:109:1::33): the state's size
		// is part of what an apply costs.
		a := [16]byte{0x20, 0x01, 0x0d, 0xb8, 7: 1}
		binary.BigEndian.PutUint16(a[14:], uint16(nameHash(m.InstanceID.ValueString())))
		m.Address = types.StringValue(netip.AddrFrom16(a).String())
	}
	m.CIDR = types.StringValue(m.Address.ValueString() + "/128")
	m.AllocatedAt = types.StringValue("2026-01-01T00:00:00Z")
	m.GatewayIPv6 = types.StringValue("fe80::1")
	m.MTU = types.Int64Value(1500)
	m.DNSServers = types.ListValueMust(types.StringType, []attr.Value{types.StringValue("2001:db8::53")})
	if m.Revision.IsUnknown() {
		// 16 hex digits, as the real one's digest of the cluster's settings.
		m.Revision = types.StringValue(fmt.Sprintf("%016x", nameHash(m.ClusterID.ValueString())))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (instance) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

func (instance) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	updateFromPlan[instanceModel](ctx, req, resp)
}

func (instance) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}
