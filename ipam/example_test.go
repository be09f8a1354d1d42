package ipam_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// A scheduler places an instance: its own placement row and the instance's
// address commit in one transaction. A placement that fails after the
// allocation rolls back, and leaves neither the row nor the address behind.
func ExampleClient_AllocateInstance() {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, exampleURL) // the scheduler's own pool
	if err != nil {
		panic(err)
	}
	defer db.Close()
	client, err := ipam.New(db, ipam.Config{Actor: "scheduler"})
	if err != nil {
		panic(err)
	}
	if _, err := client.Migrate(ctx); err != nil {
		panic(err)
	}
	// The cluster comes from Terraform (ipam_cluster); created here for the example.
	if _, err := client.CreateCluster(ctx, ipam.Cluster{ID: "example", Prefix: netip.MustParsePrefix("2001:db8:e::/48")}); err != nil {
		panic(err)
	}
	if _, err := db.Exec(ctx, `CREATE TABLE placements (instance_id text PRIMARY KEY, node_id text, overlay_ipv6 inet)`); err != nil {
		panic(err)
	}

	place := func(instance, node string, fail bool) error {
		tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
		// IPAM allocation is the last step before instance.allocated.
		addr, err := client.AllocateInstance(ctx, tx, ipam.InstanceRequest{
			ClusterID: "example", InstanceID: instance, OrgID: "acme", EnvID: "prod", NodeID: node})
		if err != nil {
			return err // the whole placement is aborted
		}
		if _, err := tx.Exec(ctx, `INSERT INTO placements VALUES ($1, $2, $3)`, instance, node, addr.Prefix); err != nil {
			return err
		}
		if fail {
			return errors.New("the node went away")
		}
		fmt.Printf("%s on %s: %s (gateway %s, mtu %d)\n", instance, node, addr.Prefix, addr.GatewayIPv6, addr.MTU)
		return tx.Commit(ctx)
	}

	if err := place("web-1", "node-a", false); err != nil {
		panic(err)
	}
	fmt.Println("web-2:", place("web-2", "node-a", true))

	var rows int
	_ = db.QueryRow(ctx, `SELECT count(*) FROM placements WHERE instance_id = 'web-2'`).Scan(&rows)
	fmt.Printf("after the rollback: %d placement rows for web-2\n", rows)
	// The address web-2 had is free again (another instance may claim it);
	// the next placement takes the next fresh one.
	if err := place("web-3", "node-b", false); err != nil {
		panic(err)
	}
	// Output:
	// web-1 on node-a: 2001:db8:e:1::3/128 (gateway fe80::1, mtu 1420)
	// web-2: the node went away
	// after the rollback: 0 placement rows for web-2
	// web-3 on node-b: 2001:db8:e:1::10/128 (gateway fe80::1, mtu 1420)
}

// The Go API guide's and README's snippets, whole: a scheduler sets up its
// client and places an instance, handling every error.
func ExampleClient_AllocateInstance_scheduler() {
	if err := runScheduler(context.Background(), exampleURL); err != nil {
		panic(err)
	}
	// Output:
	// web-1: 2001:db8:abcd:1::3/128 (gateway fe80::1, mtu 1420)
}

// runScheduler is the guide's "Set up a client".
func runScheduler(ctx context.Context, databaseURL string) error {
	db, err := pgxpool.New(ctx, databaseURL) // the scheduler's pool, on the IPAM's database
	if err != nil {
		return err
	}
	defer db.Close()
	client, err := ipam.New(db, ipam.Config{Actor: "scheduler"})
	if err != nil {
		return err
	}
	// Or let Terraform's provider (auto_migrate) or `ipamctl migrate up` do it.
	if _, err := client.Migrate(ctx); err != nil {
		return err
	}
	// The cluster comes from Terraform (ipam_cluster); created here for the example.
	if _, err := client.CreateCluster(ctx, ipam.Cluster{ID: "prod", Prefix: netip.MustParsePrefix("2001:db8:abcd::/48")}); err != nil {
		return err
	}
	return placeInstance(ctx, db, client)
}

// placeInstance is the guide's "Place an instance".
func placeInstance(ctx context.Context, db *pgxpool.Pool, client *ipam.Client) error {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit

	// ... the scheduler's own rows for the placement ...

	// IPAM allocation is the last step before instance.allocated.
	addr, err := client.AllocateInstance(ctx, tx, ipam.InstanceRequest{
		ClusterID: "prod", InstanceID: "web-1", OrgID: "acme", EnvID: "prod", NodeID: "node-a"})
	switch {
	case errors.Is(err, ipam.ErrExhausted):
		// Abort the placement: mark the environment degraded and retry on the next
		// reconciliation. The failure is already recorded (see below).
		return err // abort the placement; the failure is recorded
	case err != nil:
		return err
	}
	// addr.Prefix is WorkloadSpec network.overlay_ipv6; addr.GatewayIPv6, addr.MTU and
	// addr.DNSServers are the rest of the network block, from the cluster.
	fmt.Printf("web-1: %s (gateway %s, mtu %d)\n", addr.Prefix, addr.GatewayIPv6, addr.MTU)
	return tx.Commit(ctx) // addr.Prefix is the instance's /128
}
