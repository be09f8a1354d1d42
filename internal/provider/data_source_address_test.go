package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

const addressOwners = testCluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n1"
}
`

const addressInstance = `resource "ipam_instance_address" "i" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "i1"
  org_id      = "acme"
  env_id      = "prod"
  node_id     = "n1"
}
`

const addressLookups = `data "ipam_address" "instance" {
  address    = "2001:DB8:0:1::1"
  depends_on = [ipam_cluster.c]
}
data "ipam_address" "never_used" {
  address    = "2001:db8:0:1::ff"
  cluster_id = "c1"
  depends_on = [ipam_cluster.c]
}
data "ipam_address" "excluded" {
  address    = "2001:db8:0:1::"
  depends_on = [ipam_cluster.c]
}
`

func TestAccAddressDataSource(t *testing.T) {
	db := newAccDB(t)
	inst := "data.ipam_address.instance"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// Looked up from the resource's address: active, with its owner.
				Config: db.config(addressOwners + addressInstance + `data "ipam_address" "node" {
  address = ipam_node_address.n.address
}
`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.ipam_address.node", tfjsonpath.New("state"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue("data.ipam_address.node", tfjsonpath.New("category"), knownvalue.StringExact("node")),
					statecheck.ExpectKnownValue("data.ipam_address.node", tfjsonpath.New("node_id"), knownvalue.StringExact("n1")),
					statecheck.ExpectKnownValue("data.ipam_address.node", tfjsonpath.New("id"), knownvalue.StringExact("c1/2001:db8::1")),
				},
			},
			{
				Config: db.config(addressOwners + addressInstance + addressLookups),
				ConfigStateChecks: []statecheck.StateCheck{
					// The configured spelling is kept.
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("address"), knownvalue.StringExact("2001:DB8:0:1::1")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("cluster_id"), knownvalue.StringExact("c1")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("pool_id"), knownvalue.StringExact("c1/instance")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("category"), knownvalue.StringExact("instance")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("cidr"), knownvalue.StringExact("2001:db8:0:1::/64")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("state"), knownvalue.StringExact("active")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("last_holder"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("owner_kind"), knownvalue.StringExact("instance")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("owner_id"), knownvalue.StringExact("i1")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("org_id"), knownvalue.StringExact("acme")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("env_id"), knownvalue.StringExact("prod")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("instance_id"), knownvalue.StringExact("i1")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("node_id"), knownvalue.StringExact("n1")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("actor"), knownvalue.StringExact("terraform")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("allocated_at"), knownvalue.NotNull()),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("released_at"), knownvalue.Null()),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("allocation_id"), knownvalue.NotNull()),
					statecheck.ExpectKnownValue("data.ipam_address.never_used", tfjsonpath.New("state"), knownvalue.StringExact("free")),
					statecheck.ExpectKnownValue("data.ipam_address.never_used", tfjsonpath.New("allocation_id"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.ipam_address.never_used", tfjsonpath.New("owner_id"), knownvalue.Null()),
					statecheck.ExpectKnownValue("data.ipam_address.excluded", tfjsonpath.New("state"), knownvalue.StringExact("excluded")),
				},
			},
			// The instance is destroyed; read again, its address is cooling and names its last holder.
			{Config: db.config(addressOwners + addressLookups)},
			{
				Config: db.config(addressOwners + addressLookups),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("state"), knownvalue.StringExact("cooling")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("last_holder"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("owner_id"), knownvalue.StringExact("i1")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("org_id"), knownvalue.StringExact("acme")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("env_id"), knownvalue.StringExact("prod")),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("released_at"), knownvalue.NotNull()),
					statecheck.ExpectKnownValue(inst, tfjsonpath.New("reusable_at"), knownvalue.NotNull()),
				},
			},
			{
				Config:      db.config(addressOwners + `data "ipam_address" "x" { address = "2001:db9::1" }`),
				ExpectError: regexp.MustCompile(`(?s)Address Not Found.*2001:db9::1 is in no pool of any cluster`),
			},
			{
				Config:      db.config(addressOwners + `data "ipam_address" "x" { address = "2001:db8:0:5::1" }`),
				ExpectError: regexp.MustCompile(`(?s)Address Not Found.*inside the prefix of cluster "c1" but\s+in\s+none\s+of\s+its\s+pools`),
			},
			{
				Config:      db.config(`data "ipam_address" "x" { address = "2001:db8::1/64" }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid address.*prefix lengths`),
			},
			// The post-test destroy runs with the last configuration.
			{Config: db.config(addressOwners)},
		},
	})
}
