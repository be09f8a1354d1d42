package provider

import (
	"context"
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

const testCluster = `resource "ipam_cluster" "c" {
  name          = "c1"
  prefix        = "2001:db8::/48"
  force_destroy = true
}
`

func TestAccNodeAddress_lifecycle(t *testing.T) {
	db := newAccDB(t)
	res := "ipam_node_address.n"
	sameAddress := statecheck.CompareValue(compare.ValuesSame())
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: db.config(testCluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
}`),
				// The plan shows the id: it is made of the cluster and the node.
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("c1/node-a")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("id"), knownvalue.StringExact("c1/node-a")),
					// The first node address is ordinal 1 of the node prefix: ::0 is never handed out.
					statecheck.ExpectKnownValue(res, tfjsonpath.New("address"), knownvalue.StringExact("2001:db8::1")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("cidr"), knownvalue.StringExact("2001:db8::1/128")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("allocated_at"), knownvalue.StringRegexp(regexp.MustCompile(`^\d{4}-\d\d-\d\dT`))),
					sameAddress.AddStateValue(res, tfjsonpath.New("address")),
				},
				Check: func(*terraform.State) error {
					return db.expectRows(1, `SELECT count(*) FROM ipam_events WHERE type = 'node.enrolled' AND node_id = 'node-a'`)()
				},
			},
			{ResourceName: res, ImportState: true, ImportStateVerify: true, ImportStateId: "c1/node-a"},
			{
				// A second apply of the same configuration plans nothing.
				Config: db.config(testCluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				// Out-of-band release: refresh drops it, the plan creates it again,
				// and the node gets its own cooling address back.
				PreConfig: func() {
					db.exec(`UPDATE ipam_allocations SET state = 'cooling', released_at = now(), reusable_at = now() + interval '30 days' WHERE node_id = 'node-a'`)
				},
				Config: db.config(testCluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
}`),
				ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate)}},
				ConfigStateChecks: []statecheck.StateCheck{sameAddress.AddStateValue(res, tfjsonpath.New("address"))},
			},
			{
				// A new node id is a replacement, shown as such; the old address cools down.
				Config: db.config(testCluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-b"
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionDestroyBeforeCreate)}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("address"), knownvalue.StringExact("2001:db8::2")),
				},
				Check: func(*terraform.State) error {
					return db.expectRows(1, `SELECT count(*) FROM ipam_allocations WHERE node_id = 'node-a' AND state = 'cooling'
						AND reusable_at > now() + interval '29 days'`)()
				},
			},
			{
				// Claiming an exact address replaces; an unset address keeps the held one.
				Config: db.config(testCluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-b"
  address    = "2001:db8::99"
}`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionDestroyBeforeCreate)}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("address"), knownvalue.StringExact("2001:db8::99")),
				},
			},
		},
		CheckDestroy: func(*terraform.State) error {
			return db.expectRows(0, `SELECT count(*) FROM ipam_allocations WHERE state = 'active'`)()
		},
	})
}

func TestAccNodeAddress_badInput(t *testing.T) {
	db := newAccDB(t)
	node := func(body string) string {
		return db.config(testCluster + "resource \"ipam_node_address\" \"bad\" {\n  cluster_id = ipam_cluster.c.id\n" + body + "\n}")
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: node(`node_id = ""`), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Invalid node_id.*must not be empty`)},
			{Config: node(`node_id = "a b'; DROP TABLE x"`), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Invalid node_id.*may only contain`)},
			{Config: node("node_id = \"n1\"\n  address = \"10.0.0.1\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Invalid address.*not an IPv6 address`)},
			{Config: node("node_id = \"n1\"\n  address = \"2001:db8::1/128\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Invalid address.*prefix lengths`)},
			// With the cluster in place, a claim outside its node prefix fails at plan.
			{Config: db.config(testCluster)},
			{Config: node("node_id = \"n1\"\n  address = \"2001:db8:1::5\""), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)Address Cannot Be Claimed.*outside pool "c1/node" \(2001:db8::/64\)`)},
			{
				Config: db.config(testCluster),
				Check: func(*terraform.State) error {
					return db.expectRows(0, `SELECT count(*) FROM ipam_allocations`)()
				},
			},
		},
	})
}

func TestAccNodeAddress_exhausted(t *testing.T) {
	db := newAccDB(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			// A /126 node prefix holds 3 usable addresses (::0 is never handed out).
			Config: db.config(`resource "ipam_cluster" "c" {
  name          = "c1"
  prefix        = "2001:db8::/48"
  node_prefix   = "2001:db8::/126"
  force_destroy = true
}
resource "ipam_node_address" "n" {
  count      = 4
  cluster_id = ipam_cluster.c.id
  node_id    = "node-${count.index}"
}`),
			// The three addresses are active or held by the plan-time holds
			// of creates still running: how they split depends on timing.
			ExpectError: regexp.MustCompile(`(?s)ipam_exhausted: pool "c1/node" has no free address: size 3, (3 active|[0-2]\s+active,\s+[1-3]\s+held\s+by\s+plan-time\s+holds),\s+0\s+cooling`),
		}},
	})
}

func TestAccNodeAddress_importUnknown(t *testing.T) {
	db := newAccDB(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(testCluster)},
			{
				Config: db.config(testCluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "ghost"
}`),
				ResourceName:  "ipam_node_address.n",
				ImportState:   true,
				ImportStateId: "c1/ghost",
				ExpectError:   regexp.MustCompile(`Cannot import non-existent remote object`),
			},
			{
				Config: db.config(testCluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "ghost"
}`),
				ResourceName:  "ipam_node_address.n",
				ImportState:   true,
				ImportStateId: "no-slash",
				ExpectError:   regexp.MustCompile(`Expected .<cluster_id>/<node_id>.`),
			},
		},
	})
}

func TestAccProvider_unavailable(t *testing.T) {
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: `provider "ipam" {
  database_url     = "postgres://ipam:Sup3rSecretPw@127.0.0.1:1/ipam?sslmode=disable"
  connect_timeout  = "2s"
  failover_timeout = "1s"
}
resource "ipam_cluster" "c" {
  name   = "c1"
  prefix = "2001:db8::/48"
}`,
			// The error names host and port; the password never appears (checked below).
			ExpectError: regexp.MustCompile(`(?s)IPAM Database Unreachable.*Check that host and port.*ipam_unavailable: the IPAM database at 127\.0\.0\.1:1 cannot be reached`),
		}},
	})
}

// TestProviderErrorsNeverCarryThePassword drives Configure directly, so the
// whole diagnostic text can be searched for the secret.
func TestProviderErrorsNeverCarryThePassword(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{
		"postgres://ipam:Sup3rSecretPw@127.0.0.1:1/ipam?sslmode=disable",
		"host=127.0.0.1 port=1 user=ipam password=Sup3rSecretPw dbname=ipam sslmode=disable",
		"postgres://ipam:Sup3rSecretPw@127.0.0.1:notaport/ipam",
		// An '@' in the password, not percent-encoded: pgx ends the
		// password at it and took the rest for the host name.
		"postgres://ipam:Sup3r@SecretPw@127.0.0.1:1/ipam?sslmode=disable",
		"postgres://ipam:Sup3r@SecretPw@127.0.0.1:1,127.0.0.2:1/ipam?sslmode=disable",
	} {
		diags := configureWith(ctx, t, url)
		if !diags.HasError() {
			t.Fatalf("%s: configured against a closed port", url)
		}
		for _, d := range diags {
			if text := d.Summary() + d.Detail(); regexp.MustCompile(`Sup3r|SecretPw`).MatchString(text) {
				t.Fatalf("password leaked: %s", text)
			}
		}
	}
}
