package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// opsFixture is a cluster c1 (2001:db8::/48) with an IPv4 pool c1/v4 of six
// usable addresses (198.51.100.0/29, one hour cooldown), for the operations tests.
type opsFixture struct {
	t   *testing.T
	ctx context.Context
	st  *engine.Client
	raw *pgx.Conn
}

func newOpsFixture(t *testing.T) *opsFixture {
	t.Helper()
	st, raw := newStore(t, "terraform")
	f := &opsFixture{t: t, ctx: context.Background(), st: st, raw: raw}
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.CreatePool(f.ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: prefixes("198.51.100.0/29")}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *opsFixture) alloc(pool string, o engine.Owner) engine.Allocation {
	f.t.Helper()
	r, err := f.st.Allocate(f.ctx, engine.AllocateRequest{Pool: testdb.Pool(pool), Owner: o})
	if err != nil {
		f.t.Fatal(err)
	}
	return r.Allocation
}

func (f *opsFixture) release(o engine.Owner) {
	f.t.Helper()
	if ok, err := f.st.Release(f.ctx, "c1", o, 0); err != nil || !ok {
		f.t.Fatalf("release %+v: %v %v", o, ok, err)
	}
}

func (f *opsFixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.raw.Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}
