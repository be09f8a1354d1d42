package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Cluster defaults, from the platform spec.
const (
	DefaultNodeCooldown     = 30 * 24 * time.Hour
	DefaultInstanceCooldown = 24 * time.Hour
	MinInstanceCooldown     = time.Hour
	DefaultMTU              = 1420
	DefaultGatewayIPv6      = "fe80::1"
	// MinClusterMTU and MaxMTU bound a cluster's MTU (IPv6's minimum link
	// MTU, and the largest an IP packet can be); MinPoolMTU is IPv4's
	// minimum, for an operator pool's.
	MinClusterMTU = 1280
	MinPoolMTU    = 68
	MaxMTU        = 65535
	// MaxClusterPrefixLen: a cluster prefix is at least a /64.
	MaxClusterPrefixLen = 64
)

// Cluster is one cluster: its IPv6 prefix carved into node and instance
// sub-prefixes, the cooldowns, and the WorkloadSpec network settings.
type Cluster struct {
	ID               string
	Prefix           netip.Prefix
	NodePrefix       netip.Prefix
	InstancePrefix   netip.Prefix
	NodeCooldown     time.Duration
	InstanceCooldown time.Duration
	GatewayIPv6      netip.Addr
	MTU              int
	DNSServers       []netip.Addr
	// AsWritten keeps the cooldowns and prefixes as their writer spelled
	// them ("720h" for 30 days), by attribute name; a read gives them back.
	AsWritten map[string]string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Network is the WorkloadSpec network block the cluster hands its
// instances.
func (c Cluster) Network() Network {
	return Network{GatewayIPv6: c.GatewayIPv6, MTU: c.MTU, DNSServers: c.DNSServers}
}

// ApplyDefaults fills the zero fields with the spec's defaults, carving the
// sub-prefixes out of the cluster prefix.
func (c *Cluster) ApplyDefaults() error {
	// A value given is judged as given: only a zero value takes the default.
	if err := checkPrefix("prefix", c.Prefix, 0); err != nil {
		return err
	}
	for _, x := range []struct {
		field string
		p     netip.Prefix
	}{{"node_prefix", c.NodePrefix}, {"instance_prefix", c.InstancePrefix}} {
		if x.p != (netip.Prefix{}) {
			if err := checkPrefix(x.field, x.p, 6); err != nil {
				return err
			}
		}
	}
	if err := checkOptionalAddr("gateway_ipv6", c.GatewayIPv6, 6); err != nil {
		return err
	}
	if c.NodeCooldown == 0 {
		c.NodeCooldown = DefaultNodeCooldown
	}
	if c.InstanceCooldown == 0 {
		c.InstanceCooldown = DefaultInstanceCooldown
	}
	if !c.NodePrefix.IsValid() || !c.InstancePrefix.IsValid() {
		n, i, err := DefaultSubPrefixes(c.Prefix)
		if err != nil {
			return invalid("prefix", "%v", err)
		}
		if !c.NodePrefix.IsValid() {
			c.NodePrefix = n
		}
		if !c.InstancePrefix.IsValid() {
			c.InstancePrefix = i
		}
	}
	if !c.GatewayIPv6.IsValid() {
		c.GatewayIPv6 = netip.MustParseAddr(DefaultGatewayIPv6)
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	return nil
}

// ValidateClusterPrefix checks a cluster prefix: IPv6, at least a /64.
func ValidateClusterPrefix(p netip.Prefix) error {
	if !p.Addr().Is6() {
		return fmt.Errorf("%s is not an IPv6 prefix; the cluster prefix must be IPv6 (e.g. 2001:db8:abcd::/48)", p)
	}
	if p.Bits() > MaxClusterPrefixLen {
		return fmt.Errorf("%s is a /%d; the cluster prefix must be at least a /64 (ideally a /56 or /48)", p, p.Bits())
	}
	return nil
}

// ValidateSubPrefixes checks the node and instance sub-prefixes against the cluster prefix.
func ValidateSubPrefixes(cluster, node, instance netip.Prefix) error {
	for _, x := range []struct {
		field string
		p     netip.Prefix
	}{{"node_prefix", node}, {"instance_prefix", instance}} {
		if !PrefixContains(cluster, x.p) {
			return invalid(x.field, "%s is not inside the cluster prefix %s", x.p, cluster)
		}
		if x.p.Bits() > 127 {
			return invalid(x.field, "%s is too small: a sub-prefix needs at least two addresses (at most a /127)", x.p)
		}
	}
	if node.Overlaps(instance) {
		return invalid("instance_prefix", "%s overlaps the node prefix %s; the two must not overlap", instance, node)
	}
	return nil
}

// Validate checks the whole cluster after defaults are applied.
func (c *Cluster) Validate() error {
	if err := checkIDs("name", c.ID); err != nil {
		return err
	}
	if err := checkPrefix("prefix", c.Prefix, 0); err != nil {
		return err
	}
	if err := ValidateClusterPrefix(c.Prefix); err != nil {
		return &InvalidError{Field: "prefix", Msg: err.Error()}
	}
	if err := checkPrefix("node_prefix", c.NodePrefix, 6); err != nil {
		return err
	}
	if err := checkPrefix("instance_prefix", c.InstancePrefix, 6); err != nil {
		return err
	}
	if err := ValidateSubPrefixes(c.Prefix, c.NodePrefix, c.InstancePrefix); err != nil {
		return err
	}
	if c.NodeCooldown < 0 {
		return invalid("node_cooldown", "must not be negative")
	}
	if c.InstanceCooldown < MinInstanceCooldown {
		return invalid("instance_cooldown", "%s is shorter than the minimum of 1h (the spec recommends 24h)", FormatDuration(c.InstanceCooldown))
	}
	if err := checkAddr("gateway_ipv6", c.GatewayIPv6, 6); err != nil {
		return err
	}
	if c.MTU < MinClusterMTU || c.MTU > MaxMTU {
		return invalid("mtu", "%d is out of range: IPv6 needs at least %d, at most %d", c.MTU, MinClusterMTU, MaxMTU)
	}
	for _, d := range c.DNSServers {
		if err := checkAddr("dns_servers", d, 6); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) pools() []Pool {
	mk := func(cat string, p netip.Prefix, cool time.Duration) Pool {
		return Pool{ID: PoolRef{c.ID, cat}.ID(), ClusterID: c.ID, Name: cat, Category: cat, Family: 6, Kind: kindCounter,
			CIDRs: []netip.Prefix{p}, Cooldown: cool, Stripes: DefaultStripes, MTU: c.MTU, Gateway: c.GatewayIPv6}
	}
	return []Pool{
		mk(CategoryNode, c.NodePrefix, c.NodeCooldown),
		mk(CategoryInstance, c.InstancePrefix, c.InstanceCooldown),
	}
}

// scannedCluster is a Cluster that pgx scans whole from clusterColumns (a
// pgx.RowScanner, as scanned is for an allocation).
type scannedCluster Cluster

func (c *scannedCluster) ScanRow(rows pgx.Rows) error { return c.scan(rows) }

func (c *scannedCluster) scan(row pgx.Row) error {
	var nc, ic pgtype.Interval
	var gw netip.Prefix
	var dns []netip.Prefix
	if err := row.Scan(&c.ID, &c.Prefix, &c.NodePrefix, &c.InstancePrefix, &nc, &ic, &gw, &c.MTU, &dns, &c.AsWritten, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return err
	}
	c.NodeCooldown, c.InstanceCooldown = intervalDuration(nc), intervalDuration(ic)
	c.GatewayIPv6 = gw.Addr()
	c.DNSServers = prefixAddrs(dns)
	return nil
}

// scanCluster scans a row of clusterColumns, where no row is ErrNotFound.
func scanCluster(row pgx.Row) (Cluster, error) {
	var c Cluster
	err := (*scannedCluster)(&c).scan(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, ErrNotFound
	}
	return c, err
}

// prefixAddrs is the addresses of host prefixes (inet values).
func prefixAddrs(ps []netip.Prefix) []netip.Addr {
	out := make([]netip.Addr, len(ps))
	for i, p := range ps {
		out[i] = p.Addr()
	}
	return out
}

// asWritten keeps the spellings that say the values stored (any other is
// dropped: the canonical form is read back instead).
func (c Cluster) asWritten() map[string]string {
	return asWritten(c.AsWritten, map[string]any{"node_cooldown": c.NodeCooldown, "instance_cooldown": c.InstanceCooldown,
		"prefix": c.Prefix, "node_prefix": c.NodePrefix, "instance_prefix": c.InstancePrefix})
}

func hostPrefixes(as []netip.Addr) []netip.Prefix {
	out := make([]netip.Prefix, len(as))
	for i, a := range as {
		out[i] = netip.PrefixFrom(a, a.BitLen())
	}
	return out
}

// CheckClusterPrefix checks a cluster's prefix against the database without
// writing, for plan time: every other cluster whose prefix overlaps it is
// named, in one error on prefix. A cluster of the same id is not a problem
// here (an update, or a replacement).
func (s *Client) CheckClusterPrefix(ctx context.Context, id string, prefix netip.Prefix) error {
	others, err := s.OverlappingClusters(ctx, id, prefix)
	if err != nil {
		return err
	}
	if len(others) > 0 {
		named := make([]string, len(others))
		for i, o := range others {
			named[i] = fmt.Sprintf("cluster %q (%s)", o.ID, o.Prefix)
		}
		return invalid("prefix", "%s overlaps %s; cluster prefixes must not overlap", prefix, strings.Join(named, ", "))
	}
	return nil
}

// OverlappingClusters lists the clusters, other than id, whose prefix
// overlaps prefix (their ID and Prefix only), in id order.
func (s *Client) OverlappingClusters(ctx context.Context, id string, prefix netip.Prefix) ([]Cluster, error) {
	var others []Cluster
	err := s.readTx(ctx, false, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlOverlappingClusters, prefix, id)
		if err != nil {
			return err
		}
		others, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Cluster, error) {
			var c Cluster
			err := r.Scan(&c.ID, &c.Prefix)
			return c, err
		})
		return err
	})
	return others, s.mapErr(err)
}

// gatewayFree refuses a gateway (the cluster's new gateway_ipv6) that an
// owner holds: the gateway is never handed out.
func gatewayFree(ctx context.Context, q querier, clusterID string, gw netip.Addr) error {
	var held string
	err := q.QueryRow(ctx, sqlAddressHolder, clusterID, netip.PrefixFrom(gw, 128)).Scan(&held)
	if err == nil {
		return invalid("gateway_ipv6", "%s is held by %s; the gateway is never handed out, so pick another", gw, held)
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return nil
}

// CheckGateway tells without writing, for plan time, whether gw may become
// cluster clusterID's gateway: not while an owner holds it (UpdateCluster's
// refusal).
func (s *Client) CheckGateway(ctx context.Context, clusterID string, gw netip.Addr) error {
	return s.mapErr(s.readTx(ctx, false, func(tx pgx.Tx) error { return gatewayFree(ctx, tx, clusterID, gw) }))
}

// CreateCluster creates a cluster and its node and instance pools.
func (s *Client) CreateCluster(ctx context.Context, c Cluster) (Cluster, error) {
	if err := c.ApplyDefaults(); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	var out Cluster
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var other string
		var otherPrefix netip.Prefix
		err := tx.QueryRow(ctx, sqlOverlappingCluster, c.Prefix).Scan(&other, &otherPrefix)
		switch {
		case err == nil && other == c.ID:
			return existsConflict("cluster", c.ID)
		case err == nil:
			return &InvalidError{Field: "prefix", Msg: fmt.Sprintf("%s overlaps cluster %q (%s); cluster prefixes must not overlap", c.Prefix, other, otherPrefix)}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		row := tx.QueryRow(ctx, sqlInsertCluster.sql, params{
			"cluster": c.ID, "prefix": c.Prefix, "node_prefix": c.NodePrefix, "instance_prefix": c.InstancePrefix,
			"node_cooldown": c.NodeCooldown, "instance_cooldown": c.InstanceCooldown,
			"gateway_ipv6": netip.PrefixFrom(c.GatewayIPv6, 128), "mtu": c.MTU, "dns_servers": hostPrefixes(c.DNSServers),
			"actor": s.actor, "as_written": c.asWritten(),
		})
		var pe *pgconn.PgError
		if out, err = scanCluster(row); errors.Is(err, ErrNotFound) {
			return existsConflict("cluster", c.ID)
		} else if errors.As(err, &pe) && pe.Code == pgerrcode.ExclusionViolation {
			// A cluster with an overlapping prefix (this one, created by a
			// concurrent call, or another) committed after the check above:
			// the check, run again, names it.
			return errRetry
		} else if err != nil {
			return err
		}
		for _, p := range c.pools() {
			if err := insertPool(ctx, tx, p); err != nil {
				return err
			}
		}
		return s.insertEvent(ctx, tx, Event{Type: "cluster.created", ClusterID: c.ID,
			Data: map[string]any{"prefix": c.Prefix.String(), "node_prefix": c.NodePrefix.String(), "instance_prefix": c.InstancePrefix.String()}})
	})
	return out, err
}

// GetCluster reads one cluster, from the pool (no caller's transaction
// carries it: an InTx view serves Allocate and Release).
func (s *Client) GetCluster(ctx context.Context, id string) (Cluster, error) {
	if err := checkIDs("cluster_id", id); err != nil {
		return Cluster{}, err
	}
	c, err := scanCluster(s.pool.QueryRow(ctx, sqlLoadCluster, id))
	if errors.Is(err, ErrNotFound) {
		err = fmt.Errorf("%w: cluster %q does not exist", ErrNotFound, id)
	}
	return c, s.mapErr(err)
}

// UpdateCluster changes the settings that may change in place: cooldowns,
// gateway, MTU and DNS servers. A new cooldown applies to later releases; an
// address already cooling keeps the reusable time fixed at its release.
func (s *Client) UpdateCluster(ctx context.Context, c Cluster) (Cluster, error) {
	var out Cluster
	if err := checkIDs("name", c.ID); err != nil {
		return out, err
	}
	if err := c.Validate(); err != nil {
		return out, err
	}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		cur, err := scanCluster(tx.QueryRow(ctx, sqlLoadClusterNoKeyUpdate, c.ID))
		if err != nil {
			return err
		}
		if c.Prefix != cur.Prefix || c.NodePrefix != cur.NodePrefix || c.InstancePrefix != cur.InstancePrefix {
			return invalid("prefix", "the prefixes of cluster %q cannot change in place; replace the cluster", c.ID)
		}
		if c.GatewayIPv6 != cur.GatewayIPv6 {
			// A new gateway changes what the cluster's pools may hand out.
			if _, err := lockPoolsExclusive(ctx, tx, sqlLockPoolsClusterOwn, c.ID); err != nil {
				return err
			}
			if err := gatewayFree(ctx, tx, c.ID, c.GatewayIPv6); err != nil {
				return err
			}
			// Node block pools keep a row per address: the gateway's goes.
			if _, err := tx.Exec(ctx, sqlDeleteReusableAddress,
				c.ID, netip.PrefixFrom(c.GatewayIPv6, 128)); err != nil {
				return err
			}
		}
		out, err = scanCluster(tx.QueryRow(ctx, sqlUpdateCluster.sql, params{
			"cluster": c.ID, "node_cooldown": c.NodeCooldown,
			"instance_cooldown": c.InstanceCooldown, "gateway_ipv6": netip.PrefixFrom(c.GatewayIPv6, 128),
			"mtu": c.MTU, "dns_servers": hostPrefixes(c.DNSServers), "as_written": c.asWritten(),
		}))
		if err != nil {
			return err
		}
		for _, p := range c.pools() {
			if _, err := tx.Exec(ctx, sqlUpdatePoolSettings,
				p.ID, durationInterval(p.Cooldown), p.MTU, netip.PrefixFrom(p.Gateway, 128)); err != nil {
				return err
			}
		}
		// Node block pools hand out instance addresses: the same settings.
		if _, err := tx.Exec(ctx, sqlUpdateBlockPoolsSettings,
			c.ID, durationInterval(c.InstanceCooldown), c.MTU, netip.PrefixFrom(c.GatewayIPv6, 128)); err != nil {
			return err
		}
		return s.insertEvent(ctx, tx, Event{Type: "cluster.updated", ClusterID: c.ID,
			Data: map[string]any{"node_cooldown": FormatDuration(c.NodeCooldown), "instance_cooldown": FormatDuration(c.InstanceCooldown),
				"gateway_ipv6": c.GatewayIPv6.String(), "mtu": c.MTU}})
	})
	return out, err
}

// ClusterHoldings counts the addresses a cluster still holds.
type ClusterHoldings struct{ Active, Reserved, Cooling int64 }

// DeleteCluster deletes a cluster with its pools and allocations. Unless
// force is set, a cluster that still holds active addresses is refused,
// naming how many. Holds are dropped, and addresses inside their cooldown
// stay behind as tombstones (see emptyPools).
func (s *Client) DeleteCluster(ctx context.Context, id string, force bool) error {
	if err := checkIDs("cluster_id", id); err != nil {
		return err
	}
	return s.withTx(ctx, func(tx pgx.Tx) error {
		// Pools first, then the cluster row (the locking order): allocations in
		// flight commit before the counts below are taken.
		locked, err := lockPoolsExclusive(ctx, tx, sqlLockPoolsOfCluster, id)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, sqlLockClusterUpdate, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			// Not there when this statement began: a cluster whose creation
			// commits now is not this destroy's to delete (nor to count).
			return ErrNotFound
		}
		// A pool created while this waited for the cluster's row is not
		// locked, and an allocation from it may be in flight: the counts
		// would miss it, and the cascade below would take it away once it
		// commits. With the cluster's row locked no pool can be created (a
		// pool's key locks that row), so the list is final here: when it
		// grew, everything runs again and locks the new pools first.
		rows, err := tx.Query(ctx, sqlPoolsOfCluster, id)
		if err != nil {
			return err
		}
		now, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if !slices.Equal(locked, now) {
			return errRetry
		}
		var h ClusterHoldings
		if err := tx.QueryRow(ctx, sqlClusterHoldings, id).Scan(&h.Active, &h.Reserved, &h.Cooling); err != nil {
			return err
		}
		if !force && h.Active > 0 {
			return stillHolds(ctx, tx, fmt.Sprintf("cluster %q", id), "cluster", now, h.Active)
		}
		if err := s.emptyPools(ctx, tx, now, force); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlDeleteCluster, id); err != nil {
			return err
		}
		return s.insertEvent(ctx, tx, Event{Type: "cluster.deleted", ClusterID: id,
			Data: map[string]any{"active": h.Active, "reserved": h.Reserved, "cooling": h.Cooling, "forced": force}})
	})
}

// stillHolds is the refusal of a destroy of what (a cluster or pool, whose
// pools are pools) that still holds active addresses: it names the first
// few, with their owners, and what force_destroy would do to them.
func stillHolds(ctx context.Context, tx pgx.Tx, what, kind string, pools []string, active int64) error {
	list, err := firstFew(ctx, tx, active, sqlActiveSample, pools)
	if err != nil {
		return err
	}
	noun := "addresses"
	if active == 1 {
		noun = "address"
	}
	return &ConflictError{Msg: fmt.Sprintf("%s still holds %d active %s: %s; destroy the resources that hold them first, "+
		"or set force_destroy = true to release them into their cooldown with the %s (a configuration whose state holds "+
		"one of them then loses it, and its next apply allocates again)", what, active, noun, list, kind)}
}

// HeldElsewhere counts the active addresses of a cluster (kind "cluster")
// or a pool (kind "pool") that this client's configuration (its Origin) did
// not hand out, and names the first few: what a destroy of it without
// force_destroy would still find once the configuration's own resources
// are destroyed, so that its plan can say the destroy will be refused.
func (s *Client) HeldElsewhere(ctx context.Context, kind, id string) (int64, string, error) {
	if kind == "cluster" {
		if err := checkIDs("cluster_id", id); err != nil {
			return 0, "", err
		}
	}
	var n int64
	var list string
	err := s.readTx(ctx, true, func(tx pgx.Tx) error {
		pools := []string{id}
		if kind == "cluster" {
			rows, err := tx.Query(ctx, sqlPoolsOfCluster, id)
			if err != nil {
				return err
			}
			if pools, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
		}
		if err := tx.QueryRow(ctx, sqlActiveElsewhereCount, pools, s.origin).Scan(&n); err != nil || n == 0 {
			return err
		}
		var err error
		list, err = firstFew(ctx, tx, n, sqlActiveElsewhereSample, pools, s.origin)
		return err
	})
	return n, list, err
}

// emptyPools readies pools for their destroy, with an event for each row it
// changes: the database refuses to delete a pool that still has an active
// row or a live hold (migration 12). A destroy is never refused for holds
// that no apply confirmed: each is dropped, keeping only a cooldown its
// address already had (its address was never routed, so a forced destroy
// does not give it one either). A forced destroy also releases each active
// address into its pool's cooldown. What is still cooling then outlives the
// pools as tombstones (migration 16), and tombstones whose cooldown has
// passed are swept.
func (s *Client) emptyPools(ctx context.Context, tx pgx.Tx, pools []string, force bool) error {
	reason := "destroy"
	if force {
		reason = "force_destroy"
	}
	type step struct{ sql, event string }
	steps := []step{{sqlDropPoolHolds, "allocation.hold_dropped"}}
	if force {
		// The active addresses first: the holds are left to the drop.
		steps = []step{{sqlForceRelease, ""}, steps[0]}
	}
	for _, step := range steps {
		rows, err := tx.Query(ctx, step.sql, pools)
		if err != nil {
			return err
		}
		changed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Allocation, error) { return scanAllocation(r) })
		if err != nil {
			return err
		}
		for _, a := range changed {
			t := step.event
			if t == "" {
				t = eventTypes[a.Owner.Kind].released
			}
			if err := s.insertEvent(ctx, tx, Event{Type: t, ClusterID: a.ClusterID, PoolID: a.PoolID,
				AllocationID: a.ID, Generation: a.Generation, Address: a.Address, Owner: a.Owner,
				Data: map[string]any{"reason": reason}}); err != nil {
				return err
			}
		}
	}
	_, err := tx.Exec(ctx, sqlSweepTombstones)
	return err
}
