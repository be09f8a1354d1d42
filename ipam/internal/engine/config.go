package engine

import (
	"context"
	"time"
)

// DefaultActor is recorded with allocations and events when none is given.
const DefaultActor = "terraform"

// Config configures a client: how Open reaches the database (the first
// three fields), and what every client records and how long it waits (the
// rest), for Open and New alike.
type Config struct {
	// DatabaseURL is a PostgreSQL URL or keyword/value string. When empty, the
	// standard PG* environment variables (PGHOST, PGUSER, ...) are used.
	DatabaseURL string
	// MaxConnections caps the pool (default 4).
	MaxConnections int32
	// ConnectTimeout bounds each connection attempt (default 10s).
	ConnectTimeout time.Duration
	// Actor is recorded with every allocation and event (default "terraform").
	Actor string
	// LockTimeout bounds each wait for a lock another session holds (default
	// DefaultLockTimeout; negative: no bound). Past it the call fails with
	// ipam_busy, naming what was locked, and writes nothing.
	LockTimeout time.Duration
	// StatementTimeout bounds each statement (default DefaultStatementTimeout;
	// negative: no bound). Past it the call fails with ipam_timeout.
	StatementTimeout time.Duration
	// FailoverTimeout bounds how long a call rides out a database with no
	// usable server (a switchover, a failover, a restart: connections
	// refused or lost, a read-only server, a session terminated) before it
	// fails with ipam_unavailable (default DefaultFailoverTimeout; negative:
	// fail at once). With the default, a call that finds nothing there
	// before any server has answered the client gives up after
	// FirstContactTimeout (a wrong host or port); an explicit bound is
	// waited in full then too.
	FailoverTimeout time.Duration
	// PlanRun names the run of the tool that plans with this client (for
	// the provider, the Terraform or OpenTofu command that started it),
	// when it can be known: a lost plan-time hold reported to a run is
	// reported again, without a new hold, to every plan of that same run
	// (see Reserve). Empty: unknown.
	PlanRun string
	// OnWait, when set, is told every few seconds (WaitReportInterval)
	// while a call waits for a usable server (see FailoverTimeout), with
	// the call's context: what it waits for and how long it has waited.
	OnWait func(context.Context, Wait)
	// Origin names the configuration this client allocates for (for the
	// provider, its working directory), recorded with each allocation that
	// Allocate makes. A create that finds its owner's unconfirmed allocation
	// adopts it only from the same origin (see Allocate). Empty: none is
	// recorded and none is compared.
	Origin string
}

// The default bounds on waits: seconds, never forever.
const (
	DefaultLockTimeout      = 30 * time.Second
	DefaultStatementTimeout = 120 * time.Second
	DefaultConnectTimeout   = 10 * time.Second
)

// DefaultMaxConnections is the pool size of Open when Config.MaxConnections is 0.
const DefaultMaxConnections = 4

// DefaultFailoverTimeout is how long a call rides out a database without a
// usable primary (a switchover, a failover, a restart) before it fails with
// ipam_unavailable.
const DefaultFailoverTimeout = 30 * time.Second

// WaitReportInterval is how often a call that waits for a usable database
// server says so (Config.OnWait).
const WaitReportInterval = 5 * time.Second
