package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// Instances that grow their node's blocks in the apply that creates them:
// the blocks resource, applied before them, still holds the one block it
// made; the data source, read after them (depends_on), shows both blocks in
// the same apply, and so does the output built from it. A node without
// blocks is refused on node_id, naming the resource to give it.
func TestAccNodeInstanceBlocksDataSource(t *testing.T) {
	db := newAccDB(t)
	cfg := db.config(testCluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n1"
}
resource "ipam_node_instance_blocks" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = ipam_node_address.n.node_id
  max_blocks = 4
}
resource "ipam_instance_address" "vm" {
  count       = 20
  cluster_id  = ipam_cluster.c.id
  instance_id = "vm-${count.index}"
  org_id      = "acme"
  env_id      = "prod"
  node_id     = ipam_node_instance_blocks.n.node_id
}
data "ipam_node_instance_blocks" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = ipam_node_instance_blocks.n.node_id
  depends_on = [ipam_instance_address.vm]
}
output "allowed_ips" {
  value = concat([ipam_node_address.n.cidr], data.ipam_node_instance_blocks.n.blocks)
}
`)
	ds := "data.ipam_node_instance_blocks.n"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(testCluster)},
			{
				Config: cfg,
				ConfigStateChecks: []statecheck.StateCheck{
					// 20 instances in blocks of 16: the allocations grew the node to two.
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("blocks"), knownvalue.ListSizeExact(2)),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("capacity"), knownvalue.Int64Exact(32)),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("used"), knownvalue.Int64Exact(20)),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("free"), knownvalue.Int64Exact(12)),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("target_blocks"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("id"), knownvalue.StringExact("c1/n1")),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("block_prefix_length"), knownvalue.Int64Exact(124)),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("max_blocks"), knownvalue.Int64Exact(4)),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("demand"), knownvalue.Null()),
					statecheck.ExpectKnownOutputValue("allowed_ips", knownvalue.ListSizeExact(3)),
					// What the data source is for: the resource was applied before the instances.
					statecheck.ExpectKnownValue("ipam_node_instance_blocks.n", tfjsonpath.New("blocks"), knownvalue.ListSizeExact(1)),
				},
				Check: checkBlocksSound(db),
			},
			{
				Config: db.config(testCluster + `data "ipam_node_instance_blocks" "none" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n9"
}
`),
				ExpectError: regexp.MustCompile(`(?s)Node Has No Instance Blocks.*node_id.*n9 of cluster c1 holds no\s+instance\s+blocks`),
			},
		},
	})
}
