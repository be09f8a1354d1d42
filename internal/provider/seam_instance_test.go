package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// An instance moved between nodes in the same apply as a change of its
// cluster's mtu: the in-place update must not report an inconsistent result,
// and the instance's network block must carry the new mtu.
func TestAccInstanceAddress_moveWithClusterChange(t *testing.T) {
	db := newAccDB(t)
	config := func(mtu int, node string) string {
		return db.config(fmt.Sprintf(`resource "ipam_cluster" "c" {
  name          = "c1"
  prefix        = "2001:db8::/48"
  mtu           = %d
  force_destroy = true
}
resource "ipam_instance_address" "web" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "web-1"
  org_id      = "acme"
  env_id      = "prod"
  node_id     = %q
}
`, mtu, node))
	}
	web := "ipam_instance_address.web"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config(1420, "node-a")},
			{
				Config: config(1500, "node-b"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(web, tfjsonpath.New("mtu"), knownvalue.Int64Exact(1500)),
					statecheck.ExpectKnownValue(web, tfjsonpath.New("node_id"), knownvalue.StringExact("node-b")),
				},
			},
		},
	})
}

// A cluster and a pool whose durations and prefixes are spelled otherwise
// than the canonical form ("720h" for "30d", "90m" for "1h30m",
// "2001:DB8::/48"): imported into a new
// state with an import block, the configuration that wrote them plans no
// change. (force_destroy lives only in Terraform's state, so an import reads
// it as false: these resources leave it unset.)
func TestAccImport_spellingPlansNoChange(t *testing.T) {
	db := newAccDB(t)
	config := db.config(`resource "ipam_cluster" "c" {
  name              = "c1"
  prefix            = "2001:DB8::/48"
  node_prefix       = "2001:0db8::/64"
  node_cooldown     = "720h"
  instance_cooldown = "1440m"
}
resource "ipam_pool" "v4" {
  cluster_id    = ipam_cluster.c.id
  name          = "public-v4"
  cidrs         = ["198.51.100.0/29"]
  cooldown      = "90m"
}
`)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: config},
			{Config: config, ResourceName: "ipam_cluster.c", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "c1"},
			{Config: config, ResourceName: "ipam_pool.v4", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "c1/public-v4"},
		},
	})
}
