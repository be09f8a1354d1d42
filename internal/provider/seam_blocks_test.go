package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// Node blocks and an instance on that node in one apply, the instance
// ordered after the blocks by depends_on: the plan leaves the instance's
// address to the apply (its node's blocks come with it), which allocates it
// inside them; the plan after it is empty.
func TestAccNodeInstanceBlocks_sameApplyAsInstance(t *testing.T) {
	db := newAccDB(t)
	config := db.config(testCluster + `resource "ipam_node_instance_blocks" "x" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-x"
}
resource "ipam_instance_address" "web" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "web-2"
  org_id      = "acme"
  env_id      = "prod"
  node_id     = "node-x"
  depends_on  = [ipam_node_instance_blocks.x]
}
`)
	web := "ipam_instance_address.web"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			// The cluster exists before the plan that adds both (else nothing is reserved at plan).
			{Config: db.config(testCluster)},
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue(web, tfjsonpath.New("address")),
				}},
				Check: resource.ComposeTestCheckFunc(checkBlocksSound(db), func(*terraform.State) error {
					return db.expectRows(1, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'web-2' AND state = 'active'
						AND pool_id = 'c1/blocks/node-x'`)()
				}),
			},
			{Config: config, PlanOnly: true},
		},
	})
}

// An instance moved between nodes keeps its address when neither node has
// instance blocks (an update in place), and is replaced when the node it
// leaves has some: its address lies in that node's blocks.
func TestAccInstanceAddress_nodeMoveWithBlocks(t *testing.T) {
	db := newAccDB(t)
	on := func(node string) string {
		return db.config(testCluster + `resource "ipam_node_instance_blocks" "x" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-x"
}
resource "ipam_instance_address" "web" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "web-3"
  org_id      = "acme"
  env_id      = "prod"
  node_id     = "` + node + `"
  depends_on  = [ipam_node_instance_blocks.x]
}
`)
	}
	web := "ipam_instance_address.web"
	inBlocks := db.expectRows(1, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'web-3' AND state = 'active'
		AND pool_id = 'c1/blocks/node-x'`)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(testCluster)},
			{Config: on("node-a")},
			{Config: on("node-b"), ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(web, plancheck.ResourceActionUpdate),
			}}},
			{Config: on("node-x"), ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(web, plancheck.ResourceActionReplace),
			}}, Check: func(*terraform.State) error { return inBlocks() }},
			{Config: on("node-b"), ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(web, plancheck.ResourceActionReplace),
			}}},
			{Config: on("node-b"), PlanOnly: true},
		},
	})
}
