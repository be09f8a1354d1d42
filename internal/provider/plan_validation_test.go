package provider

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// What the database can tell at plan time fails the plan, not the apply:
// another cluster's overlapping prefix, a public IPv4 block another
// cluster's pool holds (although this pool's cluster is created by the same
// apply); and every problem of a pool is reported at once.
func TestAccPlanTimeValidation(t *testing.T) {
	db := newAccDB(t)
	first := `resource "ipam_cluster" "c" {
  name          = "c1"
  prefix        = "2001:db8::/48"
  force_destroy = true
}
resource "ipam_pool" "a" {
  cluster_id    = ipam_cluster.c.id
  name          = "a"
  cidrs         = ["203.0.113.0/24"]
  force_destroy = true
}
`
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(first)},
			{
				Config: db.config(first + `resource "ipam_cluster" "d" {
  name   = "c2"
  prefix = "2001:db8:0:100::/56"
}
resource "ipam_cluster" "e" {
  name   = "c3"
  prefix = "2001:db8:1::/48"
}
`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Invalid Cluster.*2001:db8:0:100::/56 overlaps\s+cluster\s+"c1"\s+\(2001:db8::/48\)`),
			},
			{
				// c3 is new: its pool's public block is taken by c1's pool a.
				Config: db.config(first + `resource "ipam_cluster" "e" {
  name   = "c3"
  prefix = "2001:db8:1::/48"
}
resource "ipam_pool" "b" {
  cluster_id = ipam_cluster.e.id
  name       = "b"
  cidrs      = ["203.0.113.128/25", "198.51.100.0/24"]
}
`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)203\.0\.113\.128/25 overlaps 203\.0\.113\.0/24 of pool\s+"c1/a"\s+in\s+cluster\s+"c1"`),
			},
			{
				// Two bad exclusions: both are named.
				Config: db.config(first + `resource "ipam_pool" "x" {
  cluster_id = ipam_cluster.c.id
  name       = "x"
  cidrs      = ["198.51.100.0/24"]
  exclude    = ["192.0.2.1/32", "2001:db8::1/128"]
}
`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)exclusion 192\.0\.2\.1/32 is not inside any block.*exclusion 2001:db8::1/128 is not of\s+the\s+pool's\s+address\s+family`),
			},
			// Nothing of the above was written: the first configuration plans empty.
			{Config: db.config(first), PlanOnly: true},
		},
	})
}

// poolWithExclusions is an ipam_pool of one block with n exclusions, one
// address each from first on, one exclusion a line.
func poolWithExclusions(block, first string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "resource \"ipam_pool\" \"big\" {\n  cluster_id = \"c1\"\n  name       = \"big\"\n  cidrs      = [%q]\n  exclude    = [\n", block)
	a := netip.MustParseAddr(first)
	for range n {
		fmt.Fprintf(&b, "    %q,\n", a.String())
		a = a.Next()
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

// An ipam_pool with 5,000 exclusions outside its block, through terraform's
// validate and plan: refused with five diagnostics, each quoting its own
// exclusion's line (not the whole list), the fifth counting the 4,995
// others; nothing is written. The same pool with its 5,000 exclusions inside
// the block plans (family and size computed at plan). Before, each exclusion
// was a diagnostic quoting the whole attribute, and the plan took time
// quadratic in their number (113 s at 4,000). The provider's own validation
// of 20,000 entries per list is TestValidate_20000Entries, in-process: most
// of this test's time is terraform's own parsing of the list.
func TestAccPlanTimeValidation_5000Exclusions(t *testing.T) {
	db := newAccDB(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config:   db.config(poolWithExclusions("203.0.113.0/24", "10.0.0.0", 5000)),
				PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)Invalid Pool.*"10\.0\.0\.0",\s+exclusion 10\.0\.0\.0/32 is not inside any block of the pool.*` +
					`Invalid Pool.*"10\.0\.0\.4",\s+exclusion 10\.0\.0\.4/32 is not inside any block of the pool;\s+an\s+exclusion\s+must\s+lie\s+inside\s+one\s+of\s+its\s+blocks\s+\(203\.0\.113\.0/24\)\s+` +
					`\.\.\.\s+and\s+4,995\s+more\s+exclusions\s+outside\s+the\s+pool's\s+blocks`),
			},
			{
				Config:             db.config(poolWithExclusions("10.0.0.0/16", "10.0.0.0", 5000)),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
	if err := db.nothingWritten(); err != nil {
		t.Fatal(err)
	}
	if n := db.count(`SELECT count(*) FROM ipam_pools WHERE category = 'ipv4'`); n != 0 {
		t.Fatalf("%d IPv4 pools written by plans", n)
	}
}
