package ipam

// The public API. The allocator itself lives in ipam/internal/engine; this
// file names what callers may use. Types are aliases, so a value from here is
// the engine's own (no conversion, errors.Is and errors.As match), and the
// engine's doc comments document them. TestFacadeNamesEveryExport keeps the
// list complete: whatever the engine exports is named here or in
// ipam/operator.

import (
	"context"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// The client and its settings.
type (
	Client = engine.Client
	Config = engine.Config
)

const (
	DefaultActor            = engine.DefaultActor
	DefaultLockTimeout      = engine.DefaultLockTimeout
	DefaultStatementTimeout = engine.DefaultStatementTimeout
	DefaultConnectTimeout   = engine.DefaultConnectTimeout
	DefaultMaxConnections   = engine.DefaultMaxConnections
	DefaultFailoverTimeout  = engine.DefaultFailoverTimeout
	WaitReportInterval      = engine.WaitReportInterval
)

// New makes a client over the caller's pool; Close does not close it.
func New(pool *pgxpool.Pool, cfg Config) (*Client, error) { return engine.New(pool, cfg) }

// Open makes a client with a pool of its own.
func Open(ctx context.Context, cfg Config) (*Client, error) { return engine.Open(ctx, cfg) }

// WritesOptional marks ctx for calls whose writes the caller can do without
// (a plan-time hold, a refresh's record, a mark): on a read-only server (a
// standby, or a primary being demoted) such a write fails at once with
// ErrReadOnly instead of being waited out as a failover. Reads are not
// refused by a read-only server, and every other write still rides out the
// failover (Config.FailoverTimeout).
func WritesOptional(ctx context.Context) context.Context { return engine.WritesOptional(ctx) }

// Owners, allocations, requests and results.
type (
	Owner           = engine.Owner
	Allocation      = engine.Allocation
	PoolRef         = engine.PoolRef
	AllocateRequest = engine.AllocateRequest
	AllocateResult  = engine.AllocateResult
	Network         = engine.Network
	Hold            = engine.Hold
	LostHold        = engine.LostHold
)

const (
	OwnerNode        = engine.OwnerNode
	OwnerInstance    = engine.OwnerInstance
	OwnerEnvIPv4     = engine.OwnerEnvIPv4
	OwnerSet         = engine.OwnerSet
	StateFree        = engine.StateFree
	StateReserved    = engine.StateReserved
	StateActive      = engine.StateActive
	StateCooling     = engine.StateCooling
	AdoptionWindow   = engine.AdoptionWindow
	CategoryNode     = engine.CategoryNode
	CategoryInstance = engine.CategoryInstance
	LostHoldWindow   = engine.LostHoldWindow
)

var (
	OwnerKinds = engine.OwnerKinds
)

// ClusterPools is the cluster with no pool named.
func ClusterPools(clusterID string) PoolRef { return engine.ClusterPools(clusterID) }

// NodePool is the cluster's node pool (its node prefix).
func NodePool(clusterID string) PoolRef { return engine.NodePool(clusterID) }

// InstancePool is the cluster's instance pool (its instance prefix).
func InstancePool(clusterID string) PoolRef { return engine.InstancePool(clusterID) }

// NodeBlocksPool is the pool of a node's instance blocks.
func NodeBlocksPool(clusterID, nodeID string) PoolRef {
	return engine.NodeBlocksPool(clusterID, nodeID)
}

// OperatorPool is an operator pool (ipam_pool) by name.
func OperatorPool(clusterID, name string) PoolRef { return engine.OperatorPool(clusterID, name) }

// FormatDuration renders d in a form ParseDuration reads back.
func FormatDuration(d time.Duration) string { return engine.FormatDuration(d) }

// The scheduler's calls.
type (
	InstanceRequest = engine.InstanceRequest
	InstanceAddress = engine.InstanceAddress
	NodeRequest     = engine.NodeRequest
	Address         = engine.Address
	EnvIPv4Request  = engine.EnvIPv4Request
)

// Address sets.
type (
	SetEntry   = engine.SetEntry
	SetMember  = engine.SetMember
	SetRequest = engine.SetRequest
	SetChange  = engine.SetChange
)

// SetMemberOwner is the owner of one member of a set.
func SetMemberOwner(labels Owner, setID, key string) Owner {
	return engine.SetMemberOwner(labels, setID, key)
}

// Node address blocks.
type (
	BlockScaling = engine.BlockScaling
	NodeBlocks   = engine.NodeBlocks
)

const (
	DefaultBlockPrefixLength = engine.DefaultBlockPrefixLength
	DefaultMinFreeFraction   = engine.DefaultMinFreeFraction
	DefaultMaxFreeFraction   = engine.DefaultMaxFreeFraction
	DefaultMaxBlocks         = engine.DefaultMaxBlocks
	MaxNodeBlockAddresses    = engine.MaxNodeBlockAddresses
	OwnerNodeBlocks          = engine.OwnerNodeBlocks
)

// Clusters.
type (
	Cluster         = engine.Cluster
	ClusterHoldings = engine.ClusterHoldings
)

const (
	DefaultNodeCooldown     = engine.DefaultNodeCooldown
	DefaultInstanceCooldown = engine.DefaultInstanceCooldown
	MinInstanceCooldown     = engine.MinInstanceCooldown
	DefaultMTU              = engine.DefaultMTU
	DefaultGatewayIPv6      = engine.DefaultGatewayIPv6
	MinClusterMTU           = engine.MinClusterMTU
	MinPoolMTU              = engine.MinPoolMTU
	MaxMTU                  = engine.MaxMTU
	MaxClusterPrefixLen     = engine.MaxClusterPrefixLen
)

// ValidateClusterPrefix checks a cluster prefix.
func ValidateClusterPrefix(p netip.Prefix) error { return engine.ValidateClusterPrefix(p) }

// ValidateSubPrefixes checks the node and instance sub-prefixes against the
// cluster prefix.
func ValidateSubPrefixes(cluster, node, instance netip.Prefix) error {
	return engine.ValidateSubPrefixes(cluster, node, instance)
}

// Pools.
type (
	Pool = engine.Pool
)

const (
	DefaultStripes      = engine.DefaultStripes
	MaxTablePoolSize    = engine.MaxTablePoolSize
	CategoryIPv4        = engine.CategoryIPv4
	CategoryIPv6        = engine.CategoryIPv6
	DefaultPoolCooldown = engine.DefaultPoolCooldown
	NoCooldown          = engine.NoCooldown
)

// PreparePool validates an operator pool on its own (no database).
func PreparePool(p *Pool) error { return engine.PreparePool(p) }

// Errors: every failure has a code, a sentinel for errors.Is and a type for errors.As.
type (
	ExhaustedError      = engine.ExhaustedError
	UnavailableError    = engine.UnavailableError
	OwnerConflictError  = engine.OwnerConflictError
	AddressInUseError   = engine.AddressInUseError
	AddressCoolingError = engine.AddressCoolingError
	InvalidError        = engine.InvalidError
	ConflictError       = engine.ConflictError
	SchemaError         = engine.SchemaError
	BusyError           = engine.BusyError
	TimeoutError        = engine.TimeoutError
	ReadOnlyError       = engine.ReadOnlyError
	DeniedError         = engine.DeniedError
	HoldLostError       = engine.HoldLostError
	Wait                = engine.Wait
	RefusedError        = engine.RefusedError
	ConfirmedError      = engine.ConfirmedError
)

const (
	CodeExhausted       = engine.CodeExhausted
	CodeUnavailable     = engine.CodeUnavailable
	CodeOwnerConflict   = engine.CodeOwnerConflict
	CodeAddressInUse    = engine.CodeAddressInUse
	CodeAddressCooling  = engine.CodeAddressCooling
	CodeInvalid         = engine.CodeInvalid
	CodeNotFound        = engine.CodeNotFound
	CodeConflict        = engine.CodeConflict
	CodeSchema          = engine.CodeSchema
	CodeReadOnly        = engine.CodeReadOnly
	CodeDenied          = engine.CodeDenied
	CodeBusy            = engine.CodeBusy
	CodeTimeout         = engine.CodeTimeout
	CodeRefused         = engine.CodeRefused
	CodeHoldLost        = engine.CodeHoldLost
	FirstContactTimeout = engine.FirstContactTimeout
)

var (
	ErrPoolNotFound  = engine.ErrPoolNotFound
	ErrExhausted     = engine.ErrExhausted
	ErrUnavailable   = engine.ErrUnavailable
	ErrRefused       = engine.ErrRefused
	ErrOwnerConflict = engine.ErrOwnerConflict
	ErrAddressTaken  = engine.ErrAddressTaken
	ErrInvalid       = engine.ErrInvalid
	ErrNotFound      = engine.ErrNotFound
	ErrConflict      = engine.ErrConflict
	ErrReadOnly      = engine.ErrReadOnly
	ErrDenied        = engine.ErrDenied
	ErrBusy          = engine.ErrBusy
	ErrTimeout       = engine.ErrTimeout
	ErrSchema        = engine.ErrSchema
	ErrHoldLost      = engine.ErrHoldLost
	ErrClosed        = engine.ErrClosed
)

// Code returns the error code of err, or "" when it has none.
func Code(err error) string { return engine.Code(err) }

// WriteRefused reports whether err is the database refusing a write the
// caller can do without (a plan-time hold, a refresh's record): a read-only
// server or session (ErrReadOnly), or a role without the grant (ErrDenied).
func WriteRefused(err error) bool { return engine.WriteRefused(err) }

// Input checks, shared with the provider and ipamctl.
const (
	MaxIDLength        = engine.MaxIDLength
	MaxOriginLength    = engine.MaxOriginLength
	MaxStaleDays       = engine.MaxStaleDays
	MaxEventTypeLength = engine.MaxEventTypeLength
	MaxProblems        = engine.MaxProblems
)

// ValidateID checks an identifier.
func ValidateID(what, s string) error { return engine.ValidateID(what, s) }

// ValidateOrigin checks a configuration's origin (Config.Origin).
func ValidateOrigin(s string) error { return engine.ValidateOrigin(s) }

// ValidateEventType checks an event type filter.
func ValidateEventType(t string) error { return engine.ValidateEventType(t) }

// ParsePoolRef reads a pool's key back; field names the input for the error.
func ParsePoolRef(field, id string) (PoolRef, error) { return engine.ParsePoolRef(field, id) }

// ValidateOwner checks the owner's key and labels.
func ValidateOwner(o Owner) error { return engine.ValidateOwner(o) }

// ValidateSetKey checks a member key.
func ValidateSetKey(k string) error { return engine.ValidateSetKey(k) }

// ParseDuration parses Go duration syntax extended with days.
func ParseDuration(s string) (time.Duration, error) { return engine.ParseDuration(s) }

// Thousands writes n with a comma between groups of three digits.
func Thousands(n int) string { return engine.Thousands(n) }

// Address math.
type (
	Layout = engine.Layout
	Run    = engine.Run
)

const (
	MaxPoolOrdinals = engine.MaxPoolOrdinals
)

// ParsePrefix parses a CIDR strictly.
func ParsePrefix(s string) (netip.Prefix, error) { return engine.ParsePrefix(s) }

// ParseAddr parses a single address strictly.
func ParseAddr(s string) (netip.Addr, error) { return engine.ParseAddr(s) }

// PrefixContains reports whether inner lies entirely inside outer.
func PrefixContains(outer, inner netip.Prefix) bool { return engine.PrefixContains(outer, inner) }

// SubPrefix returns the index-th sub-prefix of length bits inside p.
func SubPrefix(p netip.Prefix, bitLen int, index uint64) (netip.Prefix, error) {
	return engine.SubPrefix(p, bitLen, index)
}

// DefaultSubPrefixes carves the node and instance sub-prefixes out of a
// cluster prefix.
func DefaultSubPrefixes(cluster netip.Prefix) (node, instance netip.Prefix, err error) {
	return engine.DefaultSubPrefixes(cluster)
}

// NewLayout builds the layout of a pool.
func NewLayout(cidrs []netip.Prefix, exclude []netip.Prefix, gateway netip.Addr) (*Layout, error) {
	return engine.NewLayout(cidrs, exclude, gateway)
}

// CollapsePrefixes returns the fewest prefixes that cover exactly the
// addresses of ps, sorted (IPv4 first, then by address).
func CollapsePrefixes(ps []netip.Prefix) []netip.Prefix { return engine.CollapsePrefixes(ps) }

// Schema.
type (
	SchemaStatus = engine.SchemaStatus
)

// LatestSchemaVersion is the number of migrations embedded in this binary.
func LatestSchemaVersion() (int32, error) { return engine.LatestSchemaVersion() }
