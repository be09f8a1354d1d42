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
	// placementWritesLabel is the floor the allocator's checks stand on:
	// the same transaction with only the allocation's writes (the stripe
	// pick and advance, the allocation row, its event: oneStatementSQL), as
	// one statement with no owner probe, pool lock, savepoint or count.
	placementWritesLabel = "experiment: placement transaction with the allocation's writes alone"
)

// placementTargets are the placement's targets: the transaction at 16
// clients at least 0.40 of the same transaction without the IPAM and 0.60 at
// one client, and the allocation's writes alone (the floor the allocator's
// checks stand on) at least 0.50 at 16 clients.
var placementTargets = map[placementTarget]float64{
	{placementLabel, 16}:       0.40,
	{placementLabel, 1}:        0.60,
	{placementWritesLabel, 16}: 0.50,
}

type placementTarget struct {
	label   string
	clients int
}

// placementMode is what a placement transaction does besides the
// scheduler's own row.
type placementMode int

const (
	placeRowOnly placementMode = iota // the reference
	placeIPAM                         // AllocateInstance in the transaction
	placeWrites                       // the allocation's writes alone (experiment)
)

func (m placementMode) label() string {
	return [...]string{placementRefLabel, placementLabel, placementWritesLabel}[m]
}

// placementCell runs n schedulers placing instances on a fresh cluster, in
// one of the modes.
func (r *runner) placementCell(ctx context.Context, dbURL string, mode placementMode, n int) cell {
	label := mode.label()
	fail := func(err error) cell { return cell{label: label, clients: n, err: err} }
	var vp *variantPool
	if mode == placeWrites {
		var err error
		if vp, err = r.variantSetup(ctx, dbURL); err != nil {
			return fail(err)
		}
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return fail(err)
	}
	cfg.MaxConns = int32(n)
	if mode == placeWrites {
		genericPlans(cfg)
	}
	db, err := pgxpool.NewWithConfig(ctx, cfg) // the scheduler's own pool
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	client, err := ipam.New(db, ipam.Config{Actor: "scheduler"})
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
		return place(ctx, db, id, cl.ID, node, func(tx pgx.Tx) error {
			switch mode {
			case placeIPAM:
				_, err := client.AllocateInstance(ctx, tx, ipam.InstanceRequest{ClusterID: cl.ID, InstanceID: id,
					OrgID: "acme", EnvID: "prod", NodeID: node})
				return err
			case placeWrites:
				return oneStatement(ctx, tx, vp, id)
			}
			return nil
		})
	})
}

// place is one placement transaction: BEGIN, the scheduler's own row for
// the instance id on node, what alloc does in the transaction, COMMIT.
func place(ctx context.Context, db *pgxpool.Pool, id, cluster, node string, alloc func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO bench_placements (instance_id, cluster_id, node_id) VALUES ($1, $2, $3)`,
			id, cluster, node); err != nil {
			return err
		}
		return alloc(tx)
	})
}

// placementRows adds the rows of the placement transaction at n clients:
// each round's transaction with the address (and with the allocation's
// writes alone) against the same round's transaction without it (each slice
// holds one cell per round), and returns their diagnostic lines.
func (r *runner) placementRows(n int, cells map[string][]cell) []string {
	without := cells[placementRefLabel]
	lines := []string{cpuLine(merge(without))}
	for _, label := range []string{placementLabel, placementWritesLabel} {
		with := cells[label]
		name := fmt.Sprintf("%s, %d client%s", label, n, plural(n))
		section := "1 throughput"
		if label == placementWritesLabel {
			section = "1 throughput (experiment)"
		}
		var rates, refRates, ratios []float64
		failed := false
		for i := range with {
			for _, c := range []cell{with[i], without[i]} {
				if c.err != nil && !failed {
					r.rep.fail("%s, %d client%s, round %d: %v", c.label, n, plural(n), i+1, c.err)
					r.rep.add(Row{Section: section, Name: name, Value: "error", Status: "FAIL"})
					failed = true
				}
			}
			if !failed {
				rates = append(rates, with[i].rate())
				refRates = append(refRates, without[i].rate())
				ratios = append(ratios, with[i].rate()/without[i].rate())
			}
		}
		if failed || len(rates) == 0 {
			continue
		}
		ratio := medianF(ratios)
		row := Row{Section: section, Name: name, Value: num(medianF(rates)) + " tx/s",
			Reference: "without the IPAM " + num(medianF(refRates)) + " tx/s", Ratio: fmt.Sprintf("%.2f", ratio), Status: "info"}
		if want, ok := placementTargets[placementTarget{label, n}]; ok {
			row.Target, row.Status = fmt.Sprintf(">= %.2f", want), metOr(ratio >= want)
		}
		r.rep.add(row)
		lines = append(lines, cpuLine(merge(with)))
	}
	return lines
}
