package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// InstanceRequest asks for an instance's (one microVM's) address.
type InstanceRequest struct {
	ClusterID  string
	InstanceID string
	// OrgID and EnvID, both required, are the instance's tenant: an
	// instance address maps back to (org, env, instance), and an instance
	// takes back its own cooling address only for the same org and env.
	OrgID string
	EnvID string
	// NodeID is the node the instance is placed on: when the node has
	// instance blocks, the address comes from them (the node grows when they
	// are full and its scaling allows).
	NodeID string
	// Address claims this exact address; zero lets the allocator pick.
	Address netip.Addr
}

// InstanceAddress is an instance's address with the WorkloadSpec network
// block.
type InstanceAddress struct {
	Address netip.Addr
	// Prefix is the address as a /128 (WorkloadSpec network.overlay_ipv6).
	Prefix      netip.Prefix
	GatewayIPv6 netip.Addr
	MTU         int
	DNSServers  []netip.Addr
	// Generation advances each time the owner is given an address.
	Generation  int64
	AllocatedAt time.Time
	// Adopted is true when the instance already held this address, made by
	// the same actor and not yet confirmed: a retried placement.
	Adopted bool
}

// AllocateInstance hands an instance its address inside tx (nil: a
// transaction of its own), with its instance.allocated event: both commit or
// roll back with the caller's rows. On ipam_exhausted the failure and an
// instance.allocation_failed event are recorded outside tx.
func (c *Client) AllocateInstance(ctx context.Context, tx pgx.Tx, req InstanceRequest) (InstanceAddress, error) {
	if err := requireTenant(req.OrgID, req.EnvID); err != nil {
		return InstanceAddress{}, nameInput(err, instanceFields)
	}
	o := Owner{Kind: OwnerInstance, ID: req.InstanceID, InstanceID: req.InstanceID,
		OrgID: req.OrgID, EnvID: req.EnvID, NodeID: req.NodeID}
	res, err := c.InTx(tx).Allocate(ctx, AllocateRequest{
		Pool: ClusterPools(req.ClusterID), Owner: o, Address: req.Address})
	if err != nil {
		return InstanceAddress{}, nameInput(err, instanceFields)
	}
	return InstanceAddress{Address: res.Address, Prefix: netip.PrefixFrom(res.Address, 128),
		GatewayIPv6: res.Network.GatewayIPv6, MTU: res.Network.MTU, DNSServers: res.Network.DNSServers,
		Generation: res.Generation, AllocatedAt: res.AllocatedAt, Adopted: res.Adopted}, nil
}

// ReleaseInstance releases an instance's address inside tx (nil: a
// transaction of its own) into its cooldown (the cluster's
// instance_cooldown), with its instance.released event. Releasing what is not
// held is a no-op; in a cluster that does not exist, invalid_input on
// clusterID (errors.Is ErrNotFound).
func (c *Client) ReleaseInstance(ctx context.Context, tx pgx.Tx, clusterID, instanceID string) error {
	return c.release(ctx, tx, clusterID, OwnerInstance, instanceID)
}

// NodeRequest asks for a node's overlay address.
type NodeRequest struct {
	ClusterID string
	NodeID    string
	// Address claims this exact address; zero lets the allocator pick.
	Address netip.Addr
}

// Address is an allocated address.
type Address struct {
	Address netip.Addr
	// Prefix is the address as a host prefix (/128 or /32).
	Prefix      netip.Prefix
	PoolID      string
	Generation  int64
	AllocatedAt time.Time
	Adopted     bool
}

func addressOf(res AllocateResult) Address {
	return Address{Address: res.Address, Prefix: netip.PrefixFrom(res.Address, res.Address.BitLen()), PoolID: res.PoolID,
		Generation: res.Generation, AllocatedAt: res.AllocatedAt, Adopted: res.Adopted}
}

// AllocateNode hands a node its overlay address from the cluster's node
// prefix inside tx (nil: a transaction of its own), with its event.
func (c *Client) AllocateNode(ctx context.Context, tx pgx.Tx, req NodeRequest) (Address, error) {
	o := Owner{Kind: OwnerNode, ID: req.NodeID, NodeID: req.NodeID}
	res, err := c.InTx(tx).Allocate(ctx, AllocateRequest{
		Pool: ClusterPools(req.ClusterID), Owner: o, Address: req.Address})
	return addressOf(res), nameInput(err, nodeFields)
}

// ReleaseNode releases a node's address into the node cooldown; releasing
// what is not held is a no-op (in a cluster that does not exist, invalid_input
// on clusterID).
func (c *Client) ReleaseNode(ctx context.Context, tx pgx.Tx, clusterID, nodeID string) error {
	return c.release(ctx, tx, clusterID, OwnerNode, nodeID)
}

// EnvIPv4Request asks for an environment's IPv4 add-on address.
type EnvIPv4Request struct {
	ClusterID string
	// Pool is the name of the cluster's IPv4 pool (ipam_pool.name).
	Pool string
	// OrgID, required, is the org the environment belongs to.
	OrgID string
	EnvID string
	// Address claims this exact address; zero takes the oldest free one.
	Address netip.Addr
}

// AllocateEnvIPv4 hands an environment its IPv4 (at most one active per
// environment) inside tx (nil: a transaction of its own), with its
// env.ipv4_addon_enabled event.
func (c *Client) AllocateEnvIPv4(ctx context.Context, tx pgx.Tx, req EnvIPv4Request) (Address, error) {
	if err := requireTenant(req.OrgID, req.EnvID); err != nil {
		return Address{}, nameInput(err, envIPv4Fields)
	}
	o := Owner{Kind: OwnerEnvIPv4, ID: req.EnvID, EnvID: req.EnvID, OrgID: req.OrgID}
	res, err := c.InTx(tx).Allocate(ctx, AllocateRequest{
		Pool: OperatorPool(req.ClusterID, req.Pool), Owner: o, Address: req.Address})
	return addressOf(res), nameInput(err, envIPv4Fields)
}

// ReleaseEnvIPv4 releases an environment's IPv4 into its pool's cooldown;
// releasing what is not held is a no-op.
func (c *Client) ReleaseEnvIPv4(ctx context.Context, tx pgx.Tx, clusterID, envID string) error {
	return c.release(ctx, tx, clusterID, OwnerEnvIPv4, envID)
}

// requireTenant refuses a request of an instance or an environment's IPv4
// that leaves its tenant out, as the provider's schema does: such an address
// would map back to no org or environment, and the per-tenant cooldown
// would let an owner of the same id in any tenant take it back.
func requireTenant(orgID, envID string) error {
	for _, f := range []struct{ name, value string }{{"org_id", orgID}, {"env_id", envID}} {
		if f.value == "" {
			return &InvalidError{Field: f.name, Msg: "must be set: an address maps back to its org and environment, and only the same tenant takes its cooling address back"}
		}
	}
	return nil
}

func (c *Client) release(ctx context.Context, tx pgx.Tx, clusterID, kind, id string) error {
	in := c.InTx(tx)
	released, err := in.Release(ctx, clusterID, Owner{Kind: kind, ID: id}, 0)
	if err == nil && !released {
		// Nothing held is a no-op, but a cluster that does not exist is a
		// mistake to name (a mistyped id), not a release that went well.
		err = in.readTx(ctx, false, func(q pgx.Tx) error {
			var n int
			if err := q.QueryRow(ctx, sqlClusterRow, clusterID).Scan(&n); errors.Is(err, pgx.ErrNoRows) {
				return &InvalidError{Field: "cluster_id", Msg: fmt.Sprintf("cluster %q does not exist", clusterID), Err: ErrNotFound}
			} else if err != nil {
				return err
			}
			return nil
		})
	}
	return nameInput(err, releaseFields)
}

// The core names a wrong input by its own name for it (cluster_id,
// owner_id, address, ...); a caller of this package filled in a request's
// fields. These maps name those fields instead.
var (
	instanceFields = requestFields("InstanceRequest", map[string]string{"cluster_id": "ClusterID", "pool_id": "ClusterID",
		"instance_id": "InstanceID", "owner_id": "InstanceID", "org_id": "OrgID", "env_id": "EnvID", "node_id": "NodeID",
		"address": "Address"})
	nodeFields = requestFields("NodeRequest", map[string]string{"cluster_id": "ClusterID", "pool_id": "ClusterID",
		"node_id": "NodeID", "owner_id": "NodeID", "address": "Address"})
	envIPv4Fields = requestFields("EnvIPv4Request", map[string]string{"cluster_id": "ClusterID", "pool_id": "Pool",
		"env_ipv4_id": "EnvID", "env_id": "EnvID", "owner_id": "EnvID", "org_id": "OrgID", "address": "Address"})
	releaseFields = map[string]string{"cluster_id": "clusterID", "instance_id": "instanceID", "node_id": "nodeID",
		"env_ipv4_id": "envID", "owner_id": "the owner's id"}
)

func requestFields(typ string, m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for core, field := range m {
		out[core] = typ + "." + field
	}
	return out
}

// nameInput renames a wrong input after the caller's field (a request's,
// or a parameter's); other errors pass through unchanged.
// The message loses the core's name of the field it starts with (the error
// names the field before it). A cluster that does not exist matches
// ErrNotFound whichever call names it, as a release's does.
func nameInput(err error, fields map[string]string) error {
	var ie *InvalidError
	if errors.As(err, &ie) {
		if name, ok := fields[ie.Field]; ok {
			msg := ie.Msg
			for _, said := range []string{ie.Field + " ", "owner id "} {
				msg = strings.TrimPrefix(msg, said)
			}
			why := ie.Err
			if ie.Field == "cluster_id" && why == ErrPoolNotFound {
				why = errClusterMissing
			}
			err = &InvalidError{Field: name, Index: ie.Index, Indexed: ie.Indexed, Msg: msg, Err: why}
		}
	}
	return err
}

// errClusterMissing classifies a request's cluster that does not exist:
// errors.Is holds for ErrNotFound and for ErrPoolNotFound.
var errClusterMissing = errors.Join(ErrNotFound, ErrPoolNotFound)
