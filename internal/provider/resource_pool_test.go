package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// poolConfig: a cluster, a pool with the given body, and n environments taking an IPv4 each.
func poolConfig(db *accDB, poolBody string, envs ...string) string {
	hcl := testCluster + `resource "ipam_pool" "v4" {
  cluster_id    = ipam_cluster.c.id
  name          = "public-v4"
  force_destroy = true
` + poolBody + "\n}\n"
	for _, e := range envs {
		hcl += `resource "ipam_env_ipv4" "` + e + `" {
  pool_id = ipam_pool.v4.id
  org_id  = "acme"
  env_id  = "` + e + `"
}
`
	}
	return db.config(hcl)
}

func TestAccPool_blocksGapsGrowShrink(t *testing.T) {
	db := newAccDB(t)
	res := "ipam_pool.v4"
	blocks := `cidrs   = ["198.51.100.0/29", "203.0.113.8/31"]
  exclude = ["198.51.100.2/31", "198.51.100.4"]`
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// /29: .1 .5 .6 usable (network, broadcast and the gaps excluded); /31: both.
				Config: poolConfig(db, blocks, "e1", "e2", "e3", "e4"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					// Family and size are known at plan.
					plancheck.ExpectKnownValue(res, tfjsonpath.New("size"), knownvalue.Int64Exact(5)),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("family"), knownvalue.StringExact("ipv4")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("c1/public-v4")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("cooldown"), knownvalue.StringExact("24h")),
				},
				// Allocation order follows block order and skips every excluded address.
				Check: func(*terraform.State) error {
					return db.expectRows(4, `SELECT count(*) FROM ipam_ipv4_allocations WHERE state = 'active'
						AND host(ipv4_address) IN ('198.51.100.1', '198.51.100.5', '198.51.100.6', '203.0.113.8')`)()
				},
			},
			{ResourceName: res, ImportState: true, ImportStateVerify: true, ImportStateId: "c1/public-v4",
				// force_destroy lives only in configuration and state.
				ImportStateVerifyIgnore: []string{"force_destroy"}},
			{
				// Exhaustion names the pool, its size, the cooling count and the next reusable time.
				Config: poolConfig(db, blocks, "e1", "e2", "e3", "e4", "e5", "e6"),
				// Five taken, by allocations and by the plan-time holds of the
				// creates still running (counted apart).
				ExpectError: regexp.MustCompile(`ipam_exhausted:\s+pool\s+"c1/public-v4"\s+has\s+no\s+free\s+address:\s+size\s+5,\s+` +
					`(5\s+active|[1-4]\s+active,\s+[1-4]\s+held\s+by\s+plan-time\s+holds),\s+0\s+cooling`),
			},
			{
				// Growth in place: a block appended.
				Config: poolConfig(db, `cidrs   = ["198.51.100.0/29", "203.0.113.8/31", "192.0.2.0/30"]
  exclude = ["198.51.100.2/31", "198.51.100.4"]`, "e1", "e2", "e3", "e4", "e5", "e6"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("size"), knownvalue.Int64Exact(7)),
				}},
				Check: func(*terraform.State) error {
					// Of e5 and e6, one took the last free address of the old blocks, the
					// other the first of the new block.
					return db.expectRows(1, `SELECT count(*) FROM ipam_ipv4_allocations WHERE state = 'active'
						AND env_id IN ('e5', 'e6') AND host(ipv4_address) = '192.0.2.1'`)()
				},
			},
			{
				// Excluding an active address is refused at plan, on exclude.
				Config: poolConfig(db, `cidrs   = ["198.51.100.0/29", "203.0.113.8/31", "192.0.2.0/30"]
  exclude = ["198.51.100.2/31", "198.51.100.4", "192.0.2.1"]`, "e1", "e2", "e3", "e4", "e5", "e6"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)exclude\s+=\s+\[.*would remove addresses that are in use.*192\.0\.2\.1\s+\(active`),
			},
			{
				// Removing the block that holds active addresses is refused at
				// plan, listing them.
				Config:      poolConfig(db, `cidrs = ["198.51.100.0/29", "203.0.113.8/31"]`, "e1", "e2", "e3", "e4", "e5", "e6"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)would remove addresses that are in use,\s+held\s+by\s+a\s+plan\s+or\s+cooling:\s+192\.0\.2\.1\s+\(active\s+by\s+env_ipv4\s+e[56]\)`),
			},
		},
	})
}

func TestAccPool_badInput(t *testing.T) {
	db := newAccDB(t)
	bad := func(body, want string) resource.TestStep {
		return resource.TestStep{Config: poolConfig(db, body), PlanOnly: true, ExpectError: regexp.MustCompile(want)}
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			bad(`cidrs = ["192.0.2.0/24", "2001:db8:9::/64"]`, `(?s)cidrs.*different address families`),
			bad(`cidrs = ["192.0.2.0/24", "192.0.2.128/25"]`, `(?s)cidrs.*overlap`),
			bad("cidrs = [\"192.0.2.0/24\"]\n  exclude = [\"198.51.100.1\"]", `(?s)exclude.*not inside any block`),
			bad(`cidrs = ["192.0.2.300/24"]`, `(?s)Invalid cidrs.*not a valid CIDR`),
			bad("cidrs = [\"192.0.2.0/24\"]\n  exclude = [\"192.0.2.1%eth0\"]", `(?s)Invalid exclude.*zones`),
			bad(`cidrs = []`, `(?s)cidrs.*at least 1`),
			// With the cluster in place, an IPv6 pool overlapping the instance prefix fails at plan.
			{Config: db.config(testCluster)},
			bad(`cidrs = ["2001:db8:0:1:ffff::/80"]`, `(?s)overlaps the instance prefix 2001:db8:0:1::/64`),
			// Two new pools of one plan over the same blocks: the database
			// knows neither, the plan fails (the apply failed half-way).
			{
				Config: db.config(testCluster + `resource "ipam_pool" "a" {
  cluster_id = ipam_cluster.c.id
  name       = "same-a"
  cidrs      = ["10.1.0.0/24"]
}
resource "ipam_pool" "b" {
  cluster_id = ipam_cluster.c.id
  name       = "same-b"
  cidrs      = ["10.1.0.128/25"]
}`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid Pool.*10\.1\.0\.(0/24|128/25) overlaps 10\.1\.0\.(0/24|128/25) of pool\s+c1/same-[ab],\s+which\s+this\s+plan\s+also\s+creates`),
			},
			{
				Config: db.config(testCluster),
				Check: func(*terraform.State) error {
					return db.expectRows(0, `SELECT count(*) FROM ipam_pools WHERE category IN ('ipv4', 'ipv6')`)()
				},
			},
		},
	})
}

// An IPv6 pool grows only at its end: a block put in front is refused at
// plan, not after the plan showed an update in place.
func TestAccPool_ipv6GrowsAtItsEnd(t *testing.T) {
	db := newAccDB(t)
	pool := func(cidrs string) string {
		return db.config(testCluster + `resource "ipam_pool" "v6" {
  cluster_id    = ipam_cluster.c.id
  name          = "v6"
  cidrs         = ` + cidrs + `
  force_destroy = true
}
`)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: pool(`["2001:db8:0:50::/120"]`)},
			{
				Config:      pool(`["2001:db8:0:51::/120", "2001:db8:0:50::/120"]`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)an IPv6 pool can only grow by appending blocks after\s+2001:db8:0:50::/120`),
			},
			{
				Config: pool(`["2001:db8:0:50::/120", "2001:db8:0:51::/120"]`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ipam_pool.v6", plancheck.ResourceActionUpdate),
				}},
			},
		},
	})
}
