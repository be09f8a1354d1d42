// Package operator is the operator's side of the IP address manager: the
// reads behind ipamctl and the provider's data sources (list, usage, lookup,
// leaks, check, metrics, events) and the operator's own writes (release,
// reclaim, recount, a plan-time hold's expiry). It works through an ipam.Client:
//
//	client, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url})
//	...
//	op := operator.New(client)
//	report, err := op.Check(ctx, "")
//
// The scheduler and the provider's allocations use package ipam alone.
package operator

import (
	"io"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// Client is the operator's view of an ipam.Client: it shares its pool,
// settings and actor.
type Client = engine.Operator

// New returns the operator's view of c.
func New(c *ipam.Client) *Client { return engine.OperatorOf(c) }

// Checks.
type (
	Violation   = engine.Violation
	CheckReport = engine.CheckReport
	Recount     = engine.Recount
)

const (
	InvariantUniqueAddress = engine.InvariantUniqueAddress
	InvariantInPool        = engine.InvariantInPool
	InvariantCooldown      = engine.InvariantCooldown
	InvariantIPv4PerEnv    = engine.InvariantIPv4PerEnv
	InvariantCounters      = engine.InvariantCounters
	InvariantUsageCounts   = engine.InvariantUsageCounts
	InvariantSettings      = engine.InvariantSettings
	InvariantNodeBlocks    = engine.InvariantNodeBlocks
	InvariantTombstones    = engine.InvariantTombstones
)

var (
	Invariants = engine.Invariants
)

// Events.
type (
	Event       = engine.Event
	EventFilter = engine.EventFilter
)

const (
	EventHoldExpired      = engine.EventHoldExpired
	EventHoldLossReported = engine.EventHoldLossReported
	EventHoldLost         = engine.EventHoldLost
	EventReclaimed        = engine.EventReclaimed
)

// EventTypeAliases maps each event type older versions wrote under another
// name to the name written now.
func EventTypeAliases() map[string]string { return engine.EventTypeAliases() }

// EventTypes lists every event type the IPAM writes, sorted.
func EventTypes() []string { return engine.EventTypes() }

// Leaks and reclaim.
type (
	Inventory      = engine.Inventory
	Leak           = engine.Leak
	LeakReport     = engine.LeakReport
	ReclaimResult  = engine.ReclaimResult
	ReclaimOptions = engine.ReclaimOptions
)

const (
	LeakInventory       = engine.LeakInventory
	LeakStale           = engine.LeakStale
	LeakReportVersion   = engine.LeakReportVersion
	OutcomeReclaimed    = engine.OutcomeReclaimed
	OutcomeWouldReclaim = engine.OutcomeWouldReclaim
	OutcomeRefused      = engine.OutcomeRefused
)

// ParseInventory reads the owners that still exist.
func ParseInventory(r io.Reader, defaultKind string, allowEmpty bool) (Inventory, error) {
	return engine.ParseInventory(r, defaultKind, allowEmpty)
}

// ReadLeakReport parses and checks a leak report.
func ReadLeakReport(r io.Reader) (LeakReport, error) { return engine.ReadLeakReport(r) }

// Listing.
type (
	AllocationView = engine.AllocationView
	ListFilter     = engine.ListFilter
	SetRef         = engine.SetRef
)

const (
	ManagedCluster    = engine.ManagedCluster
	ManagedPool       = engine.ManagedPool
	ManagedSet        = engine.ManagedSet
	ManagedNodeBlocks = engine.ManagedNodeBlocks
)

var (
	ListStates = engine.ListStates
	Categories = engine.Categories
)

// Lookup.
type (
	AddressInfo = engine.AddressInfo
)

const (
	StatusExcluded = engine.StatusExcluded
)

// ClusterIDs lists the clusters that hold addr in their pools, for messages.
func ClusterIDs(infos []AddressInfo) string { return engine.ClusterIDs(infos) }

// Metrics.
type (
	FailureTotal    = engine.FailureTotal
	MetricsSnapshot = engine.MetricsSnapshot
)

var (
	FailureReasons = engine.FailureReasons
)

// Release, and a plan-time hold's expiry.
type (
	ReleaseRequest   = engine.ReleaseRequest
	ReleaseResult    = engine.ReleaseResult
	HoldRequest      = engine.HoldRequest
	ExpireHoldResult = engine.ExpireHoldResult
)

// Usage.
type (
	CooldownQueue = engine.CooldownQueue
	UsageCounts   = engine.UsageCounts
	PoolUsage     = engine.PoolUsage
	CategoryUsage = engine.CategoryUsage
	ClusterUsage  = engine.ClusterUsage
)

const (
	AlertThreshold = engine.AlertThreshold
	FailureWindow  = engine.FailureWindow
)

var (
	UsageCategories = engine.UsageCategories
)

// Statements, for EXPLAIN.
type (
	Statement = engine.Statement
)

const (
	TxSettings   = engine.TxSettings
	VersionTable = engine.VersionTable
)

// HotStatements are the statements an allocation, a hold, a release or a
// refresh runs, by name.
func HotStatements() []Statement { return engine.HotStatements() }

// UsageStatement is the per-pool usage statement (ipam_pool_usage, ipamctl
// usage, the metrics) and the planner setting its transaction runs first.
func UsageStatement() (setting, sql string) { return engine.UsageStatement() }
