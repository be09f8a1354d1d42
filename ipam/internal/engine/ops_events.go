package engine

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventFilter selects events.
type EventFilter struct {
	ClusterID string
	// Types are exact event types ("instance.allocated") or prefixes ending in
	// '*' ("instance.*", "env.*"); empty matches every type. A type written
	// under an older name (EventTypeAliases) matches by either name, and a
	// prefix matching either name matches the events of both.
	Types []string
	// Since: events at or after this time (on the events' primary key, (at, id)).
	Since time.Time
	// Limit keeps the newest Limit events (0: all).
	Limit int
}

// ListEvents lists the events matching the filter, oldest first.
func (o *Operator) ListEvents(ctx context.Context, f EventFilter) ([]Event, error) {
	s := o.c
	if err := checkFilterIDs("cluster_id", f.ClusterID); err != nil {
		return nil, err
	}
	if f.Limit < 0 {
		return nil, invalid("limit", "%d is negative: give the number of newest events to keep, or 0 for all", f.Limit)
	}
	exact, prefixes := []string{}, []string{}
	known := EventTypes()
	for old := range eventTypeAliases {
		known = append(known, old)
	}
	for _, t := range f.Types {
		if err := ValidateEventType(t); err != nil {
			return nil, err
		}
		switch {
		case strings.HasSuffix(t, "*"):
			p := strings.TrimSuffix(t, "*")
			pattern := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p) + "%"
			matched := false
			for _, k := range known {
				if strings.HasPrefix(k, p) {
					// The other name of a type the prefix matches, which the
					// prefix may not match.
					exact, matched = append(exact, eventTypeNames(k)...), true
				}
			}
			if !matched {
				if err := s.eventTypeSeen(ctx, t, pattern, known); err != nil {
					return nil, err
				}
			}
			prefixes = append(prefixes, pattern)
		default:
			if !slices.Contains(known, t) {
				if err := s.eventTypeSeen(ctx, t, strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(t), known); err != nil {
					return nil, err
				}
			}
			exact = append(exact, eventTypeNames(t)...)
		}
	}
	slices.Sort(exact)
	exact = slices.Compact(exact)
	since := f.Since
	if since.IsZero() {
		since = time.Unix(0, 0)
	}
	q := sqlListEvents
	if f.Limit > 0 {
		q = sqlListEventsNewest + fmt.Sprintf(sqlLimitFormat, f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, since, f.ClusterID, exact, prefixes)
	if err != nil {
		return nil, s.mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		var addr *netip.Prefix
		err := r.Scan(&e.ID, &e.At, &e.Type, &e.ClusterID, &e.PoolID, &e.AllocationID, &e.Generation, &addr,
			&e.Owner.Kind, &e.Owner.ID, &e.Owner.OrgID, &e.Owner.EnvID, &e.Owner.NodeID, &e.Owner.InstanceID, &e.Actor, &e.Origin, &e.Data)
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

// eventTypeSeen accepts a type (or pattern, a LIKE pattern) that this binary
// does not write only when the database holds such events (written by a
// newer binary, say), so that a misspelt type is refused instead of
// matching nothing.
func (s *Client) eventTypeSeen(ctx context.Context, typ, like string, known []string) error {
	var seen bool
	if err := s.pool.QueryRow(ctx, sqlEventTypeSeen, like).Scan(&seen); err != nil {
		return s.mapErr(err)
	}
	if !seen {
		return invalid("type", "%q matches no event type; the types are %s (a prefix ending in '*' matches several)", typ, strings.Join(known, ", "))
	}
	return nil
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
