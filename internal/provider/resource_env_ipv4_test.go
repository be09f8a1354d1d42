package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

const twoPools = testCluster + `resource "ipam_pool" "a" {
  cluster_id    = ipam_cluster.c.id
  name          = "a"
  cidrs         = ["198.51.100.0/24"]
  force_destroy = true
}
resource "ipam_pool" "b" {
  cluster_id    = ipam_cluster.c.id
  name          = "b"
  cidrs         = ["203.0.113.0/24"]
  force_destroy = true
}
`

func TestAccEnvIPv4_lifecycle(t *testing.T) {
	db := newAccDB(t)
	res := "ipam_env_ipv4.prod"
	same := statecheck.CompareValue(compare.ValuesSame())
	prod := `resource "ipam_env_ipv4" "prod" {
  pool_id = ipam_pool.a.id
  org_id  = "acme"
  env_id  = "prod"
}
`
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: db.config(twoPools + prod),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("c1/a/prod")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("address"), knownvalue.StringExact("198.51.100.1")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("cidr"), knownvalue.StringExact("198.51.100.1/24")),
					same.AddStateValue(res, tfjsonpath.New("address")),
				},
				Check: func(*terraform.State) error {
					return db.expectRows(1, `SELECT count(*) FROM ipam_events WHERE type = 'env.ipv4_addon_enabled' AND org_id = 'acme' AND env_id = 'prod'`)()
				},
			},
			{ResourceName: res, ImportState: true, ImportStateVerify: true, ImportStateId: "c1/a/prod"},
			{
				// An import adopts only what its ID names: prod's IPv4 lies in
				// pool a, not b.
				ResourceName: res, ImportState: true, ImportStateId: "c1/b/prod",
				ExpectError: regexp.MustCompile(`(?s)Import ID Names Another Pool.*198\.51\.100\.1\s+in\s+pool\s+c1/a,\s+not\s+in\s+pool\s+c1/b.*c1/a/prod`),
			},
			{
				// A second IPv4 for the same environment, from another pool, is refused.
				Config: db.config(twoPools + prod + `resource "ipam_env_ipv4" "again" {
  pool_id = ipam_pool.b.id
  org_id  = "acme"
  env_id  = "prod"
}
`),
				ExpectError: regexp.MustCompile(`(?s)owner_conflict: env_ipv4 "prod" in cluster "c1" already holds\s+198\.51\.100\.1`),
			},
			{
				// Exact claims: in use by another environment, then a free one.
				Config: db.config(twoPools + prod + `resource "ipam_env_ipv4" "dev" {
  pool_id = ipam_pool.a.id
  org_id  = "acme"
  env_id  = "dev"
  address = "198.51.100.1"
}
`),
				ExpectError: regexp.MustCompile(`(?s)address_in_use: 198\.51\.100\.1 is held by env_ipv4 "prod"`),
			},
			{
				Config: db.config(twoPools + prod + `resource "ipam_env_ipv4" "dev" {
  pool_id = ipam_pool.a.id
  org_id  = "acme"
  env_id  = "dev"
  address = "198.51.100.77"
}
`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ipam_env_ipv4.dev", tfjsonpath.New("address"), knownvalue.StringExact("198.51.100.77")),
				},
			},
			{
				// Disabling the add-on cools the address, with an event naming org and env.
				Config: db.config(twoPools + prod),
				Check: func(*terraform.State) error {
					return db.expectRows(1, `SELECT count(*) FROM ipam_events WHERE type = 'env.ipv4_addon_disabled' AND env_id = 'dev' AND org_id = 'acme'`)()
				},
			},
			{
				// Another environment may not claim it while it cools.
				Config: db.config(twoPools + prod + `resource "ipam_env_ipv4" "qa" {
  pool_id = ipam_pool.a.id
  org_id  = "acme"
  env_id  = "qa"
  address = "198.51.100.77"
}
`),
				ExpectError: regexp.MustCompile(`(?s)address_cooling: 198\.51\.100\.77 was released by env_ipv4 "dev"`),
			},
			{
				// Drift: released out of band, re-created with the same address.
				PreConfig: func() {
					db.exec(`UPDATE ipam_allocations SET state = 'cooling', released_at = now(), reusable_at = now() + interval '1 day' WHERE env_id = 'prod'`)
				},
				Config:            db.config(twoPools + prod),
				ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate)}},
				ConfigStateChecks: []statecheck.StateCheck{same.AddStateValue(res, tfjsonpath.New("address"))},
			},
		},
	})
}

func TestAccEnvIPv4_badInput(t *testing.T) {
	db := newAccDB(t)
	env := func(body string) string {
		return db.config(twoPools + "resource \"ipam_env_ipv4\" \"bad\" {\n" + body + "\n}")
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: env("pool_id = \"nopool\"\n org_id = \"o\"\n env_id = \"e\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Invalid pool_id.*not a pool id`)},
			{Config: env("pool_id = ipam_pool.a.id\n org_id = \"o\"\n env_id = \"e\"\n address = \"198.51.100.1.5\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Invalid address.*not a valid IP address`)},
			{Config: db.config(twoPools)},
			{Config: env("pool_id = ipam_pool.a.id\n org_id = \"o\"\n env_id = \"e\"\n address = \"203.0.113.5\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Address Cannot Be Claimed.*outside pool "c1/a"`)},
			{Config: env("pool_id = ipam_pool.a.id\n org_id = \"o\"\n env_id = \"e\"\n address = \"198.51.100.255\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Address Cannot Be Claimed.*never handed out`)},
			// An IPv6 pool: refused at plan, no hold taken.
			{Config: db.config(twoPools + v6Pool)},
			{Config: db.config(twoPools + v6Pool + "resource \"ipam_env_ipv4\" \"bad\" {\n pool_id = ipam_pool.v6.id\n org_id = \"o\"\n env_id = \"e\"\n}"),
				PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)pool c1/v6 is an IPv6 pool; an environment's IPv4 add-on\s+draws\s+from\s+an\s+IPv4\s+pool`)},
			{
				Config: db.config(twoPools),
				Check: func(*terraform.State) error {
					return db.expectRows(0, `SELECT count(*) FROM ipam_allocations WHERE state <> 'free'`)()
				},
			},
		},
	})
}

const v6Pool = `resource "ipam_pool" "v6" {
  cluster_id    = ipam_cluster.c.id
  name          = "v6"
  cidrs         = ["2001:db8:0:9::/120"]
  force_destroy = true
}
`
