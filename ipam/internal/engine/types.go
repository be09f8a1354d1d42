package engine

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Owner kinds: what holds an address.
const (
	OwnerNode     = "node"
	OwnerInstance = "instance"
	OwnerEnvIPv4  = "env_ipv4"
	OwnerSet      = "set"
)

// OwnerKinds are the kinds of owner an address can have. An inventory of
// kind set lists address set ids: a member is judged by the set it belongs to.
var OwnerKinds = []string{OwnerNode, OwnerInstance, OwnerEnvIPv4, OwnerSet}

// Allocation states.
const (
	StateFree     = "free"
	StateReserved = "reserved"
	StateActive   = "active"
	StateCooling  = "cooling"
)

// Owner identifies who holds an address: Kind and ID are the key (one active
// address per kind and id in a cluster); the rest are labels for lookups.
type Owner struct {
	Kind       string
	ID         string
	OrgID      string
	EnvID      string
	NodeID     string
	InstanceID string
	// SetID names the address set a member belongs to (kind "set", whose ID
	// is "<SetID>#<key>").
	SetID string
}

// sameTenant: a row of owner o (its labels as the row holds them) goes to
// asker p, the same owner, only for the same tenant: each of org and env the
// row names is the asker's (a label the row lacks names no tenant). The
// write re-judges it (guardReusableOrOwn), and the row trigger for
// tombstones.
func (o Owner) sameTenant(p Owner) bool {
	return (o.OrgID == "" || o.OrgID == p.OrgID) && (o.EnvID == "" || o.EnvID == p.EnvID)
}

// sameKey: o and p are one owner (kind and id), whatever their labels.
func (o Owner) sameKey(p Owner) bool { return o.Kind == p.Kind && o.ID == p.ID }

// Allocation is one address and its current (or last) holder.
type Allocation struct {
	ID          uuid.UUID
	ClusterID   string
	PoolID      string
	Address     netip.Addr
	Block       netip.Prefix // the pool block the address lies in
	Ordinal     int64
	State       string
	Generation  int64
	Owner       Owner
	Actor       string
	AllocatedAt time.Time
	ReleasedAt  time.Time
	// ReusableAt is when a cooling address may go to another owner, or when a
	// plan-time hold (state reserved) expires.
	ReusableAt time.Time
	// Reusable is true once ReusableAt has passed, by database time.
	Reusable bool
	// HoldExpired is true when a plan-time hold's own time is over (its
	// address may still be inside a cooldown the hold kept); false for every
	// row that is not a hold (State other than reserved).
	HoldExpired bool
	// Confirmed is true once a refresh or an import has read the allocation,
	// or the adoption window has passed since it was made: from then on only
	// its own configuration manages it, and a create elsewhere is refused.
	Confirmed bool
	// Origin is the configuration that made the allocation or took the
	// hold, for its current generation (Config.Origin; empty: none
	// recorded). Only that configuration manages it.
	Origin string
}

// AdoptionWindow is how long after it was made an allocation that no refresh
// has confirmed may be adopted by a create of the same actor: the time in
// which a killed or failed apply is retried.
const AdoptionWindow = time.Hour

const adoptionWindowSQL = "1 hour"

// CIDR is the address with its pool block's prefix length ("/128" for a
// single-address pool block is still the block's length).
func (a Allocation) CIDR() netip.Prefix {
	if a.Block.IsValid() {
		return netip.PrefixFrom(a.Address, a.Block.Bits())
	}
	return netip.PrefixFrom(a.Address, a.Address.BitLen())
}

// Categories of the system pools every cluster has.
const (
	CategoryNode     = "node"
	CategoryInstance = "instance"
)

// PoolRef names a pool: one of a cluster's own pools (node, instance), a
// node's instance blocks, or an operator pool. Its ID is the pool's key; no
// one builds or splits that key by hand.
type PoolRef struct {
	ClusterID string
	// Name is the pool's name in its cluster: CategoryNode,
	// CategoryInstance, "blocks/<node_id>" or an operator pool's name. Empty
	// in a request: the pool the owner's kind takes its address from (see
	// AllocateRequest).
	Name string
}

// ClusterPools is the cluster with no pool named: a request resolves the pool
// from its owner's kind.
func ClusterPools(clusterID string) PoolRef { return PoolRef{ClusterID: clusterID} }

// NodePool is the cluster's node pool (its node prefix).
func NodePool(clusterID string) PoolRef { return PoolRef{clusterID, CategoryNode} }

// InstancePool is the cluster's instance pool (its instance prefix).
func InstancePool(clusterID string) PoolRef { return PoolRef{clusterID, CategoryInstance} }

// NodeBlocksPool is the pool of a node's instance blocks.
func NodeBlocksPool(clusterID, nodeID string) PoolRef {
	return PoolRef{clusterID, blocksPrefix + nodeID}
}

// OperatorPool is an operator pool (ipam_pool) by name.
func OperatorPool(clusterID, name string) PoolRef { return PoolRef{clusterID, name} }

// BlocksNode is the node whose instance blocks r names (NodeBlocksPool),
// and whether r names a node's blocks.
func (r PoolRef) BlocksNode() (string, bool) { return strings.CutPrefix(r.Name, blocksPrefix) }

const blocksPrefix = "blocks/"

// NoCooldown is the Cooldown of an operator pool whose released addresses
// may be handed out again at once: set it to ask for that (zero means
// DefaultPoolCooldown), and GetPool reports such a pool with it.
const NoCooldown time.Duration = -1

// parkedPrefix starts the name of a released block's parked pool
// (parkedPoolID): "parked/<block>".
const parkedPrefix = "parked/"

// parkedPoolID names the pool that keeps a released block's cooling rows.
func parkedPoolID(clusterID string, b netip.Prefix) string {
	return PoolRef{clusterID, parkedPrefix + b.String()}.ID()
}

// ID is the pool's key ("<cluster_id>/<name>"); "" for a ClusterPools ref.
func (r PoolRef) ID() string {
	if r.Name == "" {
		return ""
	}
	return r.ClusterID + "/" + r.Name
}

func (r PoolRef) String() string {
	if r.Name == "" {
		return r.ClusterID
	}
	return r.ID()
}

// AllocateRequest asks for an address for an owner. Allocate, Reserve and
// their fast paths all take it, for every kind of owner.
type AllocateRequest struct {
	// Pool is where the address comes from. With no Name (ClusterPools) the
	// owner's kind decides: a node draws from the cluster's node pool; an
	// instance from its node's blocks when the node has some (growing them
	// when full), else from the cluster's instance pool. An environment's
	// IPv4 names its operator pool.
	Pool  PoolRef
	Owner Owner
	// Address, when valid, claims exactly this address.
	Address netip.Addr
	// lossLooked: a plan's first look read the owner's lost hold, and
	// found none to tell. The plan's transaction reads it again when it
	// finds the owner holding nothing (reserveTx), since another call may
	// have taken the owner's expired hold in between.
	lossLooked bool
}

// AllocateResult is the allocation and how it came about.
type AllocateResult struct {
	Allocation
	// Adopted is true when the owner already held this address (allocated by
	// the same actor): a retried or crashed apply adopting its own work.
	Adopted bool
	// Network is the cluster's WorkloadSpec network block, read with the
	// allocation (set by Allocate for an instance, and by the fast path).
	Network Network
}

// Network is the WorkloadSpec network block an instance gets from its
// cluster.
type Network struct {
	GatewayIPv6 netip.Addr
	MTU         int
	DNSServers  []netip.Addr
}

// FormatDuration renders d in a form ParseDuration reads back: whole days
// longer than a day as "30d", everything else in Go syntax without trailing
// zero units ("24h", "36h", "1h30m").
func FormatDuration(d time.Duration) string {
	day := 24 * time.Hour
	if d > day && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	r := d.String()
	if strings.HasSuffix(r, "m0s") {
		r = strings.TrimSuffix(r, "0s")
	}
	if strings.HasSuffix(r, "h0m") {
		r = strings.TrimSuffix(r, "0m")
	}
	return r
}

func (r PoolRef) valid() bool { return r.ClusterID != "" && r.Name != "" }

// Hold is what Reserve returns: the owner's hold, or the active allocation
// the owner already has, and Lost.
type Hold struct {
	Allocation
	// Lost is the owner's latest plan-time hold that expired and went to
	// another owner within LostHoldWindow, if any: a plan saved with that
	// address cannot be applied any more. It may be the address this hold
	// has again. It only explains a plan, so the look-up is best effort (a
	// failed one leaves it nil), and a Reserve inside a caller's transaction
	// (InTx) does not make it.
	Lost *LostHold
}

// LostHold is an owner's plan-time hold that another owner took.
type LostHold struct {
	Address netip.Addr
	TakenBy string    // the owner that took it, as "<kind> <id>"
	At      time.Time // when it was taken (database time)
	// Block is the pool block the address lies in (as Allocation.Block),
	// when HoldLostError reports it and its pool still has the address.
	Block netip.Prefix
	// PoolID is the pool the hold was in.
	PoolID string
	// ownerTaken: another manager of the same owner dropped the expired hold
	// and took the owner (TakenBy names that manager); holderActor and
	// holderOrigin are the hold's manager.
	ownerTaken                bool
	holderActor, holderOrigin string
	// reported: a Reserve has said so (HoldLostError), to the plan run
	// reportedRun.
	reported    bool
	reportedRun string
}

// LostHoldWindow is how far back Reserve looks for a lost hold.
const LostHoldWindow = 24 * time.Hour

// lostHoldWindowSQL is LostHoldWindow as an SQL interval.
var lostHoldWindowSQL = strconv.FormatInt(int64(LostHoldWindow/time.Second), 10) + " seconds"
