package provider

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

func TestAccCluster_lifecycle(t *testing.T) {
	db := newAccDB(t)
	res := "ipam_cluster.test"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             func(*terraform.State) error { return db.expectRows(0, `SELECT count(*) FROM ipam_clusters`)() },
		Steps: []resource.TestStep{
			{
				Config: db.config(`resource "ipam_cluster" "test" {
  name   = "c1"
  prefix = "2a01:4f8:abcd::/48"
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate),
					// The carved sub-prefixes show in the plan.
					plancheck.ExpectKnownValue(res, tfjsonpath.New("node_prefix"), knownvalue.StringExact("2a01:4f8:abcd::/64")),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("instance_prefix"), knownvalue.StringExact("2a01:4f8:abcd:1::/64")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("c1")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("node_cooldown"), knownvalue.StringExact("30d")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("instance_cooldown"), knownvalue.StringExact("24h")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gateway_ipv6"), knownvalue.StringExact("fe80::1")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("mtu"), knownvalue.Int64Exact(1420)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("dns_servers"), knownvalue.ListExact([]knownvalue.Check{})),
				},
				Check: func(*terraform.State) error {
					return db.expectRows(1, `SELECT count(*) FROM ipam_events WHERE type = 'cluster.created'`)()
				},
			},
			{ResourceName: res, ImportState: true, ImportStateVerify: true, ImportStateId: "c1"},
			{
				// In-place update of the settings that may change.
				Config: db.config(`resource "ipam_cluster" "test" {
  name              = "c1"
  prefix            = "2a01:4f8:abcd::/48"
  instance_cooldown = "2h"
  node_cooldown     = "7d"
  mtu               = 1380
  dns_servers       = ["2001:4860:4860::8888", "2001:4860:4860::8844"]
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("mtu"), knownvalue.Int64Exact(1380)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("instance_cooldown"), knownvalue.StringExact("2h")),
				},
			},
			{
				// A new prefix re-carves the sub-prefixes: a replacement, shown as such.
				Config: db.config(`resource "ipam_cluster" "test" {
  name   = "c1"
  prefix = "2a01:4f8:beef::/56"
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionDestroyBeforeCreate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("node_prefix"), knownvalue.StringExact("2a01:4f8:beef::/64")),
				}},
			},
			{
				// Explicit, small sub-prefixes.
				Config: db.config(`resource "ipam_cluster" "test" {
  name            = "c1"
  prefix          = "2a01:4f8:beef::/56"
  node_prefix     = "2a01:4f8:beef::/120"
  instance_prefix = "2a01:4f8:beef:1::/64"
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("node_prefix"), knownvalue.StringExact("2a01:4f8:beef::/120")),
				},
			},
		},
	})
}

// A prefix change of a cluster whose addresses are active would fail half-way
// at apply (the replacement's destroy is refused): the plan fails instead,
// naming the addresses and what to do, and nothing changes. With
// force_destroy set the plan warns that they are released.
func TestAccCluster_prefixChangeWithActiveAddresses(t *testing.T) {
	db := newAccDB(t)
	cfg := func(prefix string, force bool) string {
		return db.config(fmt.Sprintf(`resource "ipam_cluster" "test" {
  name          = "c1"
  prefix        = %q
  force_destroy = %v
}
resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.test.id
  node_id    = "n1"
}`, prefix, force))
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: cfg("2a01:4f8:abcd::/48", false)},
			{
				Config: cfg("2a01:4f8:beef::/48", false),
				ExpectError: regexp.MustCompile(`(?s)Cluster Replacement Would Strand Its Addresses.*cluster "c1".*1 active\s+address \(1\s+node\).*` +
					`destroy\s+the\s+resources.*new\s+ipam_cluster`),
			},
			{
				Config: cfg("2a01:4f8:abcd::/48", false),
				Check: func(*terraform.State) error {
					return db.expectRows(1, `SELECT count(*) FROM ipam_clusters WHERE prefix = '2a01:4f8:abcd::/48'`)()
				},
			},
			{Config: cfg("2a01:4f8:abcd::/48", true)},
			{
				Config:             cfg("2a01:4f8:beef::/48", true),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true, // planned, with the warning
			},
		},
	})
}

func TestAccCluster_badInput(t *testing.T) {
	db := newAccDB(t)
	cases := []struct{ hcl, want string }{
		{`name = "c1"
  prefix = "10.0.0.0/8"`, `(?s)Invalid prefix.*not an IPv6 prefix`},
		{`name = "c1"
  prefix = "2001:db8::/65"`, `(?s)Invalid prefix.*at least a /64`},
		{`name = "c1"
  prefix = "2001:db8::1/48"`, `(?s)Invalid prefix.*host bits`},
		{`name = "c1"
  prefix = "2001:db8::/48"
  node_prefix = "2001:db8::/64"
  instance_prefix = "2001:db8::/80"`, `(?s)instance_prefix.*overlaps the node prefix`},
		// node_prefix on the default instance prefix: named as such, on node_prefix.
		{`name = "c1"
  prefix = "2001:db8::/48"
  node_prefix = "2001:db8:0:1::/64"`, `(?s)node_prefix 2001:db8:0:1::/64 overlaps the default instance_prefix,\s+2001:db8:0:1::/64.*Set\s+instance_prefix`},
		{`name = "c1"
  prefix = "2001:db8::/48"
  node_prefix = "2001:db9::/64"`, `(?s)node_prefix.*not inside the cluster prefix`},
		{`name = "c1"
  prefix = "2001:db8::/48"
  instance_cooldown = "30m"`, `(?s)Invalid instance_cooldown.*minimum of 1h`},
		{`name = ""
  prefix = "2001:db8::/48"`, `(?s)Invalid name.*must not be empty`},
		{`name = "c1"
  prefix = "2001:db8::/48"
  gateway_ipv6 = "fe80::1%eth0"`, `(?s)Invalid gateway_ipv6.*zones`},
		{`name = "c1"
  prefix = "2001:db8::/48"
  mtu = 1000`, `(?s)mtu.*between 1280 and 65535`},
	}
	var steps []resource.TestStep
	for _, c := range cases {
		steps = append(steps, resource.TestStep{
			Config:      db.config("resource \"ipam_cluster\" \"bad\" {\n  " + c.hcl + "\n}"),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(c.want),
		})
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps:                    steps,
		CheckDestroy:             func(*terraform.State) error { return db.nothingWritten() },
	})
}

// A plain destroy of a cluster whose node address is cooling succeeds, the
// address stays behind as a tombstone, and the same cluster created again at
// once hands another address to a new node.
func TestAccCluster_destroyLeavesTombstones(t *testing.T) {
	db := newAccDB(t)
	cluster := `resource "ipam_cluster" "c" {
  name   = "c1"
  prefix = "2001:db8::/48"
}
`
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(cluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n1"
}`)},
			{
				// The node address is destroyed first (cooling), then the
				// cluster, without force_destroy.
				Config: db.config(`removed {
  from = ipam_cluster.c
  lifecycle { destroy = true }
}`),
				Check: func(*terraform.State) error {
					if n := db.count(`SELECT count(*) FROM ipam_tombstones WHERE owner_id = 'n1' AND address = '2001:db8::1'
						AND reusable_at > now() + interval '29 days'`); n != 1 {
						return fmt.Errorf("n1's cooling address left %d tombstones, want 1", n)
					}
					return nil
				},
			},
			{
				Config: db.config(cluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n2"
}`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ipam_node_address.n", tfjsonpath.New("address"), knownvalue.StringExact("2001:db8::2")),
				},
			},
		},
	})
}

func TestAccClusterDataSource(t *testing.T) {
	db := newAccDB(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: db.config(`resource "ipam_cluster" "c" {
  name        = "c1"
  prefix      = "2001:db8::/48"
  dns_servers = ["2001:db8::53"]
}
data "ipam_cluster" "c" {
  name = ipam_cluster.c.name
}`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.ipam_cluster.c", tfjsonpath.New("instance_prefix"), knownvalue.StringExact("2001:db8:0:1::/64")),
					statecheck.ExpectKnownValue("data.ipam_cluster.c", tfjsonpath.New("node_cooldown"), knownvalue.StringExact("30d")),
					statecheck.ExpectKnownValue("data.ipam_cluster.c", tfjsonpath.New("dns_servers"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("2001:db8::53")})),
				},
			},
			{
				Config:      db.config(`data "ipam_cluster" "missing" { name = "nope" }`),
				ExpectError: regexp.MustCompile(`No cluster is named nope`),
			},
		},
	})
}
