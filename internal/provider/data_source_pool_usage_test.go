package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// usageConfig: cluster c1, a node, an IPv4 pool of six addresses and n
// environments taking one each, and the usage data source read after them.
func usageConfig(db *accDB, n int) string {
	hcl := testCluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n1"
}
resource "ipam_pool" "v4" {
  cluster_id    = ipam_cluster.c.id
  name          = "v4"
  cidrs         = ["198.51.100.0/29"]
  force_destroy = true
}
`
	deps := []string{"ipam_node_address.n", "ipam_pool.v4"}
	for i := 1; i <= n; i++ {
		hcl += fmt.Sprintf(`resource "ipam_env_ipv4" "e%d" {
  pool_id = ipam_pool.v4.id
  org_id  = "acme"
  env_id  = "e%d"
}
`, i, i)
		deps = append(deps, fmt.Sprintf("ipam_env_ipv4.e%d", i))
	}
	hcl += fmt.Sprintf(`data "ipam_pool_usage" "u" {
  cluster_id = ipam_cluster.c.id
  depends_on = [%s]
}
`, strings.Join(deps, ", "))
	return db.config(hcl)
}

func TestAccPoolUsageDataSource(t *testing.T) {
	db := newAccDB(t)
	ds := "data.ipam_pool_usage.u"
	cat := func(i int, attr string) tfjsonpath.Path {
		return tfjsonpath.New("categories").AtSliceIndex(i).AtMapKey(attr)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: usageConfig(db, 5),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("id"), knownvalue.StringExact("c1")),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("alert"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(ds, cat(0, "category"), knownvalue.StringExact("node")),
					statecheck.ExpectKnownValue(ds, cat(0, "active"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(ds, cat(0, "alert"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(ds, cat(1, "category"), knownvalue.StringExact("instance")),
					statecheck.ExpectKnownValue(ds, cat(1, "active"), knownvalue.Int64Exact(0)),
					statecheck.ExpectKnownValue(ds, cat(1, "utilization"), knownvalue.Float64Exact(0)),
					statecheck.ExpectKnownValue(ds, cat(2, "category"), knownvalue.StringExact("ipv4")),
					statecheck.ExpectKnownValue(ds, cat(2, "pools"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(ds, cat(2, "size"), knownvalue.Int64Exact(6)),
					statecheck.ExpectKnownValue(ds, cat(2, "active"), knownvalue.Int64Exact(5)),
					statecheck.ExpectKnownValue(ds, cat(2, "reserved"), knownvalue.Int64Exact(0)),
					statecheck.ExpectKnownValue(ds, cat(2, "cooling"), knownvalue.Int64Exact(0)),
					statecheck.ExpectKnownValue(ds, cat(2, "free"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(ds, cat(2, "utilization"), knownvalue.Float64Exact(5.0/6.0)),
					statecheck.ExpectKnownValue(ds, cat(2, "alert"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(ds, cat(2, "allocation_failures"), knownvalue.MapExact(map[string]knownvalue.Check{})),
					statecheck.ExpectKnownValue(ds, cat(2, "cooldown_queue"), knownvalue.ObjectExact(map[string]knownvalue.Check{
						"count": knownvalue.Int64Exact(0), "next_reusable_at": knownvalue.Null(),
					})),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("categories"), knownvalue.ListSizeExact(3)),
					// Pools by category and name: instance, ipv4 (c1/v4), node.
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("pools"), knownvalue.ListSizeExact(3)),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("pools").AtSliceIndex(1).AtMapKey("pool_id"), knownvalue.StringExact("c1/v4")),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("pools").AtSliceIndex(1).AtMapKey("family"), knownvalue.Int64Exact(4)),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("pools").AtSliceIndex(1).AtMapKey("alert"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(ds, tfjsonpath.New("pools").AtSliceIndex(2).AtMapKey("size"), knownvalue.Int64Exact(1<<62-1)),
				},
			},
			{Config: usageConfig(db, 6)},
			{
				// The pool is full: the seventh environment fails, and the failure is counted.
				Config:      usageConfig(db, 7),
				ExpectError: regexp.MustCompile(`ipam_exhausted`),
			},
			{
				Config: usageConfig(db, 6),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(ds, cat(2, "active"), knownvalue.Int64Exact(6)),
					statecheck.ExpectKnownValue(ds, cat(2, "free"), knownvalue.Int64Exact(0)),
					statecheck.ExpectKnownValue(ds, cat(2, "utilization"), knownvalue.Float64Exact(1)),
					statecheck.ExpectKnownValue(ds, cat(2, "allocation_failures"), knownvalue.MapExact(map[string]knownvalue.Check{
						"ipam_exhausted": knownvalue.Int64Exact(1),
					})),
				},
			},
			// A released address joins the cooldown queue (24 h for operator pools):
			// destroy e6, then read again.
			{Config: usageConfig(db, 5)},
			{
				Config: usageConfig(db, 5),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(ds, cat(2, "active"), knownvalue.Int64Exact(5)),
					statecheck.ExpectKnownValue(ds, cat(2, "cooling"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(ds, cat(2, "free"), knownvalue.Int64Exact(0)),
					statecheck.ExpectKnownValue(ds, cat(2, "cooldown_queue").AtMapKey("count"), knownvalue.Int64Exact(1)),
					statecheck.ExpectKnownValue(ds, cat(2, "cooldown_queue").AtMapKey("next_reusable_at"), knownvalue.StringRegexp(regexp.MustCompile(`^\d{4}-\d\d-\d\dT`))),
				},
			},
		},
	})
}

func TestAccPoolUsageDataSource_unknownCluster(t *testing.T) {
	db := newAccDB(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:      db.config(`data "ipam_pool_usage" "u" { cluster_id = "nope" }`),
				ExpectError: regexp.MustCompile(`(?s)Cluster Not Found.*No cluster is named nope`),
			},
			{
				Config:      db.config(`data "ipam_pool_usage" "u" { cluster_id = "bad id" }`),
				ExpectError: regexp.MustCompile(`(?s)Invalid cluster_id.*may only contain`),
			},
		},
	})
}
