package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// AllocationView is an allocation as operators list it: the allocation, its
// pool's category and when Terraform last saw it.
type AllocationView struct {
	Allocation
	Category string
	// LastSeenAt is when the allocation was last known in use: its
	// hand-out (an allocation, a hold confirmed, an adoption), or a
	// Terraform refresh that read it since (recorded at most once an hour);
	// zero when neither. A scheduler's allocation has its hand-out's time.
	LastSeenAt time.Time
	// Tombstone: the address is cooling after its pool or cluster was
	// destroyed (ClusterID and PoolID name them); a pool created over it
	// inherits it. Its Category is empty, and its ID is the allocation's
	// last one.
	Tombstone bool
	// StateHeld: a Terraform state holds the allocation (a refresh or an
	// import read it, or a configuration made it; Origin names that one).
	StateHeld bool
}

// ListFilter selects allocations. Empty fields match everything. State is
// one of active, reserved or cooling; without it all three are listed.
type ListFilter struct {
	ClusterID string
	Category  string
	PoolID    string
	OwnerKind string
	// OwnerID keeps one owner's allocations (with OwnerKind: an owner is
	// a kind and an id; a set member's id is <set>#<key>, and an address
	// inherited from a destroyed pool of another cluster is owned by
	// <former cluster>/<owner id>).
	OwnerID    string
	OrgID      string
	EnvID      string
	NodeID     string
	InstanceID string
	State      string
	// Unmanaged keeps only the allocations no Terraform state holds (what
	// `terraform query` offers to adopt).
	Unmanaged bool
	// Limit caps the number of allocations returned (0: no cap).
	Limit int
}

// ListStates are the states ListAllocations selects on.
var ListStates = []string{StateActive, StateReserved, StateCooling}

// Categories are every pool category.
var Categories = []string{CategoryNode, CategoryInstance, CategoryIPv4, CategoryIPv6}

// statePredicates say what each listed state means, the same way usage counts
// it: a reserved hold past its expiry and a cooling address past its cooldown
// are free, so they are not listed.
var statePredicates = map[string]string{
	StateActive:   sqlListActive,
	StateReserved: sqlListReserved,
	StateCooling:  sqlListCooling,
}

// Validate checks the filter's fields, naming the one at fault.
func (f ListFilter) Validate() error {
	for _, x := range []struct{ field, v string }{
		{"cluster_id", f.ClusterID}, {"org_id", f.OrgID}, {"env_id", f.EnvID},
		{"node_id", f.NodeID}, {"instance_id", f.InstanceID},
	} {
		if x.v == "" {
			continue
		}
		if err := ValidateID(x.field, x.v); err != nil {
			return &InvalidError{Field: x.field, Msg: err.Error()}
		}
	}
	if f.PoolID != "" && !isParkedPoolID(f.PoolID) {
		if _, err := ParsePoolRef("pool_id", f.PoolID); err != nil {
			return err
		}
	}
	if f.Category != "" && !slices.Contains(Categories, f.Category) {
		return invalid("category", "%q is not a category: expected one of %s", truncate(f.Category, 40), strings.Join(Categories, ", "))
	}
	if f.OwnerKind != "" && !slices.Contains(OwnerKinds, f.OwnerKind) {
		return invalid("owner_kind", "%q is not an owner kind: expected %s", truncate(f.OwnerKind, 40), strings.Join(OwnerKinds, ", "))
	}
	if f.OwnerID != "" {
		if f.OwnerKind == "" {
			return invalid("owner_id", "needs an owner kind: an owner is a kind and an id (%s)", strings.Join(OwnerKinds, ", "))
		}
		// A pool of another cluster lists an address it inherited as owned
		// by <former cluster>/<owner id>; the filter finds it by that id.
		id := f.OwnerID
		if former, rest, ok := strings.Cut(id, "/"); ok {
			if err := checkIDs("owner_id", former); err != nil {
				return err
			}
			id = rest
		}
		if err := checkOwnerKey(f.OwnerKind, id); err != nil {
			return err
		}
	}
	if f.State != "" && statePredicates[f.State] == "" {
		return invalid("state", "%q is not a state to list: expected active, reserved or cooling", truncate(f.State, 40))
	}
	if f.Limit < 0 {
		return invalid("limit", "must not be negative")
	}
	return nil
}

// listQuery gathers a listing's conditions and their arguments.
type listQuery struct {
	where []string
	args  []any
	// instance is the instance filter's parameter number (0: none).
	instance int
}

// eq adds the condition filter (a format of its parameter's number) on v,
// unless v is empty, and returns the parameter's number (0: none).
func (q *listQuery) eq(filter, v string) int {
	if v == "" {
		return 0
	}
	q.args = append(q.args, v)
	q.where = append(q.where, fmt.Sprintf(filter, len(q.args)))
	return len(q.args)
}

// limit appends a LIMIT of n rows to sql, unless n is 0.
func (q *listQuery) limit(sql string, n int) string {
	if n <= 0 {
		return sql
	}
	q.args = append(q.args, n)
	return sql + fmt.Sprintf(sqlLimitParamFormat, len(q.args))
}

// filters adds the filters both allocations and tombstones ("a") have.
func (q *listQuery) filters(f ListFilter) {
	q.eq(sqlListByCluster, f.ClusterID)
	q.eq(sqlListByPool, f.PoolID)
	q.eq(sqlListByOwnerKind, f.OwnerKind)
	q.eq(sqlListByOwnerID, f.OwnerID)
	q.eq(sqlListByOrg, f.OrgID)
	q.eq(sqlListByEnv, f.EnvID)
	q.eq(sqlListByNode, f.NodeID)
	q.instance = q.eq(sqlListByInstance, f.InstanceID)
}

// listAllocationsQuery is ListAllocations' statement for the allocations
// (the tombstones come after them), and its arguments. pools are the ids of
// the pools of f.Category (sqlListCategoryPools), when it names one.
func listAllocationsQuery(f ListFilter, pools []string) (string, []any) {
	var q listQuery
	q.filters(f)
	if f.Category != "" {
		q.args = append(q.args, pools)
		q.where = append(q.where, fmt.Sprintf(sqlListByPools, len(q.args)))
	}
	states := []string{sqlListAnyState, sqlListLive}
	if f.OwnerKind != "" {
		q.where = append(q.where, sqlListOwned, sqlListOwnedStates)
		if f.ClusterID == "" {
			q.where = append(q.where, sqlListEveryCluster)
		}
		states = states[1:]
	}
	if f.State != "" {
		states = []string{statePredicates[f.State]}
	}
	if f.Unmanaged {
		q.where = append(q.where, sqlListUnmanaged)
	}
	q.where = append(q.where, states...)
	where := strings.Join(q.where, sqlAnd)
	rows := sqlListAllocationsTable
	switch {
	case q.instance > 0:
		rows = fmt.Sprintf(sqlListByInstanceSource, q.instance)
	case f.Limit > 0:
		// The limit's parameter is the next one, which q.limit adds below.
		rows = fmt.Sprintf(sqlListFirstRows, where, len(q.args)+1)
	}
	sql := q.limit(sqlListAllocationsHead+rows+sqlListAllocationsJoin+where+sqlListAllocationsTail, f.Limit)
	return sql, q.args
}

// ListAllocations lists the allocations matching the filter, ordered by
// cluster, pool and address order. Pool, category and cluster filters use
// the (pool_id, state) and (cluster_id, ...) indexes, an org or env filter
// the labels index, an owner kind filter (with or without the owner's id)
// the owner indexes, and an instance filter the owner indexes and the
// instance label index (sqlListByInstanceSource); the node filter narrows
// what the others
// return. With a limit, the first rows are found by their keys alone
// (sqlListFirstRows).
func (o *Operator) ListAllocations(ctx context.Context, f ListFilter) ([]AllocationView, error) {
	s := o.c
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var out []AllocationView
	// One snapshot for its reads: read apart, a pool destroyed between the
	// allocations and the tombstones listed its cooling addresses twice.
	err := s.readTx(ctx, true, func(tx pgx.Tx) error {
		out = nil
		var pools []string
		if f.Category != "" {
			rows, err := tx.Query(ctx, sqlListCategoryPools, f.Category)
			if err != nil {
				return err
			}
			if pools, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
			if len(pools) == 0 {
				out = []AllocationView{}
				return nil // no pool of the category; its tombstones are not listed (below)
			}
		}
		q, args := listAllocationsQuery(f, pools)
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		if out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (AllocationView, error) { return scanView(r) }); err != nil {
			return err
		}
		// The addresses destroyed pools left cooling are listed as cooling,
		// after the allocations (they have no category to filter by).
		if (f.State != "" && f.State != StateCooling) || f.Category != "" || (f.Limit > 0 && len(out) >= f.Limit) {
			return nil
		}
		var t listQuery
		t.filters(f)
		q = sqlListTombstones
		for _, w := range t.where {
			q += sqlAnd + w
		}
		q = t.limit(q+sqlListTombstonesOrder, f.Limit-len(out)) // none without a limit: 0 - len(out)
		if rows, err = tx.Query(ctx, q, t.args...); err != nil {
			return err
		}
		buried, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AllocationView, error) {
			v, err := scanView(r)
			v.Tombstone = true
			return v, err
		})
		out = append(out, buried...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanView scans allocColumns followed by the category, last_seen_at and
// whether a state holds the allocation.
func scanView(row pgx.Row) (AllocationView, error) {
	var v AllocationView
	var seen *time.Time
	a, err := scanAllocation(extraRow{row, []any{&v.Category, &seen, &v.StateHeld}})
	if a.State == StateReserved && a.HoldExpired {
		// An expired hold is listed only while it keeps its owner's
		// cooldown (sqlListCooling): it is cooling, as lookup says.
		a.State = StateCooling
	}
	v.Allocation = a
	if seen != nil {
		v.LastSeenAt = *seen
	}
	return v, err
}

// extraRow (allocate.go) scans the columns after allocColumns.

// Inventory: what exists, for `terraform query` and operators. Each call
// lists keys in a stable order; the caller reads each item through its own
// Get call.

// ListClusterIDs lists every cluster's id, in order.
func (o *Operator) ListClusterIDs(ctx context.Context) ([]string, error) {
	s := o.c
	rows, err := s.pool.Query(ctx, sqlListClusterIDs)
	if err != nil {
		return nil, s.mapErr(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, s.mapErr(err)
}

// ListPools lists the pools of a cluster (every cluster when clusterID is
// empty) whose category is one of categories (any when none are given),
// ordered by id. Operator pools are the categories CategoryIPv4 and
// CategoryIPv6; the node and instance pools belong to their cluster.
func (o *Operator) ListPools(ctx context.Context, clusterID string, categories ...string) ([]PoolRef, error) {
	s := o.c
	if err := checkFilterIDs("cluster_id", clusterID); err != nil {
		return nil, err
	}
	for _, c := range categories {
		if !slices.Contains(Categories, c) {
			return nil, invalid("category", "%q is not a category: expected one of %s", truncate(c, 40), strings.Join(Categories, ", "))
		}
	}
	rows, err := s.pool.Query(ctx, sqlListPools, clusterID, categories)
	if err != nil {
		return nil, s.mapErr(err)
	}
	refs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[PoolRef])
	return refs, s.mapErr(err)
}

// Kinds of object Managers judges.
const (
	ManagedCluster    = "cluster"
	ManagedPool       = "pool"
	ManagedSet        = "set"         // id "<cluster>/<set id>"
	ManagedNodeBlocks = "node_blocks" // id "<cluster>/<node id>"
)

// Managers tells which of the objects ids of one kind a Terraform state
// holds: one a configuration created (its origin recorded) or a read of the
// provider saw (a refresh or an import). It maps each such id to the origin
// of the configuration that made it, "" when only a read saw it. A set is
// held when a state holds any of its active members. `terraform query`
// leaves what a state holds out of its listings unless asked: adopting it
// would make two states manage one object.
func (o *Operator) Managers(ctx context.Context, kind string, ids []string) (map[string]string, error) {
	s := o.c
	q, ok := map[string]string{ManagedCluster: sqlManagersClusters, ManagedPool: sqlManagersPools,
		ManagedSet: sqlManagersSets, ManagedNodeBlocks: sqlManagersNodeBlocks}[kind]
	if !ok {
		return nil, invalid("kind", "%q is not a kind Managers judges: expected one of cluster, pool, set, node_blocks", truncate(kind, 40))
	}
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, q, ids)
	if err != nil {
		return nil, s.mapErr(err)
	}
	var id, origin string
	_, err = pgx.ForEachRow(rows, []any{&id, &origin}, func() error {
		out[id] = origin
		return nil
	})
	return out, s.mapErr(err)
}

// ConfirmCluster records that a Terraform state read the cluster (a
// refresh or an import): `terraform query` then leaves it out of its
// listing unless asked (Managers). A Peek view records nothing.
func (o *Operator) ConfirmCluster(ctx context.Context, id string) error {
	s := o.c
	return s.confirmRead(ctx, sqlConfirmCluster, "id", id)
}

// ConfirmPool records that a Terraform state read the pool, as
// ConfirmCluster does for a cluster.
func (o *Operator) ConfirmPool(ctx context.Context, id string) error {
	s := o.c
	return s.confirmRead(ctx, sqlConfirmPool, "pool_id", id)
}

func (s *Client) confirmRead(ctx context.Context, sql, field, id string) error {
	if id == "" {
		return invalid(field, "must not be empty")
	}
	if s.peek {
		return nil
	}
	_, err := s.pool.Exec(ctx, sql, id)
	return s.mapErr(err)
}

// SetRef names an address set: its cluster and its owner id (the set id).
type SetRef struct {
	ClusterID string
	SetID     string
}

// ListSets lists the address sets with at least one active member, in a
// cluster (every cluster when clusterID is empty) and, when orgID or envID is
// set, of that organization or environment.
func (o *Operator) ListSets(ctx context.Context, clusterID, orgID, envID string) ([]SetRef, error) {
	s := o.c
	for _, x := range []struct{ field, v string }{{"cluster_id", clusterID}, {"org_id", orgID}, {"env_id", envID}} {
		if x.v != "" {
			if err := ValidateID(x.field, x.v); err != nil {
				return nil, &InvalidError{Field: x.field, Msg: err.Error()}
			}
		}
	}
	rows, err := s.pool.Query(ctx, sqlListSets, clusterID, orgID, envID)
	if err != nil {
		return nil, s.mapErr(err)
	}
	refs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[SetRef])
	return refs, s.mapErr(err)
}
