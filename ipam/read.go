package ipam

import (
	"context"
	"net/netip"

	"github.com/overlayipam/terraform-provider-ipam/internal/ipamcore"
)

// Cluster is a cluster's prefixes, cooldowns and WorkloadSpec network
// settings (managed by Terraform's ipam_cluster).
type Cluster = ipamcore.Cluster

// AddressInfo is what a lookup finds about an address: its pool, its state
// and its owner (or its last holder while it cools down).
type AddressInfo = ipamcore.AddressInfo

// Usage is a cluster's usage by category and pool: sizes, active, reserved,
// cooling and free counts, the cooldown queue, recent failures.
type Usage = ipamcore.ClusterUsage

// Cluster reads a cluster.
func (c *Client) Cluster(ctx context.Context, id string) (Cluster, error) {
	cl, err := c.st.GetCluster(ctx, id)
	return cl, wrap(err)
}

// CreateCluster creates a cluster and its node and instance pools, with the
// defaults of ipam_cluster for what is zero (sub-prefixes, gateway, MTU, and
// the cooldowns: 30 days for nodes, 24 hours for instances). Terraform
// manages clusters in production; this is for tools and tests.
func (c *Client) CreateCluster(ctx context.Context, cl Cluster) (Cluster, error) {
	if cl.NodeCooldown == 0 {
		cl.NodeCooldown = ipamcore.DefaultNodeCooldown
	}
	if cl.InstanceCooldown == 0 {
		cl.InstanceCooldown = ipamcore.DefaultInstanceCooldown
	}
	out, err := c.st.CreateCluster(ctx, cl)
	return out, wrap(err)
}

// Lookup finds an address in every cluster's pools (or one cluster's, when
// clusterID is set).
func (c *Client) Lookup(ctx context.Context, addr netip.Addr, clusterID string) ([]AddressInfo, error) {
	out, err := c.st.LookupAddress(ctx, addr, clusterID)
	return out, wrap(err)
}

// Usage reports a cluster's usage.
func (c *Client) Usage(ctx context.Context, clusterID string) (Usage, error) {
	out, err := c.st.PoolUsage(ctx, clusterID)
	return out, wrap(err)
}
