package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Leak report kinds.
const (
	// LeakInventory: active allocations whose owner is not in an inventory of
	// the owners that still exist.
	LeakInventory = "inventory"
	// LeakStale: active allocations no Terraform refresh has seen for N days.
	LeakStale = "stale"
)

// LeakReportVersion is the format version of LeakReport.
const LeakReportVersion = 1

// Inventory is the set of owners that still exist, per owner kind.
type Inventory map[string]map[string]bool

// Kinds lists the owner kinds the inventory speaks for, sorted.
func (inv Inventory) Kinds() []string {
	out := make([]string, 0, len(inv))
	for k := range inv {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Has reports whether the inventory lists the owner.
func (inv Inventory) Has(kind, id string) bool { return inv[kind][id] }

// ParseInventory reads the owners that still exist. Accepted forms:
//
//   - one id per line (blank lines and lines starting with '#' are skipped),
//     all of kind defaultKind;
//   - a JSON array of ids, all of kind defaultKind;
//   - a JSON object mapping owner kinds to arrays of ids:
//     {"instance": ["i-1", "i-2"], "node": ["n-1"]}.
//
// A kind named with no ids means "none of this kind exists": every active
// allocation of that kind is then a leak, which ParseInventory refuses unless
// allowEmpty is set, because it is more often a broken export than the truth.
func ParseInventory(r io.Reader, defaultKind string, allowEmpty bool) (Inventory, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, invalid("inventory", "cannot be read: %v", err)
	}
	if defaultKind != "" && !slices.Contains(OwnerKinds, defaultKind) {
		return nil, notAKind("kind", defaultKind)
	}
	inv := Inventory{}
	needKind := func() error {
		if defaultKind == "" {
			return invalid("kind", "the inventory is a plain list of ids: say which owner kind it lists (%s)", strings.Join(OwnerKinds, ", "))
		}
		return nil
	}
	add := func(kind, id string) error {
		id = strings.TrimSpace(id)
		if err := ValidateID(kind+" id", id); err != nil {
			return invalid("inventory", "%v", err)
		}
		inv[kind][id] = true
		return nil
	}
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '{':
		var obj map[string][]string
		if err := json.Unmarshal(trimmed, &obj); err != nil {
			return nil, invalid("inventory", "is not a JSON object of owner kinds to lists of ids: %v", err)
		}
		for kind, ids := range obj {
			if !slices.Contains(OwnerKinds, kind) {
				return nil, notAKind("inventory", kind)
			}
			if defaultKind != "" && kind != defaultKind {
				continue
			}
			inv[kind] = map[string]bool{}
			for _, id := range ids {
				if err := add(kind, id); err != nil {
					return nil, err
				}
			}
		}
		if defaultKind != "" && inv[defaultKind] == nil {
			return nil, invalid("inventory", "lists no owners of kind %q", defaultKind)
		}
	case len(trimmed) > 0 && trimmed[0] == '[':
		if err := needKind(); err != nil {
			return nil, err
		}
		var ids []string
		if err := json.Unmarshal(trimmed, &ids); err != nil {
			return nil, invalid("inventory", "is not a JSON array of ids: %v", err)
		}
		inv[defaultKind] = map[string]bool{}
		for _, id := range ids {
			if err := add(defaultKind, id); err != nil {
				return nil, err
			}
		}
	default:
		if err := needKind(); err != nil {
			return nil, err
		}
		inv[defaultKind] = map[string]bool{}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if err := add(defaultKind, line); err != nil {
				return nil, invalid("inventory", "line %d: %v", n, err)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, invalid("inventory", "cannot be read: %v", err)
		}
	}
	if len(inv) == 0 {
		return nil, invalid("inventory", "names no owner kind")
	}
	for kind, ids := range inv {
		if len(ids) == 0 && !allowEmpty {
			return nil, invalid("inventory", "lists no %s at all, which would report every active %s address as leaked; "+
				"if that is really so, allow an empty inventory explicitly", kind, kind)
		}
	}
	return inv, nil
}

// Leak is one allocation a leak report suspects, as it was when reported.
type Leak struct {
	AllocationID uuid.UUID  `json:"allocation_id"`
	Generation   int64      `json:"generation"`
	ClusterID    string     `json:"cluster_id"`
	PoolID       string     `json:"pool_id"`
	Category     string     `json:"category"`
	Address      string     `json:"address"`
	OwnerKind    string     `json:"owner_kind"`
	OwnerID      string     `json:"owner_id"`
	OrgID        string     `json:"org_id,omitempty"`
	EnvID        string     `json:"env_id,omitempty"`
	NodeID       string     `json:"node_id,omitempty"`
	InstanceID   string     `json:"instance_id,omitempty"`
	SetID        string     `json:"set_id,omitempty"`
	Actor        string     `json:"actor"`
	AllocatedAt  time.Time  `json:"allocated_at"`
	LastSeenAt   *time.Time `json:"last_seen_at"`
	Reason       string     `json:"reason"`
}

// LeakReport is what `ipamctl leaks` writes and `ipamctl reclaim` reads.
type LeakReport struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"`
	// GeneratedAt is database time: an allocation seen by Terraform after it
	// is not reclaimed.
	GeneratedAt time.Time `json:"generated_at"`
	ClusterID   string    `json:"cluster_id,omitempty"`
	// OwnerKinds are the kinds the inventory spoke for (inventory reports),
	// or the kinds looked at (stale reports; empty: all).
	OwnerKinds []string `json:"owner_kinds,omitempty"`
	StaleDays  int      `json:"stale_days,omitempty"`
	Leaks      []Leak   `json:"leaks"`
}

// ReadLeakReport parses and checks a leak report.
func ReadLeakReport(r io.Reader) (LeakReport, error) {
	var rep LeakReport
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return rep, invalid("report", "is not a leak report (JSON written by ipamctl leaks): %v", err)
	}
	switch {
	case rep.Version != LeakReportVersion:
		return rep, invalid("report", "has format version %d; this ipamctl reads version %d", rep.Version, LeakReportVersion)
	case rep.Kind != LeakInventory && rep.Kind != LeakStale:
		return rep, invalid("report", "has kind %q; expected %q or %q", rep.Kind, LeakInventory, LeakStale)
	case rep.Kind == LeakStale && rep.StaleDays < 1:
		return rep, invalid("report", "is a stale report without stale_days")
	case rep.StaleDays < 0 || rep.StaleDays > MaxStaleDays:
		return rep, invalid("report", "has stale_days %d; expected 1 to %d", rep.StaleDays, MaxStaleDays)
	case rep.GeneratedAt.IsZero():
		return rep, invalid("report", "has no generated_at")
	}
	for i, l := range rep.Leaks {
		if l.AllocationID == uuid.Nil || l.Generation < 1 || l.OwnerKind == "" || l.OwnerID == "" {
			return rep, invalid("report", "leak #%d lacks its allocation id, generation or owner", i+1)
		}
	}
	return rep, nil
}

// InventoryID returns the id an inventory lists for the leak's owner.
func (l Leak) InventoryID() string {
	if l.SetID != "" {
		return l.SetID
	}
	return l.OwnerID
}

func scanLeak(r pgx.CollectableRow) (Leak, error) {
	var l Leak
	err := r.Scan(&l.AllocationID, &l.Generation, &l.ClusterID, &l.PoolID, &l.Category, &l.Address, &l.OwnerKind, &l.OwnerID,
		&l.OrgID, &l.EnvID, &l.NodeID, &l.InstanceID, &l.SetID, &l.Actor, &l.AllocatedAt, &l.LastSeenAt)
	l.AllocatedAt = l.AllocatedAt.UTC()
	l.LastSeenAt = utcPtr(l.LastSeenAt)
	return l, err
}

// FindInventoryLeaks reports the active allocations (of the kinds the
// inventory speaks for, in one cluster or all) whose owner is not in it. The
// owners are compared with an anti-join against the unnested inventory.
func (o *Operator) FindInventoryLeaks(ctx context.Context, clusterID string, inv Inventory) (LeakReport, error) {
	s := o.c
	rep := LeakReport{Version: LeakReportVersion, Kind: LeakInventory, ClusterID: clusterID, OwnerKinds: inv.Kinds(), Leaks: []Leak{}}
	if err := checkFilterIDs("cluster_id", clusterID); err != nil {
		return rep, err
	}
	if len(inv) == 0 {
		return rep, invalid("inventory", "names no owner kind")
	}
	err := s.readTx(ctx, false, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, sqlNow).Scan(&rep.GeneratedAt); err != nil {
			return err
		}
		for _, kind := range rep.OwnerKinds {
			ids := make([]string, 0, len(inv[kind]))
			for id := range inv[kind] {
				ids = append(ids, id)
			}
			rows, err := tx.Query(ctx, sqlInventoryLeaks, kind, clusterID, ids)
			if err != nil {
				return err
			}
			leaks, err := pgx.CollectRows(rows, scanLeak)
			if err != nil {
				return err
			}
			for i := range leaks {
				leaks[i].Reason = fmt.Sprintf("%s %q is not in the inventory", kind, leaks[i].InventoryID())
			}
			rep.Leaks = append(rep.Leaks, leaks...)
		}
		return nil
	})
	rep.GeneratedAt = rep.GeneratedAt.UTC()
	return rep, err
}

// FindStaleLeaks reports the active allocations (of the given owner kinds, or
// all) that no Terraform refresh has seen for days days: their last-seen time,
// or their allocation time when never seen, is older. Only allocations whose
// holder refreshes what it holds are judged by age: those a Terraform state
// has read (a refresh or an import) or a configuration made (Config.Origin).
// The scheduler's, and any other caller's without an origin, are never
// stale: their holders prove liveness by an inventory (FindInventoryLeaks).
func (o *Operator) FindStaleLeaks(ctx context.Context, clusterID string, kinds []string, days int) (LeakReport, error) {
	s := o.c
	rep := LeakReport{Version: LeakReportVersion, Kind: LeakStale, ClusterID: clusterID, OwnerKinds: kinds, StaleDays: days, Leaks: []Leak{}}
	if days < 1 {
		return rep, invalid("stale_days", "must be at least 1 (Terraform records a last-seen time at most once an hour)")
	}
	if days > MaxStaleDays {
		return rep, invalid("stale_days", "%d is out of range: at most %d (100 years)", days, MaxStaleDays)
	}
	if err := checkFilterIDs("cluster_id", clusterID); err != nil {
		return rep, err
	}
	for _, k := range kinds {
		if !slices.Contains(OwnerKinds, k) {
			return rep, notAKind("kind", k)
		}
	}
	if kinds == nil {
		kinds = []string{}
	}
	err := s.readTx(ctx, false, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, sqlNow).Scan(&rep.GeneratedAt); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sqlStaleLeaks, clusterID, kinds, days)
		if err != nil {
			return err
		}
		rep.Leaks, err = pgx.CollectRows(rows, scanLeak)
		if rep.Leaks == nil {
			rep.Leaks = []Leak{}
		}
		for i := range rep.Leaks {
			rep.Leaks[i].Reason = fmt.Sprintf("not seen by Terraform for more than %d days", days)
		}
		return err
	})
	rep.GeneratedAt = rep.GeneratedAt.UTC()
	return rep, err
}

// Reclaim outcomes.
const (
	OutcomeReclaimed    = "reclaimed"
	OutcomeWouldReclaim = "would_reclaim"
	OutcomeRefused      = "refused"
)

// ReclaimResult says what reclaim did with one leak, and why.
type ReclaimResult struct {
	Leak       Leak       `json:"leak"`
	Outcome    string     `json:"outcome"`
	Reason     string     `json:"reason,omitempty"`
	ReusableAt *time.Time `json:"reusable_at,omitempty"`
}

// ReclaimOptions say how to reclaim a report.
type ReclaimOptions struct {
	// Apply releases; without it nothing is written (a dry run).
	Apply bool
	// Inventory is the current inventory. It is required to apply an
	// inventory report: each owner is checked against it again right before
	// its address is released. In a dry run without it the owner is not
	// re-checked.
	Inventory Inventory
}

// Reclaim re-validates each leak of a report and, with Apply, releases it into
// cooling (with its pool's cooldown) and writes an allocation.reclaimed event.
// Each leak is handled in its own transaction that locks the row first, then
// checks that the allocation is still active, still at the reported
// generation (not released and handed out again since), still held by the
// same owner, not seen by Terraform since the report, and that its owner is
// still absent: not in the current inventory, or still stale. Anything else
// refuses that leak, so a report can never release a live allocation.
func (o *Operator) Reclaim(ctx context.Context, rep LeakReport, opt ReclaimOptions) ([]ReclaimResult, error) {
	s := o.c
	if rep.StaleDays < 0 || rep.StaleDays > MaxStaleDays || (rep.Kind == LeakStale && rep.StaleDays < 1) {
		return nil, invalid("report", "has stale_days %d; expected 1 to %d", rep.StaleDays, MaxStaleDays)
	}
	if err := checkFilterIDs("cluster_id", rep.ClusterID); err != nil {
		return nil, err
	}
	if rep.Kind == LeakInventory && opt.Apply && opt.Inventory == nil {
		return nil, invalid("inventory", "applying a report made from an inventory needs the current inventory: "+
			"every owner is checked against it again right before its address is released")
	}
	out := make([]ReclaimResult, 0, len(rep.Leaks))
	for _, l := range rep.Leaks {
		r, err := s.reclaimOne(ctx, rep, l, opt)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (s *Client) reclaimOne(ctx context.Context, rep LeakReport, l Leak, opt ReclaimOptions) (ReclaimResult, error) {
	res := ReclaimResult{Leak: l}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		res = ReclaimResult{Leak: l}
		probe := sqlReclaimProbe
		if opt.Apply {
			probe = sqlReclaimProbeLock
			// The pool's lock first, then the row (the locking order, as a
			// release takes it).
			if _, err := tx.Exec(ctx, sqlLockPoolKeyShare, l.PoolID); err != nil {
				return err
			}
		}
		var cur current
		err := tx.QueryRow(ctx, probe, l.AllocationID, max(rep.StaleDays, 1)).Scan(
			&cur.state, &cur.gen, &cur.kind, &cur.id, &cur.invID, &cur.seen, &cur.stale, &cur.stateHeld)
		if errors.Is(err, pgx.ErrNoRows) {
			res.Outcome, res.Reason = OutcomeRefused, "the allocation no longer exists"
			return nil
		}
		if err != nil {
			return err
		}
		if reason := refusal(rep, l, opt, cur); reason != "" {
			res.Outcome, res.Reason = OutcomeRefused, reason
			return nil
		}
		if !opt.Apply {
			res.Outcome = OutcomeWouldReclaim
			if rep.Kind == LeakInventory && opt.Inventory == nil {
				res.Reason = "owner not re-checked: no current inventory given"
			}
			return nil
		}
		var a Allocation
		a, err = scanAllocation(tx.QueryRow(ctx, sqlReclaim, l.AllocationID, l.Generation))
		if errors.Is(err, ErrNotFound) {
			return errRetry // changed under the lock: cannot happen, but check again
		}
		if err != nil {
			return err
		}
		reusable := a.ReusableAt.UTC()
		res.Outcome, res.ReusableAt = OutcomeReclaimed, &reusable
		return s.insertEvent(ctx, tx, Event{Type: EventReclaimed, ClusterID: a.ClusterID, PoolID: a.PoolID,
			AllocationID: a.ID, Generation: a.Generation, Address: a.Address, Owner: a.Owner,
			Data: map[string]any{
				"reusable_at":         reusable,
				"report_kind":         rep.Kind,
				"report_generated_at": rep.GeneratedAt.UTC(),
				"reason":              l.Reason,
				"holder_actor":        a.Actor,
			}})
	})
	return res, err
}

// current is an allocation row as reclaim finds it, locked.
type current struct {
	state, kind, id string
	invID           string // the id an inventory lists for its owner
	gen             int64
	seen            *time.Time
	stale           bool
	stateHeld       bool // a Terraform state holds it (stateHeldSQL)
}

// refusal says why a leak must not be reclaimed now, or "".
func refusal(rep LeakReport, l Leak, opt ReclaimOptions, cur current) string {
	switch {
	case cur.state != StateActive:
		return fmt.Sprintf("the allocation is no longer active (it is %s)", cur.state)
	case cur.gen != l.Generation:
		return fmt.Sprintf("the allocation was handed out again since the report (generation %d, reported %d)", cur.gen, l.Generation)
	case cur.kind != l.OwnerKind || cur.id != l.OwnerID:
		return fmt.Sprintf("the allocation is now held by %s %q, not %s %q", cur.kind, cur.id, l.OwnerKind, l.OwnerID)
	case cur.seen != nil && cur.seen.After(rep.GeneratedAt):
		return "Terraform has seen the allocation since the report (last seen " + cur.seen.UTC().Format(time.RFC3339) + ")"
	}
	switch rep.Kind {
	case LeakInventory:
		if cur.stateHeld {
			// An inventory is the platform's list of its own owners: an
			// allocation a Terraform configuration manages is not its to
			// judge, listed or not.
			return "a Terraform state holds it (a configuration created it, or a refresh or an import read it), so " +
				"the inventory cannot judge it: remove its owner from that configuration, reclaim it by staleness " +
				"once that state is gone, or release it with `ipamctl release --force`"
		}
		if opt.Inventory == nil {
			return ""
		}
		if _, ok := opt.Inventory[cur.kind]; !ok {
			return fmt.Sprintf("the current inventory lists no owners of kind %s, so it cannot tell whether %q still exists", cur.kind, cur.invID)
		}
		if opt.Inventory.Has(cur.kind, cur.invID) {
			return fmt.Sprintf("its owner %s %q is in the current inventory: it is live", cur.kind, cur.invID)
		}
	case LeakStale:
		if !cur.stale {
			return fmt.Sprintf("it is not stale: seen or allocated within the last %d days, or held by a caller "+
				"that does not refresh what it holds (such as the scheduler: reclaim those by inventory)", rep.StaleDays)
		}
	}
	return ""
}
