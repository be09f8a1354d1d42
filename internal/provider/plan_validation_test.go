package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// What the database can tell at plan time fails the plan, not the apply:
// another cluster's overlapping prefix, a public IPv4 block another
// cluster's pool holds (although this pool's cluster is created by the same
// apply); and every problem of a pool is reported at once.
func TestAccPlanTimeValidation(t *testing.T) {
	db := newAccDB(t)
	first := `resource "ipam_cluster" "c" {
  name          = "c1"
  prefix        = "2001:db8::/48"
  force_destroy = true
}
resource "ipam_pool" "a" {
  cluster_id    = ipam_cluster.c.id
  name          = "a"
  cidrs         = ["203.0.113.0/24"]
  force_destroy = true
}
`
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(first)},
			{
				Config: db.config(first + `resource "ipam_cluster" "d" {
  name   = "c2"
  prefix = "2001:db8:0:100::/56"
}
resource "ipam_cluster" "e" {
  name   = "c3"
  prefix = "2001:db8:1::/48"
}
`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid Cluster.*2001:db8:0:100::/56 overlaps\s+cluster\s+"c1"\s+\(2001:db8::/48\)`),
			},
			{
				// c3 is new: its pool's public block is taken by c1's pool a.
				Config: db.config(first + `resource "ipam_cluster" "e" {
  name   = "c3"
  prefix = "2001:db8:1::/48"
}
resource "ipam_pool" "b" {
  cluster_id = ipam_cluster.e.id
  name       = "b"
  cidrs      = ["203.0.113.128/25", "198.51.100.0/24"]
}
`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)203\.0\.113\.128/25 overlaps 203\.0\.113\.0/24 of pool\s+"c1/a"\s+in\s+cluster\s+"c1"`),
			},
			{
				// Two bad exclusions: both are named.
				Config: db.config(first + `resource "ipam_pool" "x" {
  cluster_id = ipam_cluster.c.id
  name       = "x"
  cidrs      = ["198.51.100.0/24"]
  exclude    = ["192.0.2.1/32", "2001:db8::1/128"]
}
`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)exclusion 192\.0\.2\.1/32 is not inside any block.*exclusion 2001:db8::1/128 is not of\s+the\s+pool's\s+address\s+family`),
			},
			// Nothing of the above was written: the first configuration plans empty.
			{Config: db.config(first), PlanOnly: true},
		},
	})
}
