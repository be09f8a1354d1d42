package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Invariants that Check verifies.
const (
	// InvariantUniqueAddress: no address is active (or reserved) twice in a
	// cluster, nor, for IPv6 and public IPv4, across clusters.
	InvariantUniqueAddress = "unique_active_address"
	// InvariantInPool: every row's address lies in its pool, is not an
	// excluded address, and its ordinal is the address's place in the pool.
	InvariantInPool = "address_in_pool"
	// InvariantCooldown: according to the event history, no address was
	// handed to another owner before the cooldown of its release had passed.
	InvariantCooldown = "no_reuse_inside_cooldown"
	// InvariantIPv4PerEnv: at most one active add-on IPv4 (owner kind
	// env_ipv4) per environment in a cluster.
	InvariantIPv4PerEnv = "one_ipv4_per_environment"
	// InvariantCounters: the striped counters of counter pools are complete
	// and in their residue class, and no handed-out ordinal is at or beyond
	// its stripe's next ordinal (the counter would hand it out again). An
	// address claimed exactly is exempt when its allocation event says so
	// (data.exact = true).
	InvariantCounters = "stripe_counters"
	// InvariantUsageCounts: every pool has its usage counter slots, and
	// they and its stripes' counts add up to the number of its active rows
	// (what usage reports as active without counting them); every cooling
	// bucket that usage reads holds the number of the pool's cooling rows
	// that become reusable in its minute.
	InvariantUsageCounts = "usage_counters"
	// InvariantSettings: the pools that hand out a cluster's node and
	// instance addresses (its own two, and every node block pool) carry the
	// cluster's cooldowns and gateway, so releases use the rules in force.
	InvariantSettings = "pool_settings_in_force"
	// InvariantNodeBlocks: a node block pool's rows lie in that node's active
	// blocks, a parked pool's rows in a cooling block, and no other pool's
	// row lies in a block (the cluster counter never enters one).
	InvariantNodeBlocks = "node_blocks"
	// InvariantTombstones: an address that a destroyed pool or cluster left
	// inside its cooldown (a tombstone) has no row in the clusters it binds:
	// a pool created over it inherited it as a cooling row, and the
	// tombstone went.
	InvariantTombstones = "tombstones_inherited"
)

// Invariants lists what Check verifies, in the order it checks.
var Invariants = []string{InvariantUniqueAddress, InvariantInPool, InvariantCooldown, InvariantIPv4PerEnv, InvariantCounters,
	InvariantUsageCounts, InvariantSettings, InvariantNodeBlocks, InvariantTombstones}

// maxViolationsListed bounds how many violations of one invariant are listed.
const maxViolationsListed = 100

// Violation is one broken invariant.
type Violation struct {
	Invariant    string `json:"invariant"`
	ClusterID    string `json:"cluster_id,omitempty"`
	PoolID       string `json:"pool_id,omitempty"`
	Address      string `json:"address,omitempty"`
	AllocationID string `json:"allocation_id,omitempty"`
	Detail       string `json:"detail"`
}

func (v Violation) String() string {
	var where []string
	for _, x := range []struct{ k, v string }{{"cluster", v.ClusterID}, {"pool", v.PoolID}, {"address", v.Address}, {"allocation", v.AllocationID}} {
		if x.v != "" {
			where = append(where, x.k+" "+x.v)
		}
	}
	if len(where) == 0 {
		return v.Invariant + ": " + v.Detail
	}
	return fmt.Sprintf("%s: %s: %s", v.Invariant, strings.Join(where, ", "), v.Detail)
}

// CheckReport is the outcome of Check.
type CheckReport struct {
	At         time.Time   `json:"at"`
	ClusterID  string      `json:"cluster_id,omitempty"`
	Invariants []string    `json:"invariants"`
	Rows       int64       `json:"rows_checked"`
	Violations []Violation `json:"violations"`
	// Counts is the number of violations found per invariant, all of them
	// (every invariant checked is a key, 0 when it holds): the listing
	// keeps the first maxViolationsListed of each.
	Counts map[string]int64 `json:"violation_counts"`
}

// OK reports whether every invariant holds.
func (r CheckReport) OK() bool { return len(r.Violations) == 0 }

// Total is the number of violations found, listed or not.
func (r CheckReport) Total() int64 {
	var n int64
	for _, c := range r.Counts {
		n += c
	}
	return n
}

// Check verifies the invariants on the live database, in one read-only
// snapshot, for one cluster or all. It reads every allocation row: an audit,
// not a hot path.
func (o *Operator) Check(ctx context.Context, clusterID string) (CheckReport, error) {
	s := o.c
	rep := CheckReport{ClusterID: clusterID, Invariants: Invariants, Violations: []Violation{}, Counts: map[string]int64{}}
	for _, inv := range Invariants {
		rep.Counts[inv] = 0
	}
	if err := checkFilterIDs("cluster_id", clusterID); err != nil {
		return rep, err
	}
	err := s.readTx(ctx, true, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, sqlNow).Scan(&rep.At); err != nil {
			return err
		}
		rep.At = rep.At.UTC()
		if clusterID != "" {
			if _, err := scanCluster(tx.QueryRow(ctx, sqlLoadCluster, clusterID)); errors.Is(err, ErrNotFound) {
				return fmt.Errorf("%w: cluster %q does not exist", ErrNotFound, clusterID)
			} else if err != nil {
				return err
			}
		}
		pools, err := checkPools(ctx, tx, clusterID)
		if err != nil {
			return err
		}
		for _, check := range []func(context.Context, pgx.Tx, string, map[string]*Pool, *CheckReport) error{
			checkUnique, checkInPool, checkCooldown, checkIPv4PerEnv, checkCounters, checkUsageCounts, checkSettings, checkNodeBlocks, checkTombstones,
		} {
			if err := check(ctx, tx, clusterID, pools, &rep); err != nil {
				return err
			}
		}
		return nil
	})
	return rep, err
}

func checkPools(ctx context.Context, tx pgx.Tx, clusterID string) (map[string]*Pool, error) {
	rows, err := tx.Query(ctx, sqlCheckPoolIDs, clusterID)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]*Pool, len(ids))
	for _, id := range ids {
		if out[id], err = loadPool(ctx, tx, id); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// add appends a violation, keeping at most maxViolationsListed per invariant
// and noting once that more were left out.
func (r *CheckReport) add(v Violation) {
	if r.Counts == nil {
		r.Counts = map[string]int64{}
	}
	n := r.Counts[v.Invariant] // listed so far: the first maxViolationsListed
	r.Counts[v.Invariant]++
	switch {
	case n < maxViolationsListed:
		r.Violations = append(r.Violations, v)
	case n == maxViolationsListed:
		r.Violations = append(r.Violations, Violation{Invariant: v.Invariant,
			Detail: fmt.Sprintf("more violations of this invariant; only the first %d are listed", maxViolationsListed)})
	}
}

func checkUnique(ctx context.Context, tx pgx.Tx, clusterID string, pools map[string]*Pool, rep *CheckReport) error {
	// A block that mixes public and private IPv4 (refused since schema
	// migration 13, so made before it) lets a private pool of another
	// cluster overlap its public part.
	for _, id := range slices.Sorted(maps.Keys(pools)) {
		p := pools[id]
		for _, b := range p.CIDRs {
			if blockClass(b) == classMixed {
				rep.add(Violation{Invariant: InvariantUniqueAddress, ClusterID: p.ClusterID, PoolID: p.ID,
					Detail: fmt.Sprintf("block %s mixes public and private IPv4 addresses, so another cluster's private pool may overlap its public part; replace it with wholly public and wholly private blocks", b)})
			}
		}
	}
	rows, err := tx.Query(ctx, sqlCheckUnique, clusterID)
	if err != nil {
		return err
	}
	var addr netip.Prefix
	var clusters, ids, owners []string
	_, err = pgx.ForEachRow(rows, []any{&addr, &clusters, &ids, &owners}, func() error {
		rep.add(Violation{Invariant: InvariantUniqueAddress, ClusterID: strings.Join(slices.Compact(slices.Clone(clusters)), ","),
			Address: addr.Addr().String(), AllocationID: strings.Join(ids, ","),
			Detail: fmt.Sprintf("active %d times, held by %s", len(ids), strings.Join(owners, ", "))})
		return nil
	})
	return err
}

func checkInPool(ctx context.Context, tx pgx.Tx, clusterID string, pools map[string]*Pool, rep *CheckReport) error {
	rows, err := tx.Query(ctx, sqlCheckInPoolRows, clusterID)
	if err != nil {
		return err
	}
	var id, cluster, poolID, state string
	var addr netip.Prefix
	var ord int64
	_, err = pgx.ForEachRow(rows, []any{&id, &cluster, &poolID, &addr, &ord, &state}, func() error {
		rep.Rows++
		v := Violation{Invariant: InvariantInPool, ClusterID: cluster, PoolID: poolID, Address: addr.Addr().String(), AllocationID: id}
		p := pools[poolID]
		if p == nil {
			v.Detail = fmt.Sprintf("the row is in cluster %q but its pool belongs to another cluster", cluster)
			rep.add(v)
			return nil
		}
		got, ok := p.layout.Ordinal(addr.Addr())
		switch {
		case p.ClusterID != cluster:
			v.Detail = fmt.Sprintf("the row is in cluster %q but its pool belongs to cluster %q", cluster, p.ClusterID)
		case !ok:
			v.Detail = fmt.Sprintf("%s address outside its pool (%s)", state, prefixSummary(p.CIDRs))
		case p.layout.Excluded(got):
			v.Detail = fmt.Sprintf("%s address is one the pool never hands out (subnet-router anycast, network, broadcast, gateway or excluded)", state)
		case got != ord:
			v.Detail = fmt.Sprintf("%s address has ordinal %d, but its place in the pool is %d", state, ord, got)
		default:
			return nil
		}
		rep.add(v)
		return nil
	})
	return err
}

// checkCooldown judges every hand-out of an address (an allocation or a
// plan-time hold) against the releases before it: handing it to another owner
// before the reusable time recorded by a release of a different owner is a
// reuse inside that cooldown, whatever happened in between (the releasing
// owner taking it back for a while, a hold of its that expired, ...). The same
// owner may take its own cooling address back. Releases that recorded no
// reusable time (a dropped hold) are not judged. The hand-outs and releases
// are read once each; only the hand-outs that follow a release still
// cooling at their time are judged (sqlCheckCooldown).
func checkCooldown(ctx context.Context, tx pgx.Tx, clusterID string, _ map[string]*Pool, rep *CheckReport) error {
	alloc, release := allocationEventTypes()
	rows, err := tx.Query(ctx, sqlCheckCooldown, clusterID, alloc, release)
	if err != nil {
		return err
	}
	var id, typ, cluster, pool, kind, owner, prevKind, prevOwner string
	var at, prevAt, reusable time.Time
	var addr netip.Prefix
	_, err = pgx.ForEachRow(rows, []any{&id, &at, &typ, &cluster, &pool, &addr, &kind, &owner, &prevKind, &prevOwner, &prevAt, &reusable}, func() error {
		rep.add(Violation{Invariant: InvariantCooldown, ClusterID: cluster, PoolID: pool, Address: addr.Addr().String(),
			Detail: fmt.Sprintf("handed to %s %q at %s (event %s %s), but %s %q released it at %s and it was cooling until %s",
				kind, owner, at.UTC().Format(time.RFC3339), typ, id, prevKind, prevOwner,
				prevAt.UTC().Format(time.RFC3339), reusable.UTC().Format(time.RFC3339))})
		return nil
	})
	return err
}

func checkIPv4PerEnv(ctx context.Context, tx pgx.Tx, clusterID string, _ map[string]*Pool, rep *CheckReport) error {
	rows, err := tx.Query(ctx, sqlCheckIPv4PerEnv, clusterID)
	if err != nil {
		return err
	}
	var cluster, env, held string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&cluster, &env, &n, &held}, func() error {
		rep.add(Violation{Invariant: InvariantIPv4PerEnv, ClusterID: cluster,
			Detail: fmt.Sprintf("environment %q holds %d active IPv4 addresses: %s", env, n, held)})
		return nil
	}); err != nil {
		return err
	}
	// The owner index keeps one row per owner id; an env_ipv4 row labelled
	// with another environment would slip past it.
	rows, err = tx.Query(ctx, sqlCheckIPv4EnvLabel, clusterID)
	if err != nil {
		return err
	}
	var id, pool, owner string
	var addr netip.Prefix
	_, err = pgx.ForEachRow(rows, []any{&id, &cluster, &pool, &addr, &owner, &env}, func() error {
		rep.add(Violation{Invariant: InvariantIPv4PerEnv, ClusterID: cluster, PoolID: pool, Address: addr.Addr().String(), AllocationID: id,
			Detail: fmt.Sprintf("held by env_ipv4 owner %q but labelled with environment %q", owner, env)})
		return nil
	})
	return err
}

func checkTombstones(ctx context.Context, tx pgx.Tx, clusterID string, _ map[string]*Pool, rep *CheckReport) error {
	rows, err := tx.Query(ctx, sqlCheckTombstones, clusterID)
	if err != nil {
		return err
	}
	var id, cluster, pool, state, owner, left, from string
	var addr netip.Prefix
	var until time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &cluster, &pool, &addr, &state, &owner, &left, &from, &until}, func() error {
		rep.add(Violation{Invariant: InvariantTombstones, ClusterID: cluster, PoolID: pool, Address: addr.Addr().String(), AllocationID: id,
			Detail: fmt.Sprintf("%s (%s) over the tombstone %s of destroyed pool %s left cooling until %s: the pool did not inherit it",
				state, owner, left, from, until.UTC().Format(time.RFC3339))})
		return nil
	})
	return err
}

func checkCounters(ctx context.Context, tx pgx.Tx, clusterID string, pools map[string]*Pool, rep *CheckReport) error {
	type stripe struct {
		pool       string
		k          int
		next, last int64
	}
	rows, err := tx.Query(ctx, sqlCheckStripes, clusterID)
	if err != nil {
		return err
	}
	stripes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stripe, error) {
		var s stripe
		return s, r.Scan(&s.pool, &s.k, &s.next, &s.last)
	})
	if err != nil {
		return err
	}
	// A cluster's instance counter ends below its lowest node block, and
	// not below its blocks' floor (blocksOf): a carve lowers it under the
	// floor, or under the ordinals it had handed out past the floor, or under
	// its block (keepInstanceCounterBelow); an earlier version lowered it
	// under each block it carved.
	type floor struct{ blocks, lowest netip.Prefix }
	floors := map[string]floor{}
	frows, err := tx.Query(ctx, sqlCheckBlockFloors)
	if err != nil {
		return err
	}
	if err := func() error {
		defer frows.Close()
		for frows.Next() {
			var c string
			var f floor
			var instance netip.Prefix
			var length int
			if err := frows.Scan(&c, &f.lowest, &instance, &length); err != nil {
				return err
			}
			_, _, f.blocks, _ = blocksOf(instance, length) // a carve refuses a length without one
			floors[InstancePool(c).ID()] = f
		}
		return frows.Err()
	}(); err != nil {
		return err
	}
	byPool := map[string][]stripe{}
	for _, s := range stripes {
		byPool[s.pool] = append(byPool[s.pool], s)
	}
	ids := make([]string, 0, len(pools))
	for id := range pools {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p := pools[id]
		if p.Kind != "counter" {
			continue
		}
		v := Violation{Invariant: InvariantCounters, ClusterID: p.ClusterID, PoolID: p.ID}
		ss := byPool[id]
		if len(ss) != p.Stripes {
			v.Detail = fmt.Sprintf("the pool has %d stripes but %d counters", p.Stripes, len(ss))
			rep.add(v)
		}
		stride := int64(p.Stripes)
		below := func(b netip.Prefix) int64 {
			if b.IsValid() {
				if o, ok := p.layout.Ordinal(b.Addr()); ok {
					return min(p.layout.LastOrdinal(), o-1)
				}
			}
			return p.layout.LastOrdinal()
		}
		least, most := p.layout.LastOrdinal(), p.layout.LastOrdinal()
		if f, ok := floors[p.ID]; ok {
			least, most = below(f.blocks), below(f.lowest)
		}
		for i, s := range ss {
			switch {
			case s.k != i:
				v.Detail = fmt.Sprintf("counter #%d is numbered %d; stripes are numbered 0 to %d", i, s.k, p.Stripes-1)
			case (s.last < least || s.last > most) && least == most:
				v.Detail = fmt.Sprintf("stripe %d ends at ordinal %d, but the pool's last ordinal is %d", s.k, s.last, least)
			case s.last < least || s.last > most:
				v.Detail = fmt.Sprintf("stripe %d ends at ordinal %d, but the pool's last ordinal is from %d (below its node blocks' half) to %d (below its lowest block)", s.k, s.last, least, most)
			case s.last != ss[0].last:
				v.Detail = fmt.Sprintf("stripe %d ends at ordinal %d, but stripe %d at %d: the stripes end together", s.k, s.last, ss[0].k, ss[0].last)
			case s.next <= s.last && (s.next < 0 || s.next%stride != int64(s.k)):
				v.Detail = fmt.Sprintf("stripe %d is at ordinal %d, outside its residue class (%d mod %d)", s.k, s.next, s.k, stride)
			default:
				continue
			}
			rep.add(v)
		}
	}
	// Ordinals already handed out at or beyond their stripe's counter: that
	// counter would hand them out again. Exact claims are exempt when their
	// event marks them so.
	rows, err = tx.Query(ctx, sqlCheckCounterOrdinals, clusterID)
	if err != nil {
		return err
	}
	var id, cluster, pool, state string
	var addr netip.Prefix
	var ord, next int64
	var k int
	_, err = pgx.ForEachRow(rows, []any{&id, &cluster, &pool, &addr, &ord, &state, &k, &next}, func() error {
		rep.add(Violation{Invariant: InvariantCounters, ClusterID: cluster, PoolID: pool, Address: addr.Addr().String(), AllocationID: id,
			Detail: fmt.Sprintf("%s ordinal %d is at or beyond stripe %d's next ordinal %d: the counter would hand it out again", state, ord, k, next)})
		return nil
	})
	return err
}

func checkUsageCounts(ctx context.Context, tx pgx.Tx, clusterID string, _ map[string]*Pool, rep *CheckReport) error {
	rows, err := tx.Query(ctx, sqlCheckUsageCounts, clusterID)
	if err != nil {
		return err
	}
	var poolID, cluster, kind string
	var slots, top, counted, active int64
	_, err = pgx.ForEachRow(rows, []any{&poolID, &cluster, &kind, &slots, &top, &counted, &active}, func() error {
		v := Violation{Invariant: InvariantUsageCounts, ClusterID: cluster, PoolID: poolID}
		if want := int64(counterSlots(kind)); slots != want || top != want-1 {
			v.Detail = fmt.Sprintf("the pool has %d counter slots (highest %d); a %s pool has %d, numbered from 0", slots, top, kind, want)
			rep.add(v)
		}
		if counted != active {
			v.Detail = fmt.Sprintf("the counters say %d active addresses, the pool holds %d", counted, active)
			rep.add(v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	rows, err = tx.Query(ctx, sqlCheckCoolingCounts, clusterID)
	if err != nil {
		return err
	}
	var bucket time.Time
	var cooling int64
	_, err = pgx.ForEachRow(rows, []any{&poolID, &cluster, &bucket, &counted, &cooling}, func() error {
		rep.add(Violation{Invariant: InvariantUsageCounts, ClusterID: cluster, PoolID: poolID,
			Detail: fmt.Sprintf("the cooling counts say %d addresses become reusable in the minute from %s, the pool holds %d",
				counted, bucket.UTC().Format(time.RFC3339), cooling)})
		return nil
	})
	return err
}

// Recount is one pool whose usage counters RecountUsage corrected.
type Recount struct {
	PoolID string `json:"pool_id"`
	// Was and Active: the active count before and after; CoolingWas and
	// Cooling, the count of addresses inside their cooldown (the part of it
	// kept in counts, from two minutes ahead) before and after. The pair
	// that was right is zero.
	Was        int64 `json:"counted_before"`
	Active     int64 `json:"active"`
	CoolingWas int64 `json:"cooling_counted_before"`
	Cooling    int64 `json:"cooling"`
}

// RecountUsage sets each pool's usage counters (one cluster's, or every
// pool's) to a real count of its active addresses and of its cooling ones,
// and gives a pool the counter slots it lacks: the repair for a
// usage_counters violation. Writers keep running meanwhile: each pool's
// active count is recounted in its own transaction with all its stripes and
// slots locked, so what is counted is exactly what they held, and a writer
// that comes later adds its change to the new count. The cooling counts are
// recounted then, in one transaction that locks their table: writers that
// change a cooldown wait for it, allocations of fresh or reusable addresses
// do not. It returns the pools whose counts were wrong.
func (o *Operator) RecountUsage(ctx context.Context, clusterID string) ([]Recount, error) {
	s := o.c
	if err := checkFilterIDs("cluster_id", clusterID); err != nil {
		return nil, err
	}
	type pool struct{ id, kind string }
	var pools []pool
	err := s.readTx(ctx, false, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlRecountPools, clusterID)
		if err != nil {
			return err
		}
		pools, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (pool, error) {
			var p pool
			return p, r.Scan(&p.id, &p.kind)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	fixed := []Recount{}
	for _, p := range pools {
		r := Recount{PoolID: p.id}
		err := s.withTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, sqlInsertMissingSlots, p.id, counterSlots(p.kind)); err != nil {
				return err
			}
			for _, lock := range []string{sqlLockPoolStripes, sqlLockCounterSlots} {
				if _, err := tx.Exec(ctx, lock, p.id); err != nil {
					return err
				}
			}
			err := tx.QueryRow(ctx, sqlRecountActive, p.id).Scan(&r.Was, &r.Active)
			if errors.Is(err, pgx.ErrNoRows) { // the pool went meanwhile
				r.Was, r.Active = 0, 0
				return nil
			}
			return err
		})
		if err != nil {
			return fixed, err
		}
		if r.Was != r.Active {
			fixed = append(fixed, r)
		}
	}
	// The cooling counts, in a transaction of their own: one that held the
	// slots above as well could deadlock with a writer that changed a count
	// and then waits for a slot.
	var cooling []Recount
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockCooling); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sqlRecountCooling, clusterID)
		if err != nil {
			return err
		}
		cooling, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Recount, error) {
			var c Recount
			return c, r.Scan(&c.PoolID, &c.CoolingWas, &c.Cooling)
		})
		return err
	})
	if err != nil {
		return fixed, err
	}
	for _, c := range cooling {
		i := slices.IndexFunc(fixed, func(r Recount) bool { return r.PoolID == c.PoolID })
		if i < 0 {
			fixed = append(fixed, Recount{PoolID: c.PoolID})
			i = len(fixed) - 1
		}
		fixed[i].CoolingWas, fixed[i].Cooling = c.CoolingWas, c.Cooling
	}
	slices.SortFunc(fixed, func(a, b Recount) int { return strings.Compare(a.PoolID, b.PoolID) })
	return fixed, nil
}

func checkSettings(ctx context.Context, tx pgx.Tx, clusterID string, _ map[string]*Pool, rep *CheckReport) error {
	rows, err := tx.Query(ctx, sqlCheckSettings, clusterID)
	if err != nil {
		return err
	}
	var cluster, pool, want, got, wantGW, gotGW string
	_, err = pgx.ForEachRow(rows, []any{&cluster, &pool, &want, &got, &wantGW, &gotGW}, func() error {
		rep.add(Violation{Invariant: InvariantSettings, ClusterID: cluster, PoolID: pool,
			Detail: fmt.Sprintf("cooldown %s and gateway %s, but the cluster's are %s and %s", got, gotGW, want, wantGW)})
		return nil
	})
	return err
}

func checkNodeBlocks(ctx context.Context, tx pgx.Tx, clusterID string, _ map[string]*Pool, rep *CheckReport) error {
	rows, err := tx.Query(ctx, sqlCheckNodeBlocks, clusterID)
	if err != nil {
		return err
	}
	var id, cluster, pool, state, kind, blockNode, blockState, poolNode string
	var addr netip.Prefix
	_, err = pgx.ForEachRow(rows, []any{&id, &cluster, &pool, &addr, &state, &kind, &blockNode, &blockState, &poolNode}, func() error {
		v := Violation{Invariant: InvariantNodeBlocks, ClusterID: cluster, PoolID: pool, Address: addr.Addr().String(), AllocationID: id}
		switch {
		case kind == kindBlocks && blockState == "":
			v.Detail = fmt.Sprintf("%s address of node %q lies in none of its blocks", state, poolNode)
		case kind == kindBlocks:
			v.Detail = fmt.Sprintf("%s address of node %q lies in a %s block of node %q", state, poolNode, blockState, blockNode)
		case kind == kindParked:
			v.Detail = fmt.Sprintf("%s parked address lies in a %s block (parked rows keep a cooling block's cooldowns)", state, blockState)
		default:
			v.Detail = fmt.Sprintf("%s address of a %s pool lies in a %s node block of node %q", state, kind, blockState, blockNode)
		}
		rep.add(v)
		return nil
	})
	return err
}
