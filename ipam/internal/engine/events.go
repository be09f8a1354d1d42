package engine

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Event is one entry of the append-only audit trail.
type Event struct {
	ID           uuid.UUID
	At           time.Time
	Type         string
	ClusterID    string
	PoolID       string
	AllocationID uuid.UUID
	Generation   int64
	Address      netip.Addr
	Owner        Owner
	Actor        string
	// Origin is the configuration whose transaction wrote the event (the
	// client's Config.Origin; empty for none, and for events written
	// before schema migration 26).
	Origin string
	Data   map[string]any
}

// Event types are spelled FAMILY.EVENT, with one dot: the family is cluster,
// pool, allocation, or the owner's (node, instance, env, set), so that a
// filter FAMILY.* finds every event of it. The environment IPv4 add-on's
// events are env.ipv4_addon_EVENT.

// Event types written by the allocator, per owner kind: one entry for each
// of OwnerKinds (TestEveryOwnerKindHasItsEventTypes).
var eventTypes = map[string]struct{ allocated, released string }{
	OwnerNode:     {"node.enrolled", "node.released"},
	OwnerInstance: {"instance.allocated", "instance.released"},
	OwnerEnvIPv4:  {"env.ipv4_addon_enabled", "env.ipv4_addon_disabled"},
	OwnerSet:      {"set.allocated", "set.released"},
}

// ownerEventPrefix is what an owner kind's event types start with.
func ownerEventPrefix(kind string) string {
	if kind == OwnerEnvIPv4 {
		return "env.ipv4_addon_"
	}
	return kind + "."
}

// failureEventType is the type of the event of a failed allocation:
// "<kind>.allocation_failed" (env.ipv4_addon_allocation_failed for the
// environment IPv4 add-on).
func failureEventType(kind string) string { return ownerEventPrefix(kind) + "allocation_failed" }

// relabelEventType is the type of the event of an owner's labels changing:
// "<kind>.relabeled" (env.ipv4_addon_relabeled).
func relabelEventType(kind string) string { return ownerEventPrefix(kind) + "relabeled" }

// eventTypeAliases are the names older versions wrote, before every type was
// FAMILY.EVENT, each with the name written now. The audit trail is never
// rewritten, so rows of both names exist: a filter naming either (or a
// prefix matching either) matches both.
var eventTypeAliases = map[string]string{
	"env.ipv4_addon.allocation_failed": "env.ipv4_addon_allocation_failed",
	"env_ipv4.relabeled":               "env.ipv4_addon_relabeled",
}

// EventTypeAliases maps each event type older versions wrote under another
// name to the name written now. EventFilter.Types (and `ipamctl events
// --type`) accept both, and match the events of both names.
func EventTypeAliases() map[string]string { return maps.Clone(eventTypeAliases) }

// eventTypeNames are the names of the event type t: t, and the other name
// of the same type (its alias, or the name its alias stands for).
func eventTypeNames(t string) []string {
	if now, ok := eventTypeAliases[t]; ok {
		return []string{now, t}
	}
	out := []string{t}
	for old, now := range eventTypeAliases {
		if now == t {
			out = append(out, old)
		}
	}
	return out
}

// otherEventTypes are the event types that are not an owner kind's (those
// come from eventType, failureEventType and relabelEventType).
var otherEventTypes = []string{
	"cluster.created", "cluster.updated", "cluster.deleted",
	"pool.created", "pool.updated", "pool.deleted",
	"allocation.reserved", "allocation.adopted", "allocation.hold_dropped", "allocation.inherited",
	EventHoldExpired, EventHoldLost, EventHoldLossReported, EventReclaimed,
	"node.blocks_scaled", "node.blocks_released",
}

// EventTypes lists every event type the IPAM writes, sorted: the names that
// EventFilter.Types (and `ipamctl events --type`) match and the
// documentation may use. TestEventTypesAreListed keeps it complete.
func EventTypes() []string {
	out := slices.Clone(otherEventTypes)
	for _, kind := range []string{OwnerNode, OwnerInstance, OwnerEnvIPv4, OwnerSet} {
		out = append(out, eventTypes[kind].allocated, eventTypes[kind].released, failureEventType(kind), relabelEventType(kind))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func newID() uuid.UUID {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.New()
	}
	return id
}

// EventHoldLossReported records that Reserve reported a lost hold
// (HoldLostError) to a plan run (data.run).
const EventHoldLossReported = "allocation.hold_loss_reported"

// EventHoldExpired records that an operator expired a plan-time hold
// (Operator.ExpireHold) before its reservation_ttl ended.
const EventHoldExpired = "allocation.hold_expired"

// EventHoldLost records that an owner's expired plan-time hold went to another owner.
const EventHoldLost = "allocation.hold_lost"

// EventReclaimed is written when ipamctl reclaim releases a leaked allocation.
const EventReclaimed = "allocation.reclaimed"
