package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

const setPools = testCluster + `resource "ipam_pool" "small" {
  cluster_id    = ipam_cluster.c.id
  name          = "small"
  cidrs         = ["198.51.100.0/30"]
  mtu           = 1500
  force_destroy = true
}
resource "ipam_pool" "big" {
  cluster_id    = ipam_cluster.c.id
  name          = "big"
  cidrs         = ["203.0.113.0/24"]
  mtu           = 1500
  default       = true
  force_destroy = true
}
resource "ipam_pool" "jumbo" {
  cluster_id    = ipam_cluster.c.id
  name          = "jumbo"
  cidrs         = ["192.0.2.0/24"]
  mtu           = 9000
  force_destroy = true
}
`

// set renders an ipam_address_set "vm" with the given keys (key = HCL body).
func set(keys ...string) string {
	var b strings.Builder
	b.WriteString("resource \"ipam_address_set\" \"vm\" {\n  cluster_id = ipam_cluster.c.id\n  owner_id = \"vm-1\"\n  instance_id = \"vm-1\"\n  addresses = {\n")
	for _, k := range keys {
		name, body, _ := strings.Cut(k, "=")
		fmt.Fprintf(&b, "    %s = { %s }\n", name, body)
	}
	b.WriteString("  }\n}\n")
	return b.String()
}

const (
	keyOverlay = `overlay=family = "ipv6"`
	keyA       = `a=pools = [ipam_pool.small.id, ipam_pool.big.id]`
	keyB       = `b=pools = [ipam_pool.small.id, ipam_pool.big.id]`
	keyC       = `c=pools = [ipam_pool.small.id, ipam_pool.big.id]`
	keyPinned  = `pinned=address = "203.0.113.77"`
)

func addr(key string) tfjsonpath.Path {
	return tfjsonpath.New("addresses").AtMapKey(key).AtMapKey("address")
}

// plansAddress checks that the plan gives set res's key the address a.
func plansAddress(res, key, a string) plancheck.PlanCheck {
	return plancheck.ExpectKnownValue(res, addr(key), knownvalue.StringExact(a))
}

func TestAccAddressSet_editsMoveOnlyTheirKeys(t *testing.T) {
	db := newAccDB(t)
	res := "ipam_address_set.vm"
	stays := func(key, a string) plancheck.PlanCheck { return plansAddress(res, key, a) }
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(setPools)},
			{
				// Mixed families, ordered fallback (small holds 2 addresses: c falls back to big), an exact claim.
				Config: db.config(setPools + set(keyOverlay, keyA, keyB, keyC, keyPinned)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					stays("overlay", "2001:db8:0:1::1"), stays("a", "198.51.100.1"), stays("b", "198.51.100.2"),
					stays("c", "203.0.113.1"), stays("pinned", "203.0.113.77"),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addresses").AtMapKey("c").AtMapKey("pool_id"), knownvalue.StringExact("c1/big")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addresses").AtMapKey("c").AtMapKey("cidr"), knownvalue.StringExact("203.0.113.1/24")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addresses").AtMapKey("overlay").AtMapKey("family"), knownvalue.StringExact("ipv6")),
					// The overlay address as its /128, as ipam_instance_address gives it.
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addresses").AtMapKey("overlay").AtMapKey("cidr"), knownvalue.StringExact("2001:db8:0:1::1/128")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addresses").AtMapKey("a").AtMapKey("family"), knownvalue.StringExact("ipv4")),
				},
			},
			{
				// Add a key: only it is new; every other key keeps its address.
				Config: db.config(setPools + set(keyOverlay, keyA, keyB, keyC, keyPinned, `d=family = "ipv4"`)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					stays("overlay", "2001:db8:0:1::1"), stays("a", "198.51.100.1"), stays("b", "198.51.100.2"),
					stays("c", "203.0.113.1"), stays("pinned", "203.0.113.77"), stays("d", "203.0.113.2"),
				}},
			},
			{
				// Remove a key and change another: b is released, a moves to big; the rest stay.
				Config: db.config(setPools + set(keyOverlay, `a=pools = [ipam_pool.big.id]`, keyC, keyPinned, `d=family = "ipv4"`)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					stays("overlay", "2001:db8:0:1::1"), stays("c", "203.0.113.1"), stays("pinned", "203.0.113.77"), stays("d", "203.0.113.2"),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, addr("a"), knownvalue.StringExact("203.0.113.3")),
				},
				Check: func(*terraform.State) error {
					return db.expectRows(2, `SELECT count(*) FROM ipam_allocations WHERE set_owner = 'vm-1' AND state = 'cooling'
						AND host(address) IN ('198.51.100.1', '198.51.100.2')`)()
				},
			},
			{
				// Reorder c's pools, then drop the one it is not in: its
				// address fits every time, so it stays, and the new request
				// is what the state (and an import) reads back.
				Config: db.config(setPools + set(keyOverlay, `a=pools = [ipam_pool.big.id]`, `c=pools = [ipam_pool.big.id, ipam_pool.small.id]`, keyPinned, `d=family = "ipv4"`)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate), stays("c", "203.0.113.1"),
				}},
			},
			{
				Config: db.config(setPools + set(keyOverlay, `a=pools = [ipam_pool.big.id]`, `c=pools = [ipam_pool.big.id]`, keyPinned, `d=family = "ipv4"`)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate), stays("c", "203.0.113.1"),
				}},
			},
			// Import of the whole set by owner, then an empty plan.
			{ResourceName: res, ImportState: true, ImportStateVerify: true, ImportStateId: "c1/vm-1"},
			{
				Config:           db.config(setPools + set(keyOverlay, `a=pools = [ipam_pool.big.id]`, `c=pools = [ipam_pool.big.id]`, keyPinned, `d=family = "ipv4"`)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

// A set's org_id and env_id are its addresses' tenant: set where unset,
// they update in place and every address stays; changed, they replace the
// set, whose addresses cool down for the old tenant while the new set gets
// others (an address goes to another tenant only after its cooldown).
func TestAccAddressSet_tenantChangeReplaces(t *testing.T) {
	db := newAccDB(t)
	res := "ipam_address_set.vm"
	labelled := func(labels string) string {
		return strings.Replace(set(keyOverlay, keyA), "  instance_id = \"vm-1\"\n", "  instance_id = \"vm-1\"\n"+labels, 1)
	}
	at := func(key, a string) plancheck.PlanCheck { return plansAddress(res, key, a) }
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(setPools)},
			{
				Config: db.config(setPools + labelled(`  org_id = "acme"`+"\n")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					at("overlay", "2001:db8:0:1::1"), at("a", "198.51.100.1"),
				}},
			},
			{
				// An env where there was none names no other tenant.
				Config: db.config(setPools + labelled(`  org_id = "acme"`+"\n"+`  env_id = "prod"`+"\n")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate), at("overlay", "2001:db8:0:1::1"), at("a", "198.51.100.1"),
				}},
			},
			{
				// Another org: replaced, with other addresses.
				Config: db.config(setPools + labelled(`  org_id = "other"`+"\n"+`  env_id = "prod"`+"\n")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, addr("overlay"), knownvalue.StringExact("2001:db8:0:1::2")),
					statecheck.ExpectKnownValue(res, addr("a"), knownvalue.StringExact("198.51.100.2")),
				},
				Check: func(*terraform.State) error {
					return db.expectRows(2, `SELECT count(*) FROM ipam_allocations WHERE set_owner = 'vm-1' AND state = 'cooling'
						AND org_id = 'acme' AND host(address) IN ('2001:db8:0:1::1', '198.51.100.1')`)()
				},
			},
			{
				Config:           db.config(setPools + labelled(`  org_id = "other"`+"\n"+`  env_id = "prod"`+"\n")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

func TestAccAddressSet_refusals(t *testing.T) {
	db := newAccDB(t)
	other := `resource "ipam_address_set" "other" {
  cluster_id = ipam_cluster.c.id
  owner_id   = "vm-2"
  addresses = {
    x = { address = "203.0.113.10" }
  }
}
`
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			// The claim names no pool, so the set does not depend on one: create the pools first.
			{Config: db.config(setPools)},
			{Config: db.config(setPools + other)},
			{
				Config:      db.config(setPools + other + set(`x=address = "203.0.113.10"`)),
				ExpectError: regexp.MustCompile(`(?s)address_in_use:\s+203\.0\.113\.10\s+is\s+held\s+by\s+set\s+"vm-2#x"`),
			},
			{Config: db.config(setPools)}, // vm-2 gives its address up: it cools down
			{
				Config:      db.config(setPools + set(`x=address = "203.0.113.10"`)),
				ExpectError: regexp.MustCompile(`(?s)address_cooling:\s+203\.0\.113\.10\s+was\s+released`),
			},
			{
				Config:      db.config(setPools + set(`x=pools = [ipam_pool.small.id]`+"\n address = \"203.0.113.12\"")),
				ExpectError: regexp.MustCompile(`(?s)outside\s+every\s+listed\s+pool`),
			},
			{
				// Key a alone would be held at plan; key x fails the plan,
				// so no key is held (the last step counts the rows).
				Config:      db.config(setPools + set(`a=pools = [ipam_pool.small.id]`, `x=pools = [ipam_pool.small.id, ipam_pool.jumbo.id]`)),
				ExpectError: regexp.MustCompile(`(?s)Pools Disagree on Network Properties.*mtu 1500.*mtu 9000`),
			},
			{Config: db.config(setPools + v6Pool)},
			{
				Config:      db.config(setPools + v6Pool + set(`x=pools = [ipam_pool.small.id, ipam_pool.v6.id]`)),
				ExpectError: regexp.MustCompile(`(?s)Pools Disagree on Network Properties.*c1/small \(IPv4\) and c1/v6\s+\(IPv6\).*different\s+families`),
			},
			{
				Config:      db.config(setPools + set(`x=`)),
				ExpectError: regexp.MustCompile(`(?s)asks for nothing`),
			},
			{
				Config: db.config(setPools),
				Check: func(*terraform.State) error {
					return db.expectRows(0, `SELECT count(*) FROM ipam_allocations WHERE set_owner = 'vm-1'`)()
				},
			},
		},
	})
}

// A set of 1,000 keys applies in one transaction.
func TestAccAddressSet_thousandKeys(t *testing.T) {
	db := newAccDB(t)
	hcl := setPools + `resource "ipam_address_set" "big" {
  cluster_id = ipam_cluster.c.id
  owner_id   = "lb-1"
  addresses  = { for i in range(1000) : "k${i}" => { family = "ipv6" } }
}
`
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(setPools)},
			{
				Config: db.configWith("  plan_reservations = false", hcl),
				Check: func(*terraform.State) error {
					if err := db.expectRows(1000, `SELECT count(DISTINCT address) FROM ipam_allocations WHERE set_owner = 'lb-1' AND state = 'active'`)(); err != nil {
						return err
					}
					// One transaction: every member's event was written by the same one.
					return db.expectRows(1, `SELECT count(DISTINCT xmin::text) FROM ipam_events WHERE owner_id LIKE 'lb-1#%'`)()
				},
			},
		},
	})
}

// A key held as configured keeps its address whatever its pools became
// since: after one of its pools changes its MTU, the set still plans (empty),
// and the MTU can be changed back, in one apply each (the apply judges only
// the keys it adds).
func TestAccAddressSet_poolChangedUnderAHeldKey(t *testing.T) {
	db := newAccDB(t)
	pools := func(smallMTU int) string {
		return strings.Replace(setPools, "cidrs         = [\"198.51.100.0/30\"]\n  mtu           = 1500",
			fmt.Sprintf("cidrs         = [\"198.51.100.0/30\"]\n  mtu           = %d", smallMTU), 1)
	}
	withSet := func(smallMTU int) string {
		return pools(smallMTU) + set(`x=pools = [ipam_pool.small.id, ipam_pool.big.id]`)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(pools(1500))},
			{Config: db.config(withSet(1500))},
			{Config: db.config(withSet(1400))}, // the pool changes; the held key stays
			{
				Config:           db.config(withSet(1400)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{Config: db.config(withSet(1500))}, // and back
			{
				// A key added now is judged: its pools disagree.
				Config:      db.config(pools(1400) + set(`x=pools = [ipam_pool.small.id, ipam_pool.big.id]`, `y=pools = [ipam_pool.small.id, ipam_pool.jumbo.id]`)),
				ExpectError: regexp.MustCompile(`(?s)Pools Disagree on Network Properties`),
			},
		},
	})
}
