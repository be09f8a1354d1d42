package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
)

// After `terraform state rm` (here a removed block that keeps the object),
// declaring the resource again is refused, and the refusal names the import
// ID of the resource's own importer: importing with exactly that ID adopts
// the object, and the next plan is empty.
func TestAccImportHintsImport(t *testing.T) {
	const pool = `resource "ipam_pool" "a" {
  cluster_id    = ipam_cluster.c.id
  name          = "a"
  cidrs         = ["198.51.100.0/24"]
  force_destroy = true
}
`
	for _, c := range []struct {
		addr, hcl, base, id string
		// update: the import plans an update, of force_destroy, which lives
		// in the configuration and the state only.
		update bool
	}{
		{"ipam_cluster.c", testCluster, "", "c1", true},
		{"ipam_pool.a", pool, testCluster, "c1/a", true},
		{"ipam_node_address.n", `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n1"
}
`, testCluster, "c1/n1", false},
		{"ipam_instance_address.i", `resource "ipam_instance_address" "i" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "web-1"
  org_id      = "acme"
  env_id      = "prod"
}
`, testCluster, "c1/web-1", false},
		{"ipam_env_ipv4.e", `resource "ipam_env_ipv4" "e" {
  pool_id = ipam_pool.a.id
  org_id  = "acme"
  env_id  = "shop-prod"
}
`, testCluster + pool, "c1/a/shop-prod", false},
		{"ipam_address_set.s", `resource "ipam_address_set" "s" {
  cluster_id = ipam_cluster.c.id
  owner_id   = "lb-1"
  addresses = {
    overlay = { family = "ipv6" }
    public  = { pools = [ipam_pool.a.id] }
  }
}
`, testCluster + pool, "c1/lb-1", false},
		// Node blocks follow the same rule: refused, not re-adopted silently.
		{"ipam_node_instance_blocks.b", `resource "ipam_node_instance_blocks" "b" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
  demand     = 10
}
`, testCluster, "c1/node-a", false},
	} {
		typ := strings.Split(c.addr, ".")[0]
		t.Run(typ, func(t *testing.T) {
			db := newAccDB(t)
			removed := fmt.Sprintf("removed {\n  from = %s\n  lifecycle { destroy = false }\n}\n", c.addr)
			// Terraform wraps the text: any run of spaces may be a line break.
			hint := strings.ReplaceAll(regexp.QuoteMeta(fmt.Sprintf("terraform import %s.NAME %s", typ, c.id)), " ", `\s+`)
			action := plancheck.ResourceActionNoop
			if c.update {
				action = plancheck.ResourceActionUpdate
			}
			imported := fmt.Sprintf("import {\n  to = %s\n  id = %q\n}\n", c.addr, c.id)
			resource.ParallelTest(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{
					{Config: db.config(c.base + c.hcl)},
					{Config: db.config(c.base + removed)},
					{Config: db.config(c.base + c.hcl), ExpectError: regexp.MustCompile(hint)},
					{
						Config: db.config(c.base + c.hcl + imported),
						ConfigPlanChecks: resource.ConfigPlanChecks{
							PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(c.addr, action)},
						},
					},
					{Config: db.config(c.base + c.hcl), PlanOnly: true},
				},
			})
		})
	}
}
