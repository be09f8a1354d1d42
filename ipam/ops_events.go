package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventReclaimed is written when ipamctl reclaim releases a leaked allocation.
const EventReclaimed = "allocation.reclaimed"

// EventFilter selects events.
type EventFilter struct {
	ClusterID string
	// Types are exact event types ("instance.allocated") or prefixes ending in
	// '*' ("instance.*"); empty matches every type.
	Types []string
	// Since: events at or after this time (on the ipam_events_at index).
	Since time.Time
	// Limit keeps the newest Limit events (0: all).
	Limit int
}

// ListEvents lists the events matching the filter, oldest first.
func (s *Client) ListEvents(ctx context.Context, f EventFilter) ([]Event, error) {
	if f.ClusterID != "" {
		if err := ValidateID("cluster_id", f.ClusterID); err != nil {
			return nil, &InvalidError{Field: "cluster_id", Msg: err.Error()}
		}
	}
	exact, prefixes := []string{}, []string{}
	for _, t := range f.Types {
		switch {
		case t == "" || t == "*":
			return nil, invalid("type", "%q is not an event type: give e.g. instance.allocated or instance.*", t)
		case strings.HasSuffix(t, "*"):
			p := strings.TrimSuffix(t, "*")
			p = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p)
			prefixes = append(prefixes, p+"%")
		default:
			exact = append(exact, t)
		}
	}
	since := f.Since
	if since.IsZero() {
		since = time.Unix(0, 0)
	}
	order, limit := "ASC", ""
	if f.Limit > 0 {
		order, limit = "DESC", fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := s.pool.Query(ctx, `SELECT id, at, type, coalesce(cluster_id, ''), coalesce(pool_id, ''),
			coalesce(allocation_id, '00000000-0000-0000-0000-000000000000'), coalesce(generation, 0), address,
			coalesce(owner_kind, ''), coalesce(owner_id, ''), coalesce(org_id, ''), coalesce(env_id, ''),
			coalesce(node_id, ''), coalesce(instance_id, ''), actor, data
		FROM ipam_events
		WHERE at >= $1 AND ($2 = '' OR cluster_id = $2)
			AND ((cardinality($3::text[]) = 0 AND cardinality($4::text[]) = 0) OR type = ANY ($3) OR type LIKE ANY ($4))
		ORDER BY at `+order+`, id `+order+limit, since, f.ClusterID, exact, prefixes)
	if err != nil {
		return nil, s.mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		var addr *netip.Prefix
		err := r.Scan(&e.ID, &e.At, &e.Type, &e.ClusterID, &e.PoolID, &e.AllocationID, &e.Generation, &addr,
			&e.Owner.Kind, &e.Owner.ID, &e.Owner.OrgID, &e.Owner.EnvID, &e.Owner.NodeID, &e.Owner.InstanceID, &e.Actor, &e.Data)
		if addr != nil {
			e.Address = addr.Addr()
		}
		e.At = e.At.UTC()
		return e, err
	})
	if err != nil {
		return nil, s.mapErr(err)
	}
	if f.Limit > 0 {
		slices.Reverse(out)
	}
	return out, nil
}

// allocationEventTypes and releaseEventTypes are the event types that hand an
// address to an owner and that take it back, for the cooldown check.
func allocationEventTypes() (alloc, release []string) {
	for _, t := range eventTypes {
		alloc = append(alloc, t.allocated)
		release = append(release, t.released)
	}
	// A plan-time hold hands the address to an owner too; a dropped hold
	// gives it back (at once: it records no reusable time, so it is not judged).
	alloc = append(alloc, "allocation.reserved")
	release = append(release, EventReclaimed, "allocation.hold_dropped")
	slices.Sort(alloc)
	slices.Sort(release)
	return alloc, release
}
