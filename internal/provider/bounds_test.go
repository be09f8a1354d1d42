package provider

import (
	"context"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/jackc/pgx/v5"
)

// A lock another session holds on the allocations: the plan that reserves a
// new node address fails within lock_timeout with ipam_busy naming the lock
// and its holder, nothing is written, and the same configuration applies once
// the lock is gone.
func TestAccProvider_heldLockIsBusy(t *testing.T) {
	db := newAccDB(t)
	ctx := context.Background()
	var op *pgx.Conn
	var tx pgx.Tx
	t.Cleanup(func() {
		if op != nil {
			op.Close(ctx)
		}
	})
	cluster := `resource "ipam_cluster" "c" {
  name          = "c1"
  prefix        = "2001:db8::/48"
  force_destroy = true
}
`
	withNode := cluster + `resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
}
`
	options := `  lock_timeout = "1s"`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{Config: db.configWith(options, cluster)},
			{
				PreConfig: func() {
					var err error
					if op, err = pgx.Connect(ctx, db.URL); err != nil {
						t.Fatal(err)
					}
					if _, err = op.Exec(ctx, `SET application_name = 'operator-maintenance'`); err != nil {
						t.Fatal(err)
					}
					if tx, err = op.Begin(ctx); err != nil {
						t.Fatal(err)
					}
					if _, err = tx.Exec(ctx, `LOCK TABLE ipam_allocations IN EXCLUSIVE MODE`); err != nil {
						t.Fatal(err)
					}
				},
				Config:      db.configWith(options, withNode),
				ExpectError: regexp.MustCompile(`(?s)ipam_busy: waited 1s \(lock_timeout\).*ipam_allocations ExclusiveLock by pid [0-9]+\s+\(operator-maintenance\)`),
			},
			{
				PreConfig: func() {
					if err := tx.Rollback(ctx); err != nil {
						t.Fatal(err)
					}
					if n := db.count(`SELECT count(*) FROM ipam_allocations WHERE owner_kind = 'node'`); n != 0 {
						t.Fatalf("the busy plan wrote %d node rows", n)
					}
				},
				Config: db.configWith(options, withNode),
				Check: func(*terraform.State) error {
					return db.expectRows(1, `SELECT count(*) FROM ipam_allocations WHERE owner_kind = 'node' AND state = 'active'`)()
				},
			},
		},
	})
}
