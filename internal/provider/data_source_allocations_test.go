package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

const allocationsOwners = testCluster + `resource "ipam_node_address" "n1" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n1"
}
resource "ipam_instance_address" "i1" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "i1"
  org_id      = "acme"
  env_id      = "prod"
  node_id     = "n1"
}
resource "ipam_instance_address" "i2" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "i2"
  org_id      = "acme"
  env_id      = "dev"
  depends_on  = [ipam_instance_address.i1] # addresses in a known order
}
`

const allocationsI3 = `resource "ipam_instance_address" "i3" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "i3"
  org_id      = "umbrella"
  env_id      = "prod"
  depends_on  = [ipam_instance_address.i2]
}
`

const allocationsQueries = `data "ipam_allocations" "acme" {
  cluster_id = "c1"
  org_id     = "acme"
  depends_on = [ipam_node_address.n1, ipam_instance_address.i1, ipam_instance_address.i2]
}
data "ipam_allocations" "prod_instances" {
  env_id     = "prod"
  category   = "instance"
  depends_on = [ipam_node_address.n1, ipam_instance_address.i1, ipam_instance_address.i2]
}
data "ipam_allocations" "on_n1" {
  node_id    = "n1"
  depends_on = [ipam_node_address.n1, ipam_instance_address.i1, ipam_instance_address.i2]
}
data "ipam_allocations" "cooling" {
  state      = "cooling"
  depends_on = [ipam_node_address.n1, ipam_instance_address.i1, ipam_instance_address.i2]
}
data "ipam_allocations" "all" {
  depends_on = [ipam_node_address.n1, ipam_instance_address.i1, ipam_instance_address.i2]
}
data "ipam_allocations" "of_i3" {
  cluster_id  = "c1"
  instance_id = "i3"
  depends_on  = [ipam_node_address.n1, ipam_instance_address.i1, ipam_instance_address.i2]
}
`

func ownerIDs(ids ...string) knownvalue.Check {
	checks := make([]knownvalue.Check, len(ids))
	for i, id := range ids {
		checks[i] = knownvalue.ObjectPartial(map[string]knownvalue.Check{"owner_id": knownvalue.StringExact(id)})
	}
	return knownvalue.ListExact(checks)
}

func TestAccAllocationsDataSource(t *testing.T) {
	db := newAccDB(t)
	allocs := tfjsonpath.New("allocations")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(allocationsOwners + allocationsI3)},
			{
				Config: db.config(allocationsOwners + allocationsI3 + allocationsQueries),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.ipam_allocations.acme", tfjsonpath.New("id"), knownvalue.StringExact("cluster_id=c1,org_id=acme")),
					statecheck.ExpectKnownValue("data.ipam_allocations.acme", allocs, ownerIDs("i1", "i2")),
					statecheck.ExpectKnownValue("data.ipam_allocations.prod_instances", allocs, ownerIDs("i1", "i3")),
					// The node's own address and the instance placed on it.
					statecheck.ExpectKnownValue("data.ipam_allocations.on_n1", allocs, ownerIDs("i1", "n1")),
					statecheck.ExpectKnownValue("data.ipam_allocations.cooling", allocs, knownvalue.ListExact([]knownvalue.Check{})),
					statecheck.ExpectKnownValue("data.ipam_allocations.all", tfjsonpath.New("id"), knownvalue.StringExact("all")),
					statecheck.ExpectKnownValue("data.ipam_allocations.all", allocs, knownvalue.ListSizeExact(4)),
					statecheck.ExpectKnownValue("data.ipam_allocations.of_i3", allocs, ownerIDs("i3")),
					statecheck.ExpectKnownValue("data.ipam_allocations.of_i3", allocs.AtSliceIndex(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"state": knownvalue.StringExact("active"),
					})),
					statecheck.ExpectKnownValue("data.ipam_allocations.acme", allocs.AtSliceIndex(0), knownvalue.ObjectExact(map[string]knownvalue.Check{
						"id":           knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f-]{36}$`)),
						"cluster_id":   knownvalue.StringExact("c1"),
						"pool_id":      knownvalue.StringExact("c1/instance"),
						"category":     knownvalue.StringExact("instance"),
						"address":      knownvalue.StringExact("2001:db8:0:1::1"),
						"state":        knownvalue.StringExact("active"),
						"generation":   knownvalue.NotNull(),
						"owner_kind":   knownvalue.StringExact("instance"),
						"owner_id":     knownvalue.StringExact("i1"),
						"org_id":       knownvalue.StringExact("acme"),
						"env_id":       knownvalue.StringExact("prod"),
						"node_id":      knownvalue.StringExact("n1"),
						"instance_id":  knownvalue.StringExact("i1"),
						"actor":        knownvalue.StringExact("terraform"),
						"allocated_at": knownvalue.NotNull(),
						"released_at":  knownvalue.Null(),
						"reusable_at":  knownvalue.Null(),
					})),
				},
			},
			// i3 is destroyed: it cools down, and is listed as cooling with its last holder.
			{Config: db.config(allocationsOwners + allocationsQueries)},
			{
				Config: db.config(allocationsOwners + allocationsQueries),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.ipam_allocations.cooling", allocs, ownerIDs("i3")),
					statecheck.ExpectKnownValue("data.ipam_allocations.cooling", allocs.AtSliceIndex(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"state":       knownvalue.StringExact("cooling"),
						"org_id":      knownvalue.StringExact("umbrella"),
						"released_at": knownvalue.NotNull(),
						"reusable_at": knownvalue.NotNull(),
					})),
					statecheck.ExpectKnownValue("data.ipam_allocations.prod_instances", allocs, ownerIDs("i1", "i3")),
					statecheck.ExpectKnownValue("data.ipam_allocations.all", allocs, knownvalue.ListSizeExact(4)),
					// An instance's own cooling address (the owner's cooling index).
					statecheck.ExpectKnownValue("data.ipam_allocations.of_i3", allocs, ownerIDs("i3")),
					statecheck.ExpectKnownValue("data.ipam_allocations.of_i3", allocs.AtSliceIndex(0), knownvalue.ObjectPartial(map[string]knownvalue.Check{
						"state": knownvalue.StringExact("cooling"),
					})),
				},
			},
			{
				Config:      db.config(`data "ipam_allocations" "bad" { state = "free" }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)state.*value must be one of`),
			},
			{
				Config:      db.config(`data "ipam_allocations" "bad" { pool_id = "nopool" }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid pool_id.*not a pool id`),
			},
			// The post-test destroy runs with the last configuration.
			{Config: db.config(allocationsOwners)},
		},
	})
}
