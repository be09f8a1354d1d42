package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

const reservationBase = testCluster + `resource "ipam_pool" "v4" {
  cluster_id    = ipam_cluster.c.id
  name          = "v4"
  cidrs         = ["198.51.100.0/24"]
  force_destroy = true
}
`

const reservationAddresses = `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
}
resource "ipam_instance_address" "i" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "web-1"
  org_id      = "acme"
  env_id      = "prod"
}
resource "ipam_env_ipv4" "e" {
  pool_id = ipam_pool.v4.id
  org_id  = "acme"
  env_id  = "prod"
}
`

// The plan shows the real addresses, and apply hands out exactly those.
func TestAccReservations_planShowsAddresses(t *testing.T) {
	db := newAccDB(t)
	want := map[string]string{
		"ipam_node_address.n":     "2001:db8::1",
		"ipam_instance_address.i": "2001:db8:0:1::1",
		"ipam_env_ipv4.e":         "198.51.100.1",
	}
	var planned, applied []plancheck.PlanCheck
	var states []statecheck.StateCheck
	var held int // the sum of the holds' generations after the first plan
	for res, addr := range want {
		planned = append(planned, plancheck.ExpectKnownValue(res, tfjsonpath.New("address"), knownvalue.StringExact(addr)))
		applied = append(applied, plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate))
		states = append(states, statecheck.ExpectKnownValue(res, tfjsonpath.New("address"), knownvalue.StringExact(addr)))
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.config(reservationBase)},
			{
				// Planning twice finds the same holds: they are keyed by owner, not by call.
				Config:             db.config(reservationBase + reservationAddresses),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				Check: func(*terraform.State) error {
					held = db.count(`SELECT sum(generation)::bigint FROM ipam_allocations WHERE state = 'reserved'`)
					return db.expectRows(3, `SELECT count(*) FROM ipam_allocations WHERE state = 'reserved'`)()
				},
			},
			{
				Config:             db.config(reservationBase + reservationAddresses),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				Check: func(*terraform.State) error {
					// The same three holds: not one handed out again (a new generation).
					return db.expectRows(held, `SELECT sum(generation)::bigint FROM ipam_allocations WHERE state = 'reserved'`)()
				},
			},
			{
				Config:            db.config(reservationBase + reservationAddresses),
				ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: append(planned, applied...)},
				ConfigStateChecks: states,
				Check: func(*terraform.State) error {
					if err := db.expectRows(0, `SELECT count(*) FROM ipam_allocations WHERE state = 'reserved'`)(); err != nil {
						return err
					}
					return db.expectRows(3, `SELECT count(*) FROM ipam_events WHERE type = 'allocation.reserved'`)()
				},
			},
			// Import by address, followed by an empty plan (ImportStateVerify compares with state).
			{ResourceName: "ipam_node_address.n", ImportState: true, ImportStateVerify: true, ImportStateId: "2001:db8::1"},
			{ResourceName: "ipam_instance_address.i", ImportState: true, ImportStateVerify: true, ImportStateId: "2001:db8:0:1::1"},
			{ResourceName: "ipam_env_ipv4.e", ImportState: true, ImportStateVerify: true, ImportStateId: "198.51.100.1"},
		},
	})
}

func TestAccReservations_disabled(t *testing.T) {
	db := newAccDB(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.configWith("  plan_reservations = false", reservationBase)},
			{
				Config: db.configWith("  plan_reservations = false", reservationBase+reservationAddresses),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue("ipam_node_address.n", tfjsonpath.New("address")),
					plancheck.ExpectUnknownValue("ipam_instance_address.i", tfjsonpath.New("address")),
					plancheck.ExpectUnknownValue("ipam_env_ipv4.e", tfjsonpath.New("address")),
				}},
				Check: func(*terraform.State) error {
					return db.expectRows(0, `SELECT count(*) FROM ipam_events WHERE type = 'allocation.reserved'`)()
				},
			},
		},
	})
}
