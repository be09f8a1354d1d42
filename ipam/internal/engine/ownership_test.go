package engine_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// The ownership table of DESIGN.md ("What each operation does, by holder"),
// as a test: each operation of a caller (configuration A: actor terraform,
// origin /work/a) against each relation to the owner's current row, through
// every path the operation has. The tombstone columns are
// TestTombstoneOwnerIsScopedByCluster's.
func TestOwnershipTable(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	ctx := context.Background()
	url := testdbURLOf(t, st)
	open := func(actor, origin string) *engine.Client {
		c, err := engine.Open(ctx, engine.Config{DatabaseURL: url, Actor: actor, Origin: origin})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	same, otherOrigin, scheduler := open("terraform", "/work/a"), open("terraform", "/work/b"), open("scheduler", "")

	// A relation makes the owner's current row and returns it (zero: none).
	type relation struct {
		name  string
		setup func(o engine.Owner) engine.Allocation
	}
	req := func(o engine.Owner) engine.AllocateRequest {
		return engine.AllocateRequest{Pool: engine.NodePool("c1"), Owner: o}
	}
	allocated := func(c *engine.Client) func(engine.Owner) engine.Allocation {
		return func(o engine.Owner) engine.Allocation {
			r, err := c.Allocate(ctx, req(o))
			if err != nil {
				t.Fatal(err)
			}
			return r.Allocation
		}
	}
	held := func(c *engine.Client) func(engine.Owner) engine.Allocation {
		return func(o engine.Owner) engine.Allocation {
			h, err := c.Reserve(ctx, req(o), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return h.Allocation
		}
	}
	relations := []relation{
		{"same manager", allocated(same)},
		{"same manager's hold", held(same)},
		{"same actor, other origin", allocated(otherOrigin)},
		{"same actor, other origin's hold", held(otherOrigin)},
		{"other actor", allocated(scheduler)},
		{"other actor's hold", held(scheduler)},
		{"none", func(engine.Owner) engine.Allocation { return engine.Allocation{} }},
		{"own cooling address", func(o engine.Owner) engine.Allocation {
			a := allocated(same)(o)
			if ok, err := same.Release(ctx, "c1", o, a.Generation); err != nil || !ok {
				t.Fatalf("release: %v %v", ok, err)
			}
			return a
		}},
	}

	// An operation runs as the caller on a path and says what came of it:
	// "same" (the row's address), "new" (another address), "released",
	// "no-op", or the error's code.
	type path struct {
		name string
		run  func(t *testing.T, o engine.Owner, cur engine.Allocation, op func(*engine.Client) (netip.Addr, bool, error)) string
	}
	outcome := func(cur engine.Allocation, addr netip.Addr, released bool, err error) string {
		switch {
		case err != nil:
			return engine.Code(err)
		case addr.IsValid() && addr == cur.Address:
			return "same"
		case addr.IsValid():
			return "new"
		case released:
			return "released"
		}
		return "no-op"
	}
	caller := func(full bool) *engine.Client {
		c := open("terraform", "/work/a")
		c.ForceFullPath(full)
		return c
	}
	standalone, fullPath, inTx := caller(false), caller(true), caller(false)
	paths := map[string]path{
		"standalone": {"standalone", func(t *testing.T, o engine.Owner, cur engine.Allocation, op func(*engine.Client) (netip.Addr, bool, error)) string {
			addr, released, err := op(standalone)
			return outcome(cur, addr, released, err)
		}},
		"full path": {"full path", func(t *testing.T, o engine.Owner, cur engine.Allocation, op func(*engine.Client) (netip.Addr, bool, error)) string {
			addr, released, err := op(fullPath)
			return outcome(cur, addr, released, err)
		}},
		"caller's transaction": {"caller's transaction", func(t *testing.T, o engine.Owner, cur engine.Allocation, op func(*engine.Client) (netip.Addr, bool, error)) string {
			tx, err := inTx.BeginForTest(ctx)
			if err != nil {
				t.Fatal(err)
			}
			addr, released, err := op(inTx.InTx(tx))
			if err == nil {
				err = tx.Commit(ctx)
			} else {
				_ = tx.Rollback(ctx)
			}
			return outcome(cur, addr, released, err)
		}},
	}

	type operation struct {
		name  string
		paths []string
		run   func(c *engine.Client, o engine.Owner, cur engine.Allocation) (netip.Addr, bool, error)
		// want, by relation (in the order of relations).
		want []string
	}
	const conflict = engine.CodeOwnerConflict
	operations := []operation{
		{"allocate", []string{"standalone", "full path", "caller's transaction"},
			func(c *engine.Client, o engine.Owner, _ engine.Allocation) (netip.Addr, bool, error) {
				r, err := c.Allocate(ctx, req(o))
				return r.Address, false, err
			},
			[]string{"same", "same", conflict, conflict, conflict, conflict, "new", "same"}},
		{"reserve", []string{"standalone", "full path"},
			func(c *engine.Client, o engine.Owner, _ engine.Allocation) (netip.Addr, bool, error) {
				h, err := c.Reserve(ctx, req(o), time.Hour)
				return h.Address, false, err
			},
			[]string{"same", "same", conflict, conflict, conflict, conflict, "new", "same"}},
		{"release without generation", []string{"standalone", "caller's transaction"},
			func(c *engine.Client, o engine.Owner, _ engine.Allocation) (netip.Addr, bool, error) {
				ok, err := c.Release(ctx, "c1", o, 0)
				return netip.Addr{}, ok, err
			},
			[]string{"released", "no-op", conflict, "no-op", conflict, "no-op", "no-op", "no-op"}},
		{"release with generation", []string{"standalone", "caller's transaction"},
			func(c *engine.Client, o engine.Owner, cur engine.Allocation) (netip.Addr, bool, error) {
				ok, err := c.Release(ctx, "c1", o, max(cur.Generation, 1))
				return netip.Addr{}, ok, err
			},
			[]string{"released", "no-op", "released", "no-op", "released", "no-op", "no-op", "no-op"}},
	}
	n := 0
	for _, op := range operations {
		for _, pn := range op.paths {
			p := paths[pn]
			for i, rel := range relations {
				want := op.want[i]
				n++
				o := node(fmt.Sprintf("o%d", n))
				cur := rel.setup(o)
				if got := p.run(t, o, cur, func(c *engine.Client) (netip.Addr, bool, error) { return op.run(c, o, cur) }); got != want {
					t.Errorf("%s, %s, owner's row: %s: %s, want %s", op.name, pn, rel.name, got, want)
				}
			}
		}
	}
}
