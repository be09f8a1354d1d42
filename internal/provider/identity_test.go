package provider

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/overlayipam/terraform-provider-ipam/internal/tfcli"
)

// identityConfig has one resource of every type.
const identityConfig = `
resource "ipam_cluster" "c" {
  name   = "idc"
  prefix = "2001:db8:1d::/48"
}

resource "ipam_pool" "v4" {
  cluster_id = ipam_cluster.c.id
  name       = "public-v4"
  cidrs      = ["198.51.100.0/28"]
  cooldown   = "1h"
}

resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
}

resource "ipam_node_instance_blocks" "n" {
  cluster_id          = ipam_cluster.c.id
  node_id             = "node-a"
  block_prefix_length = 124
}

resource "ipam_instance_address" "i" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "vm-1"
  org_id      = "acme"
  env_id      = "prod"
  node_id     = "node-a"
  depends_on  = [ipam_node_instance_blocks.n]
}

resource "ipam_env_ipv4" "e" {
  pool_id = ipam_pool.v4.id
  org_id  = "acme"
  env_id  = "prod"
}

resource "ipam_address_set" "s" {
  cluster_id = ipam_cluster.c.id
  owner_id   = "vm-2"
  org_id     = "acme"
  env_id     = "prod"
  addresses = {
    overlay = { family = "ipv6" }
    public  = { pools = [ipam_pool.v4.id] }
  }
}
`

// The identity of each resource, as Terraform stores it.
var wantIdentities = map[string]map[string]knownvalue.Check{
	"ipam_cluster.c":              {"name": knownvalue.StringExact("idc")},
	"ipam_pool.v4":                {"cluster_id": knownvalue.StringExact("idc"), "name": knownvalue.StringExact("public-v4")},
	"ipam_node_address.n":         {"cluster_id": knownvalue.StringExact("idc"), "node_id": knownvalue.StringExact("node-a")},
	"ipam_node_instance_blocks.n": {"cluster_id": knownvalue.StringExact("idc"), "node_id": knownvalue.StringExact("node-a")},
	"ipam_instance_address.i":     {"cluster_id": knownvalue.StringExact("idc"), "instance_id": knownvalue.StringExact("vm-1")},
	"ipam_env_ipv4.e":             {"pool_id": knownvalue.StringExact("idc/public-v4"), "env_id": knownvalue.StringExact("prod")},
	"ipam_address_set.s":          {"cluster_id": knownvalue.StringExact("idc"), "owner_id": knownvalue.StringExact("vm-2")},
}

func identityChecks() []statecheck.StateCheck {
	var out []statecheck.StateCheck
	for addr, want := range wantIdentities {
		out = append(out, statecheck.ExpectIdentity(addr, want))
	}
	return out
}

// Every resource has an identity, set on create and unchanged across a
// refresh; each imports by identity (an import block with identity = {...})
// and by its string id, and the plan after either import is empty.
func TestAccResourceIdentity(t *testing.T) {
	t.Parallel()
	db := newAccDB(t)
	cfg := db.config(identityConfig)
	steps := []resource.TestStep{
		{Config: cfg, ConfigStateChecks: identityChecks()},
		{ // a refresh and an empty plan: the identities stay as they were
			Config:            cfg,
			ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			ConfigStateChecks: identityChecks(),
		},
	}
	for _, addr := range slices.Sorted(maps.Keys(wantIdentities)) {
		steps = append(steps,
			resource.TestStep{Config: cfg, ResourceName: addr, ImportState: true, ImportStateKind: resource.ImportBlockWithResourceIdentity},
			resource.TestStep{Config: cfg, ResourceName: addr, ImportState: true, ImportStateKind: resource.ImportBlockWithID},
		)
	}
	// The addresses cool down after the destroy: the cluster and the pool go
	// with them only with force_destroy, set last (an import reads it false).
	forced := strings.NewReplacer(`name   = "idc"`, `name   = "idc"`+"\n  force_destroy = true",
		`cooldown   = "1h"`, `cooldown   = "1h"`+"\n  force_destroy = true").Replace(identityConfig)
	steps = append(steps, resource.TestStep{Config: db.config(forced)})
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfcli.SkipBelow(t, tfversion.Version1_12_0)},
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps:                    steps,
	})
}

// An identity naming nothing, or a malformed one, fails the import with the
// attribute named; nothing is written.
func TestAccResourceIdentityImportErrors(t *testing.T) {
	t.Parallel()
	db := newAccDB(t)
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfcli.SkipBelow(t, tfversion.Version1_12_0)},
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: db.config(`
import {
  to       = ipam_node_address.n
  identity = { cluster_id = "nope", node_id = "node-a" }
}
resource "ipam_node_address" "n" {
  cluster_id = "nope"
  node_id    = "node-a"
}`),
				ExpectError: regexp.MustCompile(`Cannot import non-existent remote object|does not exist`),
			},
			{
				Config: db.config(`
import {
  to       = ipam_node_address.n
  identity = { cluster_id = "bad/id", node_id = "node-a" }
}
resource "ipam_node_address" "n" {
  cluster_id = "bad"
  node_id    = "node-a"
}`),
				ExpectError: regexp.MustCompile(`Invalid Import ID`),
			},
		},
		CheckDestroy: func(*terraform.State) error { return db.nothingWritten() },
	})
}
