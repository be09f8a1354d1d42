package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam/internal/engine"
)

// hostileIDs are the families of identifier that no create accepts. Every
// call that takes an identifier must refuse each of them the same way,
// whether the id creates, reads, releases or filters: a read or a release
// that "finds nothing" for one of them would accept nonsense silently.
var hostileIDs = []struct{ family, v string }{
	{"empty", ""},
	{"129 characters", strings.Repeat("a", 129)},
	{"10,000 characters", strings.Repeat("a", 10000)},
	{"NUL byte", "c1\x00"},
	{"newline", "c1\nx"},
	{"RTL override", "c1\u202ex"},
	{"SQL", "c1'; DROP TABLE ipam_events; --"},
	{"path", "../../etc/passwd"},
	{"space", "c 1"},
	{"percent (LIKE)", "c1%"},
	{"leading dash", "-c1"},
	{"invalid UTF-8", "c1\xff"},
	{"homoglyph", "с1"}, // Cyrillic es
	{"slash", "c1/node"},
}

// idSlot is one place of the Go API that takes an identifier.
type idSlot struct {
	name  string // the call and its parameter
	field string // the field a refusal names
	// optional: an empty value is valid here (a filter that matches
	// anything, every cluster, or a label left unset).
	optional bool
	call     func(ctx context.Context, st *engine.Client, v string) error
}

func nodeOwner(id string) engine.Owner {
	return engine.Owner{Kind: engine.OwnerNode, ID: id, NodeID: id}
}

var sc16 = engine.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 4}

func idSlots() []idSlot {
	v4 := func(p string) engine.SetEntry { return engine.SetEntry{Key: "a", Pools: []string{p}} }
	return []idSlot{
		{"CreateCluster ID", "name", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.CreateCluster(ctx, engine.Cluster{ID: v, Prefix: netip.MustParsePrefix("2001:db8:9::/48")})
			return err
		}},
		{"GetCluster id", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.GetCluster(ctx, v)
			return err
		}},
		{"UpdateCluster ID", "name", false, func(ctx context.Context, st *engine.Client, v string) error {
			c, err := st.GetCluster(ctx, "c1")
			if err != nil {
				return err
			}
			c.ID = v
			_, err = st.UpdateCluster(ctx, c)
			return err
		}},
		{"DeleteCluster id", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			return st.DeleteCluster(ctx, v, true)
		}},
		{"CreatePool ClusterID", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.CreatePool(ctx, engine.Pool{ClusterID: v, Name: "p", CIDRs: prefixes("203.0.113.0/29")})
			return err
		}},
		{"CreatePool Name", "name", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: v, CIDRs: prefixes("203.0.113.0/29")})
			return err
		}},
		{"CheckPool Name", "name", false, func(ctx context.Context, st *engine.Client, v string) error {
			return st.CheckPool(ctx, engine.Pool{ClusterID: "c1", Name: v, CIDRs: prefixes("203.0.113.0/29")})
		}},
		{"GetPool id (name)", "pool_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.GetPool(ctx, "c1/"+v)
			return err
		}},
		{"GetPool id (cluster)", "pool_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.GetPool(ctx, v+"/v4")
			return err
		}},
		{"DeletePool id", "pool_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			return st.DeletePool(ctx, "c1/"+v, true)
		}},
		{"CheckClaim poolID", "pool_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			return st.CheckClaim(ctx, "c1/"+v, netip.MustParseAddr("198.51.100.1"))
		}},
		{"Allocate Pool.ClusterID", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools(v), Owner: nodeOwner("n9")})
			return err
		}},
		{"Allocate Pool.Name", "pool_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.OperatorPool("c1", v), Owner: env("e9")})
			if v == "" && errors.Is(err, engine.ErrInvalid) {
				return nil // an env's pool must be named: refused, rightly, for another reason
			}
			return err
		}},
		{"Allocate Owner.ID", "node_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: engine.Owner{Kind: engine.OwnerNode, ID: v}})
			return err
		}},
		{"Allocate Owner.Kind", "owner_kind", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: engine.Owner{Kind: v, ID: "x1"}})
			return err
		}},
		{"Allocate Owner.OrgID", "org_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			o := env("e9")
			o.OrgID = v
			_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: testdb.Pool("c1/v4"), Owner: o})
			return cleanup(ctx, st, err, "c1", o)
		}},
		{"Reserve Owner.ID", "node_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: nodeOwner(v)}, time.Minute)
			return err
		}},
		{"MarkReplacement clusterID", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.MarkReplacement(ctx, v, nodeOwner("n1"), 1, time.Minute)
			return err
		}},
		{"MarkReplacement Owner.ID", "node_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.MarkReplacement(ctx, "c1", nodeOwner(v), 1, time.Minute)
			return err
		}},
		{"AllocateNode ClusterID", "NodeRequest.ClusterID", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.AllocateNode(ctx, nil, engine.NodeRequest{ClusterID: v, NodeID: "n9"})
			return err
		}},
		{"AllocateInstance InstanceID", "InstanceRequest.InstanceID", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: v, OrgID: "o", EnvID: "e"})
			return err
		}},
		{"AllocateInstance EnvID", "InstanceRequest.EnvID", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: "i9", OrgID: "o", EnvID: v})
			return err
		}},
		{"AllocateInstance OrgID", "InstanceRequest.OrgID", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.AllocateInstance(ctx, nil, engine.InstanceRequest{ClusterID: "c1", InstanceID: "i9", OrgID: v, EnvID: "e"})
			return err
		}},
		{"AllocateEnvIPv4 OrgID", "EnvIPv4Request.OrgID", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.AllocateEnvIPv4(ctx, nil, engine.EnvIPv4Request{ClusterID: "c1", Pool: "v4", OrgID: v, EnvID: "e9"})
			return err
		}},
		{"AllocateEnvIPv4 Pool", "EnvIPv4Request.Pool", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.AllocateEnvIPv4(ctx, nil, engine.EnvIPv4Request{ClusterID: "c1", Pool: v, OrgID: "o", EnvID: "e9"})
			return err
		}},
		{"ReleaseNode clusterID", "clusterID", false, func(ctx context.Context, st *engine.Client, v string) error {
			return st.ReleaseNode(ctx, nil, v, "n1")
		}},
		{"ReleaseNode nodeID", "nodeID", false, func(ctx context.Context, st *engine.Client, v string) error {
			return st.ReleaseNode(ctx, nil, "c1", v)
		}},
		{"ReleaseInstance clusterID", "clusterID", false, func(ctx context.Context, st *engine.Client, v string) error {
			return st.ReleaseInstance(ctx, nil, v, "i1")
		}},
		{"ReleaseEnvIPv4 envID", "envID", false, func(ctx context.Context, st *engine.Client, v string) error {
			return st.ReleaseEnvIPv4(ctx, nil, "c1", v)
		}},
		{"Release clusterID", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.Release(ctx, v, nodeOwner("n1"), 0)
			return err
		}},
		{"UpdateLabels clusterID", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.UpdateLabels(ctx, v, nodeOwner("n1"))
			return err
		}},
		{"UpdateLabels Owner.EnvID", "env_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			o := nodeOwner("n1")
			o.EnvID = v
			_, err := st.UpdateLabels(ctx, "c1", o)
			return cleanup(ctx, st, err, "", o)
		}},
		{"GetActive clusterID", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.GetActive(ctx, v, engine.OwnerNode, "n1")
			return err
		}},
		{"GetActive ownerKind", "owner_kind", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.GetActive(ctx, "c1", v, "n1")
			return err
		}},
		{"GetActive ownerID", "owner_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.GetActive(ctx, "c1", engine.OwnerNode, v)
			return err
		}},
		{"ScaleNodeBlocks clusterID", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.ScaleNodeBlocks(ctx, v, "n1", sc16)
			return err
		}},
		{"RescaleNodeBlocks nodeID", "node_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.RescaleNodeBlocks(ctx, "c1", v)
			return err
		}},
		{"GetNodeBlocks clusterID", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.GetNodeBlocks(ctx, v, "n1")
			return err
		}},
		{"ReleaseNodeBlocks nodeID", "node_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			return st.ReleaseNodeBlocks(ctx, "c1", v)
		}},
		{"PreviewNodeBlocks nodeID", "node_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, _, err := st.PreviewNodeBlocks(ctx, "c1", v, sc16)
			return err
		}},
		{"InstancePoolID nodeID", "node_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.InstancePoolID(ctx, "c1", v)
			return err
		}},
		{"NodesWithBlocks clusterID", "cluster_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.NodesWithBlocks(ctx, v)
			return err
		}},
		{"ApplySet ClusterID", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: v, Owner: engine.Owner{ID: "s1"}, Remove: []string{"a"}})
			return err
		}},
		{"ApplySet Owner.ID", "owner_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: v}, Remove: []string{"a"}})
			return err
		}},
		{"ApplySet Remove key", "addresses", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "s1"}, Remove: []string{v}})
			return err
		}},
		{"ApplySet Add key", "addresses", false, func(ctx context.Context, st *engine.Client, v string) error {
			e := v4("c1/v4")
			e.Key = v
			_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "s9"}, Add: []engine.SetEntry{e}})
			return err
		}},
		{"ApplySet Add pool", "addresses", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "s9"}, Add: []engine.SetEntry{v4("c1/" + v)}})
			return err
		}},
		{"ApplySet Owner.OrgID", "org_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "s1", OrgID: v}, Relabel: true})
			return err
		}},
		{"GetSet setID", "owner_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := st.GetSet(ctx, "c1", v)
			return err
		}},
		{"ReleaseSet clusterID", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			return st.ReleaseSet(ctx, v, "s1")
		}},
		{"UpdateSetLabels labels.ID", "owner_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			return st.UpdateSetLabels(ctx, "c1", engine.Owner{ID: v})
		}},
		{"ReserveSetEntry key", "addresses", false, func(ctx context.Context, st *engine.Client, v string) error {
			e := v4("c1/v4")
			e.Key = v
			_, err := st.ReserveSetEntry(ctx, "c1", engine.Owner{ID: "s9"}, e, time.Minute)
			return err
		}},
		{"ListEvents ClusterID", "cluster_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := engine.OperatorOf(st).ListEvents(ctx, engine.EventFilter{ClusterID: v})
			return err
		}},
		{"ListEvents Types", "type", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := engine.OperatorOf(st).ListEvents(ctx, engine.EventFilter{Types: []string{v}})
			return err
		}},
		{"ListAllocations NodeID", "node_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := engine.OperatorOf(st).ListAllocations(ctx, engine.ListFilter{NodeID: v})
			return err
		}},
		{"ListAllocations PoolID", "pool_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			if v == "" {
				return nil // no pool filter
			}
			_, err := engine.OperatorOf(st).ListAllocations(ctx, engine.ListFilter{PoolID: "c1/" + v})
			return err
		}},
		{"ListPools clusterID", "cluster_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := engine.OperatorOf(st).ListPools(ctx, v)
			return err
		}},
		{"ListSets envID", "env_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := engine.OperatorOf(st).ListSets(ctx, "c1", "", v)
			return err
		}},
		{"LookupAddress clusterID", "cluster_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := engine.OperatorOf(st).LookupAddress(ctx, netip.MustParseAddr("198.51.100.1"), v)
			return err
		}},
		{"PoolUsage clusterID", "cluster_id", false, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := engine.OperatorOf(st).PoolUsage(ctx, v)
			return err
		}},
		{"Check clusterID", "cluster_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := engine.OperatorOf(st).Check(ctx, v)
			return err
		}},
		{"RecountUsage clusterID", "cluster_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := engine.OperatorOf(st).RecountUsage(ctx, v)
			return err
		}},
		{"FindStaleLeaks clusterID", "cluster_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := engine.OperatorOf(st).FindStaleLeaks(ctx, v, nil, 30)
			return err
		}},
		{"FindInventoryLeaks clusterID", "cluster_id", true, func(ctx context.Context, st *engine.Client, v string) error {
			_, err := engine.OperatorOf(st).FindInventoryLeaks(ctx, v, engine.Inventory{engine.OwnerNode: {"n1": true}})
			return err
		}},
		{"Open Config.Actor", "actor", true, func(ctx context.Context, st *engine.Client, v string) error {
			c, err := engine.Open(ctx, engine.Config{DatabaseURL: "postgres://u@127.0.0.1:1/db", Actor: v})
			if err == nil {
				c.Close()
			}
			return err
		}},
	}
}

// cleanup undoes what a call that rightly accepted a value ("" for an
// optional label) wrote, so that the row counts compare; it passes err on.
func cleanup(ctx context.Context, st *engine.Client, err error, cluster string, o engine.Owner) error {
	if err == nil && cluster != "" {
		_, err = st.Release(ctx, cluster, o, 0)
	}
	return err
}

// valueCase is one bad value that is not an identifier.
type valueCase struct {
	name, field string
	call        func(ctx context.Context, st *engine.Client) error
}

func cluster2(mod func(*engine.Cluster)) func(ctx context.Context, st *engine.Client) error {
	return func(ctx context.Context, st *engine.Client) error {
		c := engine.Cluster{ID: "c2", Prefix: netip.MustParsePrefix("2001:db8:200::/48")}
		mod(&c)
		_, err := st.CreateCluster(ctx, c)
		return err
	}
}

func updateC1(mod func(*engine.Cluster)) func(ctx context.Context, st *engine.Client) error {
	return func(ctx context.Context, st *engine.Client) error {
		c, err := st.GetCluster(ctx, "c1")
		if err != nil {
			return err
		}
		mod(&c)
		_, err = st.UpdateCluster(ctx, c)
		return err
	}
}

func pool2(mod func(*engine.Pool)) func(ctx context.Context, st *engine.Client) error {
	return func(ctx context.Context, st *engine.Client) error {
		p := engine.Pool{ClusterID: "c1", Name: "p2", CIDRs: prefixes("2001:db8:0:ff::/64")}
		mod(&p)
		_, err := st.CreatePool(ctx, p)
		return err
	}
}

func updateV4(mod func(*engine.Pool)) func(ctx context.Context, st *engine.Client) error {
	return func(ctx context.Context, st *engine.Client) error {
		p, err := st.GetPool(ctx, "c1/v4")
		if err != nil {
			return err
		}
		mod(&p)
		_, err = st.UpdatePool(ctx, p)
		return err
	}
}

func scale(mod func(*engine.BlockScaling)) func(ctx context.Context, st *engine.Client) error {
	return func(ctx context.Context, st *engine.Client) error {
		sc := sc16
		mod(&sc)
		_, err := st.ScaleNodeBlocks(ctx, "c1", "n2", sc)
		return err
	}
}

func allocAt(pool engine.PoolRef, o engine.Owner, a string) func(ctx context.Context, st *engine.Client) error {
	return func(ctx context.Context, st *engine.Client) error {
		_, err := st.Allocate(ctx, engine.AllocateRequest{Pool: pool, Owner: o, Address: netip.MustParseAddr(a)})
		return err
	}
}

// hostBits is a prefix with host bits set, as netip parses it.
func hostBits(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func valueCases() []valueCase {
	zoned := netip.MustParseAddr("fe80::1%eth0")
	return []valueCase{
		// Cluster prefixes and addresses.
		{"cluster prefix with host bits", "prefix", cluster2(func(c *engine.Cluster) { c.Prefix = hostBits("2001:DB8:200::1/48") })},
		{"cluster prefix empty", "prefix", cluster2(func(c *engine.Cluster) { c.Prefix = netip.Prefix{} })},
		{"cluster prefix of length 200", "prefix", cluster2(func(c *engine.Cluster) { c.Prefix = netip.PrefixFrom(c.Prefix.Addr(), 200) })},
		{"cluster prefix IPv4", "prefix", cluster2(func(c *engine.Cluster) { c.Prefix = hostBits("10.0.0.0/8") })},
		{"cluster prefix IPv4-mapped", "prefix", cluster2(func(c *engine.Cluster) { c.Prefix = hostBits("::ffff:10.0.0.0/104") })},
		{"node_prefix with host bits", "node_prefix", cluster2(func(c *engine.Cluster) { c.NodePrefix = hostBits("2001:DB8:200::1/64") })},
		{"instance_prefix with host bits", "instance_prefix", cluster2(func(c *engine.Cluster) { c.InstancePrefix = hostBits("2001:db8:200:1::1/64") })},
		{"node_prefix IPv4", "node_prefix", cluster2(func(c *engine.Cluster) { c.NodePrefix = hostBits("10.0.0.0/24") })},
		{"node_prefix of length -1", "node_prefix", cluster2(func(c *engine.Cluster) { c.NodePrefix = netip.PrefixFrom(c.Prefix.Addr(), 129) })},
		{"gateway_ipv6 with zone", "gateway_ipv6", cluster2(func(c *engine.Cluster) { c.GatewayIPv6 = zoned })},
		{"gateway_ipv6 IPv4", "gateway_ipv6", cluster2(func(c *engine.Cluster) { c.GatewayIPv6 = netip.MustParseAddr("10.0.0.1") })},
		{"dns_servers with zone", "dns_servers", cluster2(func(c *engine.Cluster) { c.DNSServers = []netip.Addr{zoned} })},
		{"dns_servers empty address", "dns_servers", cluster2(func(c *engine.Cluster) { c.DNSServers = []netip.Addr{{}} })},
		{"cluster mtu -1", "mtu", cluster2(func(c *engine.Cluster) { c.MTU = -1 })},
		{"cluster mtu 2^40", "mtu", cluster2(func(c *engine.Cluster) { c.MTU = 1 << 40 })},
		{"cluster mtu 65536", "mtu", cluster2(func(c *engine.Cluster) { c.MTU = 65536 })},
		{"node_cooldown negative", "node_cooldown", cluster2(func(c *engine.Cluster) { c.NodeCooldown = -time.Hour })},
		{"instance_cooldown negative", "instance_cooldown", cluster2(func(c *engine.Cluster) { c.InstanceCooldown = -time.Hour })},
		{"update: mtu 2^40", "mtu", updateC1(func(c *engine.Cluster) { c.MTU = 1 << 40 })},
		{"update: gateway with zone", "gateway_ipv6", updateC1(func(c *engine.Cluster) { c.GatewayIPv6 = zoned })},
		{"update: instance_cooldown 1s", "instance_cooldown", updateC1(func(c *engine.Cluster) { c.InstanceCooldown = time.Second })},

		// Pools.
		{"pool with an empty block", "cidrs", pool2(func(p *engine.Pool) { p.CIDRs = []netip.Prefix{{}} })},
		{"pool block with host bits", "cidrs", pool2(func(p *engine.Pool) { p.CIDRs = []netip.Prefix{hostBits("2001:db8:0:ff::1/64")} })},
		{"pool block IPv4-mapped", "cidrs", pool2(func(p *engine.Pool) { p.CIDRs = []netip.Prefix{hostBits("::ffff:203.0.113.0/120")} })},
		{"pool gateway with zone", "gateway", pool2(func(p *engine.Pool) { p.Gateway = zoned })},
		{"pool gateway IPv4-mapped", "gateway", pool2(func(p *engine.Pool) { p.Gateway = netip.MustParseAddr("::ffff:203.0.113.1") })},
		{"pool gateway of the other family", "gateway", pool2(func(p *engine.Pool) { p.Gateway = netip.MustParseAddr("203.0.113.1") })},
		{"pool mtu -1", "mtu", pool2(func(p *engine.Pool) { p.MTU = -1 })},
		{"pool mtu 2^40", "mtu", pool2(func(p *engine.Pool) { p.MTU = 1 << 40 })},
		{"pool mtu 67", "mtu", pool2(func(p *engine.Pool) { p.MTU = 67 })},
		{"pool exclusion empty", "exclude", pool2(func(p *engine.Pool) { p.Exclude = []netip.Prefix{{}} })},
		{"pool exclusion with host bits", "exclude", pool2(func(p *engine.Pool) { p.Exclude = []netip.Prefix{hostBits("2001:db8:0:ff::1/120")} })},
		{"pool cooldown negative", "cooldown", pool2(func(p *engine.Pool) { p.Cooldown = -time.Second })},
		{"pool without blocks", "cidrs", pool2(func(p *engine.Pool) { p.CIDRs = nil })},
		{"update: pool mtu -1", "mtu", updateV4(func(p *engine.Pool) { p.MTU = -1 })},
		{"update: pool gateway with zone", "gateway", updateV4(func(p *engine.Pool) { p.Gateway = zoned })},
		{"update: pool with an empty block", "cidrs", updateV4(func(p *engine.Pool) { p.CIDRs = append(p.CIDRs, netip.Prefix{}) })},

		// Addresses asked for.
		{"node address with zone", "address", allocAt(engine.ClusterPools("c1"), nodeOwner("n9"), "fe80::1%eth0")},
		{"node address IPv4-mapped", "address", allocAt(engine.ClusterPools("c1"), nodeOwner("n9"), "::ffff:198.51.100.2")},
		{"env address with zone", "address", allocAt(testdb.Pool("c1/v4"), env("e9"), "2001:db8::5%1")},
		{"CheckClaim address with zone", "address", func(ctx context.Context, st *engine.Client) error {
			return st.CheckClaim(ctx, "c1/node", netip.MustParseAddr("2001:db8::5%eth0"))
		}},
		{"CheckClaim address empty", "address", func(ctx context.Context, st *engine.Client) error {
			return st.CheckClaim(ctx, "c1/node", netip.Addr{})
		}},
		{"FindActiveByAddress with zone", "address", func(ctx context.Context, st *engine.Client) error {
			_, err := st.FindActiveByAddress(ctx, zoned)
			return err
		}},
		{"LookupAddress with zone", "address", func(ctx context.Context, st *engine.Client) error {
			_, err := engine.OperatorOf(st).LookupAddress(ctx, zoned, "")
			return err
		}},
		{"set key address with zone", "addresses", func(ctx context.Context, st *engine.Client) error {
			_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "s9"},
				Add: []engine.SetEntry{{Key: "a", Address: netip.MustParseAddr("fe80::5%eth0")}}})
			return err
		}},
		{"set key of family 5", "addresses", func(ctx context.Context, st *engine.Client) error {
			_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "s9"}, Add: []engine.SetEntry{{Key: "a", Family: 5}}})
			return err
		}},
		{"set key address of the other family", "addresses", func(ctx context.Context, st *engine.Client) error {
			_, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "s9"},
				Add: []engine.SetEntry{{Key: "a", Family: 6, Address: netip.MustParseAddr("198.51.100.3")}}})
			return err
		}},

		// Numbers and durations.
		{"MarkReplacement generation 0", "generation", func(ctx context.Context, st *engine.Client) error {
			_, err := st.MarkReplacement(ctx, "c1", nodeOwner("n1"), 0, time.Minute)
			return err
		}},
		{"Release generation -1", "generation", func(ctx context.Context, st *engine.Client) error {
			_, err := st.Release(ctx, "c1", nodeOwner("n1"), -1)
			return err
		}},
		{"Reserve ttl 0", "reservation_ttl", func(ctx context.Context, st *engine.Client) error {
			_, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: nodeOwner("n9")}, 0)
			return err
		}},
		{"Reserve ttl negative", "reservation_ttl", func(ctx context.Context, st *engine.Client) error {
			_, err := st.Reserve(ctx, engine.AllocateRequest{Pool: engine.ClusterPools("c1"), Owner: nodeOwner("n9")}, -time.Hour)
			return err
		}},
		{"ReserveSetEntry ttl negative", "reservation_ttl", func(ctx context.Context, st *engine.Client) error {
			_, err := st.ReserveSetEntry(ctx, "c1", engine.Owner{ID: "s9"}, engine.SetEntry{Key: "a", Pools: []string{"c1/v4"}}, -time.Hour)
			return err
		}},
		{"blocks /64", "block_prefix_length", scale(func(b *engine.BlockScaling) { b.PrefixLength = 64 })},
		{"blocks /65 (2^63 addresses a block)", "block_prefix_length", scale(func(b *engine.BlockScaling) { b.PrefixLength = 65; b.MaxBlocks = 1 })},
		{"blocks /66 x 2", "block_prefix_length", scale(func(b *engine.BlockScaling) { b.PrefixLength = 66; b.MaxBlocks = 2 })},
		{"blocks /129", "block_prefix_length", scale(func(b *engine.BlockScaling) { b.PrefixLength = 129 })},
		{"max_blocks MaxInt", "max_blocks", scale(func(b *engine.BlockScaling) { b.MaxBlocks = math.MaxInt })},
		{"max_blocks 0", "max_blocks", scale(func(b *engine.BlockScaling) { b.MaxBlocks = 0 })},
		{"max_blocks negative", "max_blocks", scale(func(b *engine.BlockScaling) { b.MaxBlocks = -1 })},
		{"min_free NaN", "min_free_fraction", scale(func(b *engine.BlockScaling) { b.MinFree = math.NaN() })},
		{"min_free +Inf", "min_free_fraction", scale(func(b *engine.BlockScaling) { b.MinFree = math.Inf(1) })},
		{"max_free +Inf", "max_free_fraction", scale(func(b *engine.BlockScaling) { b.MaxFree = math.Inf(1) })},
		{"max_free NaN", "max_free_fraction", scale(func(b *engine.BlockScaling) { b.MaxFree = math.NaN() })},
		{"demand negative", "demand", scale(func(b *engine.BlockScaling) { d := int64(-1); b.Demand = &d })},
		{"PreviewNodeBlocks /65", "block_prefix_length", func(ctx context.Context, st *engine.Client) error {
			sc := sc16
			sc.PrefixLength = 65
			_, _, err := st.PreviewNodeBlocks(ctx, "c1", "n1", sc)
			return err
		}},
		{"ListEvents limit -5", "limit", func(ctx context.Context, st *engine.Client) error {
			_, err := engine.OperatorOf(st).ListEvents(ctx, engine.EventFilter{Limit: -5})
			return err
		}},
		{"ListEvents type *", "type", func(ctx context.Context, st *engine.Client) error {
			_, err := engine.OperatorOf(st).ListEvents(ctx, engine.EventFilter{Types: []string{"*"}})
			return err
		}},
		{"ListEvents type of 65 characters", "type", func(ctx context.Context, st *engine.Client) error {
			_, err := engine.OperatorOf(st).ListEvents(ctx, engine.EventFilter{Types: []string{strings.Repeat("a", 65)}})
			return err
		}},
		{"ListAllocations limit -1", "limit", func(ctx context.Context, st *engine.Client) error {
			_, err := engine.OperatorOf(st).ListAllocations(ctx, engine.ListFilter{Limit: -1})
			return err
		}},
		{"ListAllocations state free", "state", func(ctx context.Context, st *engine.Client) error {
			_, err := engine.OperatorOf(st).ListAllocations(ctx, engine.ListFilter{State: "free"})
			return err
		}},
		{"FindStaleLeaks days 0", "stale_days", func(ctx context.Context, st *engine.Client) error {
			_, err := engine.OperatorOf(st).FindStaleLeaks(ctx, "", nil, 0)
			return err
		}},
		{"FindStaleLeaks days 2^40", "stale_days", func(ctx context.Context, st *engine.Client) error {
			_, err := engine.OperatorOf(st).FindStaleLeaks(ctx, "", nil, 1<<40)
			return err
		}},
		{"Reclaim report stale_days 2^40", "report", func(ctx context.Context, st *engine.Client) error {
			_, err := engine.OperatorOf(st).Reclaim(ctx, engine.LeakReport{Kind: engine.LeakStale, StaleDays: 1 << 40}, engine.ReclaimOptions{})
			return err
		}},
		{"Open max_connections negative", "max_connections", func(ctx context.Context, _ *engine.Client) error {
			_, err := engine.Open(ctx, engine.Config{DatabaseURL: "postgres://u@127.0.0.1:1/db", MaxConnections: -1})
			return err
		}},
		{"Open origin with a newline", "origin", func(ctx context.Context, _ *engine.Client) error {
			_, err := engine.Open(ctx, engine.Config{DatabaseURL: "postgres://u@127.0.0.1:1/db", Origin: "envs/prod\nx"})
			return err
		}},
		{"Open connect_timeout negative", "connect_timeout", func(ctx context.Context, _ *engine.Client) error {
			_, err := engine.Open(ctx, engine.Config{DatabaseURL: "postgres://u@127.0.0.1:1/db", ConnectTimeout: -time.Second})
			return err
		}},
	}
}

// rowCounts counts the rows of every table of the IPAM's schema.
func rowCounts(t *testing.T, raw *pgx.Conn) string {
	t.Helper()
	ctx := context.Background()
	rows, err := raw.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 10 {
		t.Fatalf("tables %v: %v", tables, err)
	}
	var q []string
	for _, tb := range tables {
		q = append(q, fmt.Sprintf("SELECT '%s=' || count(*) FROM %s", tb, pgx.Identifier{tb}.Sanitize()))
	}
	rows, err = raw.Query(ctx, strings.Join(q, " UNION ALL "))
	if err != nil {
		t.Fatal(err)
	}
	counts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(counts, " ")
}

// TestBadInputRefusedAtTheEdge: every hostile identifier in every place of
// the Go API that takes one, and every bad prefix, address, number and
// duration, is refused with ErrInvalid naming the field, before any
// statement runs (no SQLSTATE in the message), and the row count of every
// table is unchanged after each.
func TestBadInputRefusedAtTheEdge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, raw := newStore(t, "terraform")
	mkCluster(t, st, "c1", "2001:db8::/48", "", "")
	if _, err := st.CreatePool(ctx, engine.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour, CIDRs: prefixes("198.51.100.0/29")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AllocateNode(ctx, nil, engine.NodeRequest{ClusterID: "c1", NodeID: "n1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplySet(ctx, engine.SetChange{ClusterID: "c1", Owner: engine.Owner{ID: "s1"},
		Add: []engine.SetEntry{{Key: "a", Pools: []string{"c1/v4"}}}}); err != nil {
		t.Fatal(err)
	}
	// Controls: each bad value below changes one field of a call that,
	// unchanged, succeeds.
	for name, ok := range map[string]func(context.Context, *engine.Client) error{
		"cluster": cluster2(func(*engine.Cluster) {}), "pool": pool2(func(*engine.Pool) {}),
		"cluster update": updateC1(func(*engine.Cluster) {}), "pool update": updateV4(func(*engine.Pool) {}),
	} {
		if err := ok(ctx, st); err != nil {
			t.Fatalf("control %s: %v", name, err)
		}
	}
	if err := st.DeleteCluster(ctx, "c2", false); err != nil {
		t.Fatal(err)
	}
	if err := st.DeletePool(ctx, "c1/p2", false); err != nil {
		t.Fatal(err)
	}
	before := rowCounts(t, raw)
	tried, refused := 0, 0
	judge := func(name, field string, err error) {
		t.Helper()
		tried++
		var ie *engine.InvalidError
		switch {
		case err == nil:
			t.Errorf("%s: accepted", name)
		case !errors.Is(err, engine.ErrInvalid) || !errors.As(err, &ie):
			t.Errorf("%s: %v (code %q), want invalid_input", name, err, engine.Code(err))
		case ie.Field != field:
			t.Errorf("%s: names field %q, want %q: %v", name, ie.Field, field, err)
		case strings.Contains(err.Error(), "SQLSTATE"):
			t.Errorf("%s: refused by the database, not at the edge: %v", name, err)
		case len(err.Error()) > 600:
			t.Errorf("%s: a %d-byte message", name, len(err.Error()))
		default:
			refused++
		}
		if after := rowCounts(t, raw); after != before {
			t.Errorf("%s: row counts changed: %s, before %s", name, after, before)
			before = after
		}
	}
	for _, slot := range idSlots() {
		for _, h := range hostileIDs {
			if h.v == "" && slot.optional {
				if err := slot.call(ctx, st, h.v); err != nil && !errors.Is(err, engine.ErrNotFound) && !errors.Is(err, engine.ErrUnavailable) {
					t.Errorf("%s: an empty value is refused: %v", slot.name, err)
				}
				before = rowCounts(t, raw) // it may rightly write (and release) something
				continue
			}
			judge(slot.name+" = "+h.family, slot.field, slot.call(ctx, st, h.v))
		}
	}
	for _, c := range valueCases() {
		judge(c.name, c.field, c.call(ctx, st))
	}
	t.Logf("%d bad inputs through the Go API (%d identifier slots x %d hostile ids, %d other values): %d refused with the field named; rows unchanged: %s",
		tried, len(idSlots()), len(hostileIDs), len(valueCases()), refused, before)
}
