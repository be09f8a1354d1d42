package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

func instanceConfig(db *accDB, mtu int, env, node string) string {
	return db.config(fmt.Sprintf(`resource "ipam_cluster" "c" {
  name          = "c1"
  prefix        = "2001:db8::/48"
  mtu           = %d
  dns_servers   = ["2001:db8::53"]
  force_destroy = true
}
resource "ipam_instance_address" "i" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "web-1"
  org_id      = "acme"
  env_id      = %q
  node_id     = %q
}`, mtu, env, node))
}

func TestAccInstanceAddress_lifecycle(t *testing.T) {
	db := newAccDB(t)
	res := "ipam_instance_address.i"
	same := statecheck.CompareValue(compare.ValuesSame())
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: instanceConfig(db, 1420, "prod", "node-a"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("c1/web-1")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("address"), knownvalue.StringExact("2001:db8:0:1::1")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("cidr"), knownvalue.StringExact("2001:db8:0:1::1/128")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gateway_ipv6"), knownvalue.StringExact("fe80::1")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("mtu"), knownvalue.Int64Exact(1420)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("dns_servers"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("2001:db8::53")})),
					same.AddStateValue(res, tfjsonpath.New("address")),
				},
				Check: func(*terraform.State) error {
					return db.expectRows(1, `SELECT count(*) FROM ipam_events WHERE type = 'instance.allocated'
						AND org_id = 'acme' AND env_id = 'prod' AND instance_id = 'web-1' AND node_id = 'node-a'`)()
				},
			},
			{ResourceName: res, ImportState: true, ImportStateVerify: true, ImportStateId: "c1/web-1"},
			{
				// Moving the instance to another node updates the record in place; the address stays.
				Config: instanceConfig(db, 1420, "prod", "node-b"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{same.AddStateValue(res, tfjsonpath.New("address"))},
				Check: func(*terraform.State) error {
					return db.expectRows(1, `SELECT count(*) FROM ipam_instances WHERE instance_id = 'web-1' AND node_id = 'node-b' AND state = 'active'`)()
				},
			},
			{
				// A cluster MTU change reaches the instance's network block on refresh.
				Config: instanceConfig(db, 1380, "prod", "node-b"),
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr("ipam_cluster.c", "mtu", "1380"),
				),
			},
			{
				RefreshState: true,
				Check:        resource.TestCheckResourceAttr(res, "mtu", "1380"),
			},
			{
				// Out-of-band release: the plan re-creates it, with the same address.
				PreConfig: func() {
					db.exec(`UPDATE ipam_allocations SET state = 'cooling', released_at = now(), reusable_at = now() + interval '1 day' WHERE instance_id = 'web-1'`)
				},
				Config:            instanceConfig(db, 1380, "prod", "node-b"),
				ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate)}},
				ConfigStateChecks: []statecheck.StateCheck{same.AddStateValue(res, tfjsonpath.New("address"))},
			},
			{
				// A new environment is a new owner record: replacement, shown as such.
				// Another tenant does not get the address inside its cooldown:
				// the plan leaves the new one to the apply, which takes another.
				Config: instanceConfig(db, 1380, "staging", "node-b"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionDestroyBeforeCreate),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("address")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("address"), knownvalue.StringExact("2001:db8:0:1::2")),
				},
				Check: func(*terraform.State) error {
					if err := db.expectRows(1, `SELECT count(*) FROM ipam_allocations WHERE instance_id = 'web-1' AND env_id = 'staging' AND state = 'active'`)(); err != nil {
						return err
					}
					return db.expectRows(1, `SELECT count(*) FROM ipam_allocations WHERE address = '2001:db8:0:1::1' AND env_id = 'prod' AND state = 'cooling'`)()
				},
			},
		},
	})
}

// Given the cluster's network_revision, an instance's network block (and an
// output built from it) follows a change of the cluster's MTU or DNS servers
// in the same apply, its address kept; the plan after it is empty.
func TestAccInstanceAddress_clusterSettingsInTheSameApply(t *testing.T) {
	db := newAccDB(t)
	res := "ipam_instance_address.i"
	cfg := func(mtu int, dns string) string {
		return db.config(fmt.Sprintf(`resource "ipam_cluster" "c" {
  name          = "c1"
  prefix        = "2001:db8::/48"
  mtu           = %d
  dns_servers   = [%q]
  force_destroy = true
}
resource "ipam_instance_address" "i" {
  cluster_id               = ipam_cluster.c.id
  instance_id              = "web-1"
  org_id                   = "acme"
  env_id                   = "prod"
  cluster_network_revision = ipam_cluster.c.network_revision
}
output "workload_mtu" {
  value = ipam_instance_address.i.mtu
}`, mtu, dns))
	}
	same := statecheck.CompareValue(compare.ValuesSame())
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:            cfg(1420, "2001:db8::53"),
				ConfigStateChecks: []statecheck.StateCheck{same.AddStateValue(res, tfjsonpath.New("address"))},
			},
			{
				Config: cfg(1380, "2001:db8::54"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("ipam_cluster.c", plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
						plancheck.ExpectUnknownValue(res, tfjsonpath.New("mtu")),
					},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("mtu"), knownvalue.Int64Exact(1380)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("dns_servers"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("2001:db8::54")})),
					statecheck.ExpectKnownOutputValue("workload_mtu", knownvalue.Int64Exact(1380)),
					same.AddStateValue(res, tfjsonpath.New("address")),
				},
			},
			{
				// The instance moves to a node: with the cluster's revision
				// unchanged, the plan shows its network block as it is.
				Config: strings.Replace(cfg(1380, "2001:db8::54"), `env_id                   = "prod"`, `env_id                   = "prod"
  node_id                  = "node-x"`, 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("mtu"), knownvalue.Int64Exact(1380)),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("gateway_ipv6"), knownvalue.StringExact("fe80::1")),
				}},
			},
			{
				// A change of something else of the cluster leaves the instances alone.
				Config: strings.Replace(strings.Replace(cfg(1380, "2001:db8::54"), `force_destroy = true`, `force_destroy = true
  instance_cooldown = "2h"`, 1), `env_id                   = "prod"`, `env_id                   = "prod"
  node_id                  = "node-x"`, 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionNoop),
				}},
			},
		},
	})
}

func TestAccInstanceAddress_badInput(t *testing.T) {
	db := newAccDB(t)
	inst := func(body string) string {
		return db.config(testCluster + "resource \"ipam_instance_address\" \"bad\" {\n  cluster_id = ipam_cluster.c.id\n" + body + "\n}")
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: inst("instance_id = \"\"\n org_id = \"o\"\n env_id = \"e\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Invalid instance_id.*must not be empty`)},
			{Config: inst("instance_id = \"i\"\n org_id = \"o/x\"\n env_id = \"e\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Invalid org_id.*may only contain`)},
			{Config: inst("instance_id = \"i\"\n org_id = \"o\"\n env_id = \"e\"\n address = \"fe80::1%eth0\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Invalid address.*zones`)},
			{Config: inst("org_id = \"o\"\n env_id = \"e\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)"instance_id" is required`)},
		},
		CheckDestroy: func(*terraform.State) error { return db.nothingWritten() },
	})
}
