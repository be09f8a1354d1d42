package bench

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// The scheduler's placement transaction: BEGIN; the scheduler's own
// instance record; the instance's address through the public API in that
// transaction (its allocation and its instance.allocated event); COMMIT. The
// reference is the same transaction without the address, in the same Go
// harness, so the ratio is what the IPAM adds to a placement.

const placementTable = `CREATE TABLE IF NOT EXISTS bench_placements (
	instance_id text PRIMARY KEY,
	cluster_id text NOT NULL,
	node_id text NOT NULL,
	placed_at timestamptz NOT NULL DEFAULT now())`

const (
	placementLabel    = "placement transaction (instance row + AllocateInstance)"
	placementRefLabel = "placement transaction without the IPAM (instance row only)"
)

// placementCell runs n schedulers placing instances on a fresh cluster, with
// the address (withIPAM) or without.
func (r *runner) placementCell(ctx context.Context, dbURL string, withIPAM bool, n int) cell {
	label := placementRefLabel
	if withIPAM {
		label = placementLabel
	}
	fail := func(err error) cell { return cell{label: label, clients: n, err: err} }
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return fail(err)
	}
	cfg.MaxConns = int32(n)
	db, err := pgxpool.NewWithConfig(ctx, cfg) // the scheduler's own pool
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	client, err := ipam.New(db, ipam.Options{Actor: "scheduler"})
	if err != nil {
		return fail(err)
	}
	defer client.Close()
	cl, err := newCluster(ctx, client, "pl")
	if err != nil {
		return fail(err)
	}
	r.srv.checkpoint(ctx)
	return r.timed(ctx, label, n, 5, r.sz.CellDuration, func(ctx context.Context, w, i int) error {
		id := fmt.Sprintf("%s-w%d-%d", cl.ID, w, i)
		node := "node-" + strconv.Itoa(w)
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO bench_placements (instance_id, cluster_id, node_id) VALUES ($1, $2, $3)`,
				id, cl.ID, node); err != nil {
				return err
			}
			if !withIPAM {
				return nil
			}
			_, err := client.AllocateInstance(ctx, tx, ipam.InstanceRequest{ClusterID: cl.ID, InstanceID: id,
				OrgID: "acme", EnvID: "prod", NodeID: node})
			return err
		})
	})
}

// placementRows adds the row of the placement transaction at n clients:
// each round's transaction with the address against the same round's
// transaction without it (both slices hold one cell per round).
func (r *runner) placementRows(n int, with, without []cell) []string {
	name := fmt.Sprintf("%s, %d client%s", placementLabel, n, plural(n))
	var rates, refRates, ratios []float64
	for i := range with {
		for _, c := range []cell{with[i], without[i]} {
			if c.err != nil {
				r.rep.fail("%s, %d client%s, round %d: %v", c.label, n, plural(n), i+1, c.err)
				r.rep.add(Row{Section: "1 throughput", Name: name, Value: "error", Status: "FAIL"})
				return nil
			}
		}
		rates = append(rates, with[i].rate())
		refRates = append(refRates, without[i].rate())
		ratios = append(ratios, with[i].rate()/without[i].rate())
	}
	if len(rates) == 0 {
		return nil
	}
	ratio := medianF(ratios)
	row := Row{Section: "1 throughput", Name: name, Value: num(medianF(rates)) + " tx/s",
		Reference: "without the IPAM " + num(medianF(refRates)) + " tx/s", Ratio: fmt.Sprintf("%.2f", ratio), Status: "info"}
	if n == 16 {
		row.Target, row.Status = ">= 0.50", metOr(ratio >= 0.5)
	}
	r.rep.add(row)
	return []string{cpuLine(merge(without)), cpuLine(merge(with))}
}
