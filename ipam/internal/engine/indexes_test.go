package engine_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// Every index of the allocations and of the events serves a read of the
// product, named in engine.IndexReads, and that read's plan uses it (under
// the core's planner settings, as on a table large enough that a scan costs
// more than the index). An index added without the read it is for, an index
// that no read uses any more (only written, at every hand-out), and a read
// whose index was dropped all fail here.
func TestEveryIndexServesARead(t *testing.T) {
	t.Parallel()
	st, raw := newStore(t, "")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	reads := engine.IndexReads("c1", "c1/instance", engine.OwnerInstance, "i-1",
		netip.MustParsePrefix("2001:db8::1/128"), uuid.New(), "s-1", "org")
	rows, err := raw.Query(ctx, `SELECT indexrelid::regclass::text FROM pg_index
		WHERE indrelid IN ('ipam_allocations'::regclass, 'ipam_events'::regclass) ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, ix := range indexes {
		if _, ok := reads[ix]; !ok {
			t.Errorf("index %s names no read it serves (engine.IndexReads)", ix)
		}
	}
	for ix, r := range reads {
		if !slices.Contains(indexes, ix) {
			t.Errorf("%s: there is no index %s", r.What, ix)
			continue
		}
		tx, err := raw.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, engine.TxSettings, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
		var js string
		if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+r.SQL, r.Args...).Scan(&js); err != nil {
			t.Fatalf("%s: %v", r.What, err)
		}
		if !slices.ContainsFunc(planNodes(t, js), func(n planNode) bool { return n.Index == ix }) {
			t.Errorf("%s does not read %s:\n%s", r.What, ix, js)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
