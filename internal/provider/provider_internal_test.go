package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// configureWith runs the provider's Configure with only database_url set.
func configureWith(ctx context.Context, t *testing.T, url string) diag.Diagnostics {
	t.Helper()
	p := New("test")()
	var sresp provider.SchemaResponse
	p.Schema(ctx, provider.SchemaRequest{}, &sresp)
	typ := sresp.Schema.Type().TerraformType(ctx)
	vals := map[string]tftypes.Value{}
	for name, at := range typ.(tftypes.Object).AttributeTypes {
		vals[name] = tftypes.NewValue(at, nil)
	}
	vals["database_url"] = tftypes.NewValue(tftypes.String, url)
	vals["connect_timeout"] = tftypes.NewValue(tftypes.String, "2s")
	vals["failover_timeout"] = tftypes.NewValue(tftypes.String, "1s")
	var resp provider.ConfigureResponse
	p.Configure(ctx, provider.ConfigureRequest{Config: tfsdk.Config{Schema: sresp.Schema, Raw: tftypes.NewValue(typ, vals)}}, &resp)
	return resp.Diagnostics
}
