package engine_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// Every event records the configuration whose transaction wrote it, from
// the one place that stamps it (the column's default reads the
// transaction's ipam.origin), whatever statement writes the event: the
// one-statement take, alone or in a caller's transaction, a plan-time hold
// and its confirm, the full path, a release, a cluster's creation. A client
// without an origin records none.
func TestEveryEventRecordsItsOrigin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.New(t)
	cfg := openClient(t, engine.Config{DatabaseURL: url, Origin: "/work/cfg-a"})
	plain := openClient(t, engine.Config{DatabaseURL: url})
	mkCluster(t, cfg, "c1", "2001:db8::/48", "", "")
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := cfg.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("fast")})
	must("fast allocation", err)
	h, err := cfg.Reserve(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("held")}, time.Hour)
	must("hold", err)
	_, err = cfg.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("held"), Address: h.Address})
	must("confirm", err)
	cfg.ForceFullPath(true)
	_, err = cfg.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("full")})
	cfg.ForceFullPath(false)
	must("full path", err)
	tx, err := cfg.BeginForTest(ctx)
	must("begin", err)
	_, err = cfg.InTx(tx).Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("in-tx")})
	must("caller's transaction", err)
	must("commit", tx.Commit(ctx))
	_, err = cfg.Release(ctx, "c1", node("fast"), 0)
	must("release", err)
	// A failed allocation's event, written outside the failed transaction.
	_, err = cfg.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/30")}})
	must("pool", err)
	allocateUntilFull(t, cfg, engine.OperatorPool("c1", "v4"), func(i int) engine.Owner { return env(fmt.Sprintf("e%d", i)) })
	_, err = plain.Allocate(ctx, engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: node("plain")})
	must("allocation without an origin", err)

	events, err := engine.OperatorOf(cfg).ListEvents(ctx, engine.EventFilter{ClusterID: "c1"})
	must("events", err)
	want := map[string]int{"cluster.created": 1, "node.enrolled": 4, "allocation.reserved": 1, "node.released": 1,
		"pool.created": 1, "env.ipv4_addon_enabled": 2, "env.ipv4_addon_allocation_failed": 1}
	for _, e := range events {
		switch {
		case e.Owner.ID == "plain":
			if e.Origin != "" {
				t.Errorf("%s of %s: origin %q, want none", e.Type, e.Owner.ID, e.Origin)
			}
		case e.Origin != "/work/cfg-a":
			t.Errorf("%s of %s: origin %q, want /work/cfg-a", e.Type, e.Owner.ID, e.Origin)
		default:
			want[e.Type]--
		}
	}
	for typ, n := range want {
		if n != 0 {
			t.Errorf("%s: %d events with the origin missing from %d written", typ, n, len(events))
		}
	}
}
