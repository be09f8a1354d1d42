package operator_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// An operator checks the invariants, reads a cluster's usage and looks an
// address up, through the same client the scheduler uses.
func ExampleNew() {
	ctx := context.Background()
	client, err := ipam.Open(ctx, ipam.Config{DatabaseURL: exampleURL, Actor: "ops"})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	if _, err := client.Migrate(ctx); err != nil {
		panic(err)
	}
	// The cluster and the instance come from Terraform and the scheduler;
	// created here for the example.
	if _, err := client.CreateCluster(ctx, ipam.Cluster{ID: "example", Prefix: netip.MustParsePrefix("2001:db8:e::/48")}); err != nil {
		panic(err)
	}
	addr, err := client.AllocateInstance(ctx, nil, ipam.InstanceRequest{
		ClusterID: "example", InstanceID: "web-1", OrgID: "acme", EnvID: "prod", NodeID: "node-a"})
	if err != nil {
		panic(err)
	}

	op := operator.New(client)
	report, err := op.Check(ctx, "")
	if err != nil {
		panic(err)
	}
	fmt.Println("invariants hold:", report.OK())
	usage, err := op.PoolUsage(ctx, "example")
	if err != nil {
		panic(err)
	}
	for _, c := range usage.Categories {
		fmt.Printf("%s: %d active\n", c.Category, c.Active)
	}
	infos, err := op.LookupAddress(ctx, addr.Prefix.Addr(), "example")
	if err != nil {
		panic(err)
	}
	for _, in := range infos {
		fmt.Printf("web-1's address: %s %s (%s)\n", in.Owner.Kind, in.Owner.ID, in.Status)
	}
	// Output:
	// invariants hold: true
	// node: 0 active
	// instance: 1 active
	// ipv4: 0 active
	// web-1's address: instance web-1 (active)
}
