package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

func blocksConfig(db *accDB, demandA, demandB int, instance bool) string {
	hcl := testCluster + fmt.Sprintf(`resource "ipam_node_instance_blocks" "a" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
  demand     = %d
}
resource "ipam_node_instance_blocks" "b" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-b"
  demand     = %d
}
`, demandA, demandB)
	if instance {
		hcl += `resource "ipam_instance_address" "web" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "web-1"
  org_id      = "acme"
  env_id      = "prod"
  node_id     = ipam_node_instance_blocks.a.node_id
}
`
	}
	return db.config(hcl)
}

// checkBlocksSound: blocks never overlap across nodes, stay inside the
// instance prefix, are aligned /124s, and instances on a node sit in its blocks.
func checkBlocksSound(db *accDB) func(*terraform.State) error {
	return func(*terraform.State) error {
		if err := db.expectRows(0, `SELECT count(*) FROM ipam_node_blocks x JOIN ipam_node_blocks y
			ON x.block && y.block AND x.block <> y.block WHERE x.state = 'active' AND y.state = 'active'`)(); err != nil {
			return err
		}
		if err := db.expectRows(0, `SELECT count(*) FROM ipam_node_blocks b JOIN ipam_clusters c ON c.id = b.cluster_id
			WHERE NOT (b.block <<= c.instance_prefix) OR masklen(b.block) <> 124 OR b.block <> network(b.block)`)(); err != nil {
			return err
		}
		return db.expectRows(0, `SELECT count(*) FROM ipam_allocations a WHERE a.owner_kind = 'instance' AND a.state = 'active'
			AND a.node_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ipam_node_blocks b WHERE b.node_id = a.node_id
			AND b.state = 'active' AND a.address <<= b.block)`)()
	}
}

func TestAccNodeInstanceBlocks_lifecycle(t *testing.T) {
	db := newAccDB(t)
	a := "ipam_node_instance_blocks.a"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				// The seed's example: B = 16, mf = 0.5, 25 expected gives 3 blocks, 48 addresses.
				Config: blocksConfig(db, 25, 5, false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(a, tfjsonpath.New("target_blocks"), knownvalue.Int64Exact(3)),
					statecheck.ExpectKnownValue(a, tfjsonpath.New("capacity"), knownvalue.Int64Exact(48)),
					statecheck.ExpectKnownValue(a, tfjsonpath.New("blocks"), knownvalue.ListSizeExact(3)),
					statecheck.ExpectKnownValue("ipam_node_instance_blocks.b", tfjsonpath.New("blocks"), knownvalue.ListSizeExact(1)),
				},
				Check: checkBlocksSound(db),
			},
			{ResourceName: a, ImportState: true, ImportStateVerify: true, ImportStateId: "c1/node-a"},
			{
				// Growth by demand, many batches in one step; an instance lands in node-a's blocks.
				Config: blocksConfig(db, 100, 5, true),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(a, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(a, tfjsonpath.New("blocks"), knownvalue.ListSizeExact(7)),
					statecheck.ExpectKnownValue(a, tfjsonpath.New("target_blocks"), knownvalue.Int64Exact(7)),
				},
				Check: checkBlocksSound(db),
			},
			{
				// Shrink: the first scaling only sees the surplus empty; the plan stays non-empty.
				Config:             blocksConfig(db, 0, 5, true),
				ExpectNonEmptyPlan: true,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(a, tfjsonpath.New("blocks"), knownvalue.ListSizeExact(7)),
				},
			},
			{
				// The second releases the empty surplus, but never the block holding web-1.
				Config: blocksConfig(db, 0, 5, true),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(a, tfjsonpath.New("blocks"), knownvalue.ListSizeExact(1)),
					statecheck.ExpectKnownValue(a, tfjsonpath.New("used"), knownvalue.Int64Exact(1)),
				},
				Check: resource.ComposeTestCheckFunc(checkBlocksSound(db), func(*terraform.State) error {
					return db.expectRows(6, `SELECT count(*) FROM ipam_node_blocks WHERE state = 'cooling' AND node_id = 'node-a'`)()
				}),
			},
		},
	})
}

// A node's blocks and its instances in one apply, the instances taking
// node_id from the blocks: the plan leaves their addresses to the apply, which
// allocates them inside the blocks, the next plan is empty (nothing to move
// into the blocks), and one destroy removes the instances before the blocks.
func TestAccNodeInstanceBlocks_createdWithTheirInstances(t *testing.T) {
	db := newAccDB(t)
	cfg := db.config(testCluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n1"
}
resource "ipam_node_instance_blocks" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = ipam_node_address.n.node_id
}
resource "ipam_instance_address" "vm" {
  count       = 3
  cluster_id  = ipam_cluster.c.id
  instance_id = "vm-${count.index}"
  org_id      = "acme"
  env_id      = "prod"
  node_id     = ipam_node_instance_blocks.n.node_id
}
`)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			// The cluster first: a plan in a cluster that exists holds new addresses.
			{Config: db.config(testCluster)},
			{
				Config: cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue("ipam_instance_address.vm[0]", tfjsonpath.New("address")),
				}},
				Check: resource.ComposeTestCheckFunc(checkBlocksSound(db), func(*terraform.State) error {
					if err := db.expectRows(3, `SELECT count(*) FROM ipam_allocations WHERE owner_kind = 'instance' AND state = 'active'
						AND pool_id = 'c1/blocks/n1'`)(); err != nil {
						return err
					}
					return db.expectRows(0, `SELECT count(*) FROM ipam_allocations WHERE owner_kind = 'instance' AND state = 'reserved'`)()
				}),
			},
			{Config: cfg, PlanOnly: true}, // nothing moves into the blocks
		},
	})
}

// An address set whose keys list a node's pool_id draws from its blocks, and
// grows them when they are full, as the node's instances do: 17 keys in one
// apply on a node of one block of 16. The plan shows the node's pool_id.
func TestAccNodeInstanceBlocks_setKeysGrowTheNode(t *testing.T) {
	db := newAccDB(t)
	blocks := testCluster + `resource "ipam_node_instance_blocks" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n1"
  max_blocks = 2
}
`
	set := blocks + `resource "ipam_address_set" "s" {
  cluster_id = ipam_cluster.c.id
  owner_id   = "vm-1"
  addresses  = { for i in range(17) : "k${i}" => { pools = [ipam_node_instance_blocks.n.pool_id] } }
}
data "ipam_node_instance_blocks" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = ipam_node_instance_blocks.n.node_id
  depends_on = [ipam_address_set.s]
}
`
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: db.config(blocks),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue("ipam_node_instance_blocks.n", tfjsonpath.New("pool_id"), knownvalue.StringExact("c1/blocks/n1")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ipam_node_instance_blocks.n", tfjsonpath.New("blocks"), knownvalue.ListSizeExact(1)),
				},
			},
			{
				Config: db.config(set),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.ipam_node_instance_blocks.n", tfjsonpath.New("blocks"), knownvalue.ListSizeExact(2)),
					statecheck.ExpectKnownValue("data.ipam_node_instance_blocks.n", tfjsonpath.New("used"), knownvalue.Int64Exact(17)),
					statecheck.ExpectKnownValue("data.ipam_node_instance_blocks.n", tfjsonpath.New("pool_id"), knownvalue.StringExact("c1/blocks/n1")),
					statecheck.ExpectKnownValue("ipam_address_set.s", tfjsonpath.New("addresses").AtMapKey("k16").AtMapKey("pool_id"),
						knownvalue.StringExact("c1/blocks/n1")),
				},
				Check: resource.ComposeTestCheckFunc(checkBlocksSound(db), func(*terraform.State) error {
					return db.expectRows(17, `SELECT count(*) FROM ipam_allocations a
						JOIN ipam_node_blocks b ON b.node_id = 'n1' AND b.state = 'active' AND a.address <<= b.block
						WHERE a.owner_kind = 'set' AND a.state = 'active' AND a.pool_id = 'c1/blocks/n1'`)()
				}),
			},
		},
	})
}

func TestAccNodeInstanceBlocks_badInput(t *testing.T) {
	db := newAccDB(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: db.config(testCluster + `resource "ipam_node_instance_blocks" "a" {
  cluster_id        = ipam_cluster.c.id
  node_id           = "node-a"
  min_free_fraction = 0.5
  max_free_fraction = 1.2
}`),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)max_free_fraction.*at least min_free_fraction \+ 1`),
		}, {
			// /80 blocks would keep 2^48 rows per block: refused at plan, naming the limit.
			Config: db.config(testCluster + `resource "ipam_node_instance_blocks" "a" {
  cluster_id          = ipam_cluster.c.id
  node_id             = "node-a"
  block_prefix_length = 80
}`),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)block_prefix_length.*at most\s+1048576`),
		}, {
			// Another block length than the cluster's: refused at plan.
			Config: db.config(testCluster + `resource "ipam_node_instance_blocks" "a" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
}`),
		}, {
			Config: db.config(testCluster + `resource "ipam_node_instance_blocks" "a" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
}
resource "ipam_node_instance_blocks" "b" {
  cluster_id          = ipam_cluster.c.id
  node_id             = "node-b"
  block_prefix_length = 120
}`),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)Invalid Node Instance Blocks.*cluster "c1" carves /124 blocks`),
		}},
	})
}

// A bad block setting is one error, on its attribute: a value out of its
// attribute's range is that attribute's validator's error alone (the
// settings are judged together, by the core's rule, only when each is in
// range), and a rule of settings together is one error too.
func TestBlockSettingsOneErrorEach(t *testing.T) {
	p := newProtoProvider(t)
	num := func(f float64) tftypes.Value { return tftypes.NewValue(tftypes.Number, f) }
	for _, c := range []struct {
		name  string
		attrs map[string]tftypes.Value
		at    string
		want  string
	}{
		{"block_prefix_length /129", map[string]tftypes.Value{"block_prefix_length": num(129)}, "block_prefix_length", "between 65 and 128"},
		{"block_prefix_length /64", map[string]tftypes.Value{"block_prefix_length": num(64)}, "block_prefix_length", "between 65 and 128"},
		{"max_blocks 0", map[string]tftypes.Value{"max_blocks": num(0)}, "max_blocks", "at least 1"},
		{"min_free_fraction negative", map[string]tftypes.Value{"min_free_fraction": num(-1)}, "min_free_fraction", "at least 0"},
		{"demand negative", map[string]tftypes.Value{"demand": num(-1)}, "demand", "at least 0"},
		{"max_free_fraction below min_free_fraction + 1", map[string]tftypes.Value{"min_free_fraction": num(0.5), "max_free_fraction": num(1)},
			"max_free_fraction", "at least min_free_fraction + 1"},
		{"/65 blocks (too many addresses)", map[string]tftypes.Value{"block_prefix_length": num(65), "max_blocks": num(1)}, "block_prefix_length", "too many"},
	} {
		attrs := map[string]tftypes.Value{"cluster_id": str("c1"), "node_id": str("n1")}
		for k, v := range c.attrs {
			attrs[k] = v
		}
		diags := p.validate(t, "ipam_node_instance_blocks", attrs)
		if len(diags) != 1 || !diags[0].Attribute.Equal(attrPath(c.at)) || !strings.Contains(diags[0].Detail, c.want) {
			t.Errorf("%s: want one error on %s saying %q, got %s", c.name, c.at, c.want, diagsText(diags))
		}
	}
}
