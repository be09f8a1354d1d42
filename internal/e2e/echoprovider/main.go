// Command echoprovider is a second, unrelated Terraform provider for the
// install test (internal/e2e/install_test.go): a root module that uses ipam
// and another provider must install both with one unmodified `terraform
// init`. A real provider would be downloaded from its registry, which a test
// may not do; this one is built by the test and put into a mirror of its own
// as example/echo. It has one resource, echo_text, whose id is its text, and
// no I/O. It is never released.
package main

import (
	"context"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func main() {
	// The address only matters for debug mode (reattach); terraform launches
	// the provider under whichever address it installed it for.
	err := providerserver.Serve(context.Background(), func() provider.Provider { return echoProvider{} },
		providerserver.ServeOpts{Address: "registry.terraform.io/example/echo"})
	if err != nil {
		log.Fatal(err.Error())
	}
}

type echoProvider struct{}

func (echoProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "echo"
}

func (echoProvider) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse) {}

func (echoProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (echoProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return text{} }}
}

func (echoProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }

// text is echo_text: a new text replaces it.
type text struct{}

type textModel struct {
	ID   types.String `tfsdk:"id"`
	Text types.String `tfsdk:"text"`
}

func (text) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_text"
}

func (text) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"text": schema.StringAttribute{Required: true,
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
	}}
}

func (text) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m textModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.ID = m.Text
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read leaves the state as it is.
func (text) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

// Update is never called: every attribute the user sets replaces the resource.
func (text) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m textModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (text) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}
