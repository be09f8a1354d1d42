package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"

	ipamprovider "github.com/overlayipam/terraform-provider-ipam/internal/provider"
)

// TestInstanceHasTheRealSchema: noop_instance is the benchmark's reference
// for ipam_instance_address, so it has the same attributes, each with the
// same type and the same required, optional and computed flags. An attribute
// added to the real resource and not here would make the reference cheaper
// than what it stands for (every attribute is in the state Terraform writes
// after each resource).
func TestInstanceHasTheRealSchema(t *testing.T) {
	ctx := context.Background()
	shape := func(r resource.Resource) map[string]string {
		var resp resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatalf("schema: %v", resp.Diagnostics)
		}
		out := map[string]string{}
		for name, a := range resp.Schema.Attributes {
			out[name] = fmt.Sprintf("%s required=%t optional=%t computed=%t",
				a.GetType(), a.IsRequired(), a.IsOptional(), a.IsComputed())
		}
		return out
	}
	real, noop := shape(ipamprovider.NewInstanceAddressResource()), shape(instance{})
	if len(real) == 0 {
		t.Fatal("ipam_instance_address has no attributes")
	}
	for _, name := range slices.Sorted(maps.Keys(real)) {
		if noop[name] != real[name] {
			t.Errorf("attribute %s: ipam_instance_address has %q, noop_instance %q", name, real[name], noop[name])
		}
	}
	for name := range noop {
		if _, ok := real[name]; !ok {
			t.Errorf("attribute %s: noop_instance has it, ipam_instance_address does not", name)
		}
	}
}
