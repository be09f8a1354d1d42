package provider

import (
	"context"
	"net/netip"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// configureWith runs the provider's Configure with only database_url set.
func configureWith(ctx context.Context, t *testing.T, url string) diag.Diagnostics {
	t.Helper()
	return configureWithFailover(ctx, t, url, "1s")
}

// configureWithFailover is configureWith with the failover_timeout given.
func configureWithFailover(ctx context.Context, t *testing.T, url, failover string) diag.Diagnostics {
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
	vals["failover_timeout"] = tftypes.NewValue(tftypes.String, failover)
	var resp provider.ConfigureResponse
	p.Configure(ctx, provider.ConfigureRequest{Config: tfsdk.Config{Schema: sresp.Schema, Raw: tftypes.NewValue(typ, vals)}}, &resp)
	return resp.Diagnostics
}

// A plan asks the database once per node which pool the node's instances
// draw from, and the provider forgets the answers when it writes a node's
// blocks (or destroys a cluster): the next plan asks again.
func TestInstancePoolCache(t *testing.T) {
	ctx := context.Background()
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: testdb.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateCluster(ctx, ipam.Cluster{ID: "c1", Prefix: netip.MustParsePrefix("2001:db8::/48"),
		NodeCooldown: ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown}); err != nil {
		t.Fatal(err)
	}
	pd := &providerData{store: st}
	want := func(step, id string) {
		t.Helper()
		if got, err := pd.instancePool(ctx, "c1", "n1"); err != nil || got != id {
			t.Fatalf("%s: %q, %v; want %q", step, got, err, id)
		}
	}
	want("first plan", ipam.InstancePool("c1").ID())
	// Another process gives the node blocks: this process's plans keep the
	// answer they read (as a plan read a moment earlier would have).
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", ipam.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 4}); err != nil {
		t.Fatal(err)
	}
	want("cached", ipam.InstancePool("c1").ID())
	// A write of this process forgets every answer.
	pd.forgetInstancePools()
	want("after a write", ipam.NodeBlocksPool("c1", "n1").ID())
	var nilPD *providerData
	nilPD.forgetInstancePools() // a resource configured without a database
}
