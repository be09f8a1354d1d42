package ipam

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/internal/ipamcore"
)

// Client is the IPAM over one PostgreSQL pool. It is safe for concurrent use.
type Client struct {
	st    *ipamcore.Store
	owned bool
}

// Options configure a client over a pool the caller made.
type Options struct {
	// Actor is recorded with every allocation and event (default
	// "terraform"). Give each system its own: an allocation is adopted only
	// by the actor that made it.
	Actor string
	// LockTimeout bounds each wait for a lock another session holds in the
	// client's own transactions (default 30s; negative: no bound): past it a
	// call fails with ErrBusy. In a caller's transaction the caller's own
	// settings apply.
	LockTimeout time.Duration
	// StatementTimeout bounds each statement of the client's own
	// transactions (default 120s; negative: no bound): past it a call fails
	// with ErrTimeout.
	StatementTimeout time.Duration
	// FailoverTimeout bounds how long a call of the client's own rides out
	// a database with no usable server (a switchover or failover:
	// connections refused or lost, a read-only server, terminated sessions)
	// before it fails with ErrUnavailable (default 30s; negative: fail at
	// once). In a caller's transaction a lost connection ends the
	// transaction: the call fails at once and the caller retries the whole
	// transaction.
	FailoverTimeout time.Duration
}

// Config says how to reach the database for Open.
type Config struct {
	// DatabaseURL is a PostgreSQL URL or keyword/value string; empty uses the
	// standard PG* environment variables.
	DatabaseURL string
	// Actor: see Options.
	Actor string
	// MaxConnections caps the client's pool (default 4).
	MaxConnections int32
	// ConnectTimeout bounds each connection attempt (default 10s).
	ConnectTimeout time.Duration
	// LockTimeout, StatementTimeout and FailoverTimeout: see Options.
	LockTimeout, StatementTimeout, FailoverTimeout time.Duration
}

// New makes a client over the caller's pool; Close does not close it.
func New(pool *pgxpool.Pool, opts Options) (*Client, error) {
	if pool == nil {
		return nil, &Error{code: ipamcore.CodeInvalid, err: &ipamcore.InvalidError{Field: "pool", Msg: "a pgx pool is required"}}
	}
	return &Client{st: ipamcore.NewStore(pool, ipamcore.Config{Actor: opts.Actor,
		LockTimeout: opts.LockTimeout, StatementTimeout: opts.StatementTimeout, FailoverTimeout: opts.FailoverTimeout})}, nil
}

// Open makes a client with a pool of its own. It does not connect: Migrate
// or the first call does.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	st, err := ipamcore.Open(ctx, ipamcore.Config{DatabaseURL: cfg.DatabaseURL, Actor: cfg.Actor,
		MaxConnections: cfg.MaxConnections, ConnectTimeout: cfg.ConnectTimeout,
		LockTimeout: cfg.LockTimeout, StatementTimeout: cfg.StatementTimeout, FailoverTimeout: cfg.FailoverTimeout})
	if err != nil {
		return nil, wrap(err)
	}
	return &Client{st: st, owned: true}, nil
}

// Migrate brings the database schema up to this version (serialized across
// processes); a newer schema than this version knows is refused.
func (c *Client) Migrate(ctx context.Context) error {
	_, err := c.st.Migrate(ctx)
	return wrap(err)
}

// Close releases the client's own pool (Open); a pool given to New stays open.
func (c *Client) Close() {
	if c.owned {
		c.st.Close()
	}
}

// Actor is the actor the client records.
func (c *Client) Actor() string { return c.st.Actor() }
