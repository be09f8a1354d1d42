package engine

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ChangedSinceSnapshot is the fresh pick's test of a stripe locked or
// changed since the statement's snapshot.
const ChangedSinceSnapshot = changedSinceSnapshot

// FreshTakes are the fresh takes' texts: of several owners (a shared
// statement), of one, and of one in a caller's transaction.
func FreshTakes() (shared, one, inTx string) {
	return takeFreshSQL.sql, takeFreshOneSQL.sql, takeFreshOneInTxSQL.sql
}

// UsagePoolsSQL is the usage query, for the EXPLAIN test.
const UsagePoolsSQL = usagePoolsSQL

// UsagePlannerSetting is what the usage transaction sets before the query.
const UsagePlannerSetting = usagePlannerSetting

// FastAllocate exposes the fast path to the external tests.
func (s *Client) FastAllocate(ctx context.Context, req AllocateRequest) (Allocation, bool) {
	checked, err := checkRequest(req)
	if err != nil {
		return Allocation{}, false
	}
	r, ok, _ := s.fastAllocate(ctx, checked)
	return r.Allocation, ok
}

// FullPathRuns is how many allocations and holds of the client (and its
// InTx views) ran the full path.
func (s *Client) FullPathRuns() int64 { return s.paths.full.Load() }

// ForceFullPath sends every allocation and hold of the client (and its
// InTx views) to the full path, or back to the fast paths.
func (s *Client) ForceFullPath(on bool) { s.paths.fastOff.Store(on) }

// BeginForTest opens a transaction the way every core transaction is opened.
func (s *Client) BeginForTest(ctx context.Context) (pgx.Tx, error) {
	return s.begin(ctx, pgx.ReadCommitted, false)
}

// RawPool is the store's pool, for tests that look at its sessions.
func (s *Client) RawPool() *pgxpool.Pool { return s.pool.get() }

// PrivateIPv4 is the core's list of private IPv4 space, for the test that
// compares it with the schema's ipam_private_ipv4().
var PrivateIPv4 = privateIPv4

// Gathered is how many callers wait in the batch gathering for the pool
// named id (allocations of owners of kind; with hold > 0, plan-time holds of
// that length), for the tests that make one statement serve several owners.
func (s *Client) Gathered(id, kind string, hold time.Duration) int {
	return s.gathered(takeShared{pool: id, kind: kind, hold: hold}.queue())
}

// GatheredConfirms is how many confirms of plan-time holds of the cluster
// wait in the batch gathering to share a commit.
func (s *Client) GatheredConfirms(cluster string) int {
	return s.gathered(confirmQueue(cluster))
}

func (s *Client) gathered(queue string) int {
	c := s.shared
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.pools[queue]; q != nil && q.next != nil {
		return len(q.next.reqs)
	}
	return 0
}

// StatementArgs orders the values of a statement's named parameters
// (Statement.Params) by position, as the core does.
func StatementArgs(st Statement, v map[string]any) []any {
	return namedStatement{name: st.Name, names: st.Params}.args(v)
}

// SQLActivateRow is the full path's hand-out of a picked or owned row, for
// the test of its guard.
var SQLActivateRow = Statement{Name: sqlActivate.name, SQL: sqlActivate.sql, Params: sqlActivate.names}

// SQLExtendHold and SQLDropHold find a hold by its id, for the test of their
// plans.
var (
	SQLExtendHold = Statement{Name: "hold extend", SQL: sqlExtendHold}
	SQLDropHold   = Statement{Name: sqlDropHold.name, SQL: sqlDropHold.sql, Params: sqlDropHold.names}
)

// ListAllocationsQuery is ListAllocations' statement for the allocations
// and its arguments, for EXPLAIN; pools are the ids of f.Category's pools.
func ListAllocationsQuery(f ListFilter, pools ...string) (string, []any) {
	return listAllocationsQuery(f, pools)
}

// IndexRead is a read of the product that an index of the allocations or
// the events serves: its statement and arguments, for EXPLAIN.
type IndexRead struct {
	What, SQL string
	Args      []any
}

// IndexReads gives, for each index of ipam_allocations and ipam_events, the
// read it serves (DESIGN.md: each index names the read it serves), with
// arguments for cluster c, pool, owner (kind, id), address addr, allocation
// id, set and org.
func IndexReads(c, pool, kind, owner string, addr netip.Prefix, id uuid.UUID, set, org string) map[string]IndexRead {
	list, listArgs := listAllocationsQuery(ListFilter{ClusterID: c, OrgID: org}, nil)
	byInstance, byInstanceArgs := listAllocationsQuery(ListFilter{ClusterID: c, InstanceID: owner}, nil)
	lost := lostHoldArgs(c, Owner{Kind: kind, ID: owner})
	return map[string]IndexRead{
		"ipam_allocations_pkey":                   {"an operator's reclaim of a leaked allocation", sqlReclaim, []any{id, 1}},
		"ipam_allocations_address_cluster_id_key": {"the allocation of an address (FindActiveByAddress)", sqlActiveByAddress, []any{addr}},
		"ipam_allocations_owner_active":           {"whether the owner holds an address", sqlOwnerHolds, []any{c, kind, owner}},
		"ipam_allocations_owner_cooling":          {"the owner's own cooling address", sqlOwnerRows, []any{c, kind, owner, nil, nil}},
		"ipam_allocations_pool_state":             {"a full pool's figures (ipam_exhausted)", sqlExhaustedCounts, []any{pool}},
		"ipam_allocations_reuse":                  {"the full path's reuse pick", sqlTakeCooled, []any{pool}},
		"ipam_allocations_set":                    {"an address set's members", sqlSetMembers, []any{c, set}},
		"ipam_allocations_labels":                 {"a listing by org (ListAllocations)", list, listArgs},
		"ipam_allocations_instance_label":         {"a listing by instance (ListAllocations)", byInstance, byInstanceArgs},
		"ipam_events_pkey": {"ipamctl events --limit (ListEvents)", sqlListEventsNewest + fmt.Sprintf(sqlLimitFormat, 10),
			[]any{time.Unix(0, 0), c, []string{}, []string{}}},
		"ipam_events_address":            {"the check's exemption of exact claims from the counters", sqlCheckCounterOrdinals, []any{c}},
		"ipam_events_hold_lost":          {"a plan's lost hold", sqlLostHold, lost},
		"ipam_events_hold_loss_reported": {"whether a lost hold was reported to the plan", sqlLostHold, lost},
	}
}
