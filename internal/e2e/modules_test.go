package e2e

// Acceptance tests of the onboarding modules in examples/modules: each is
// called from a small root module in a temporary working directory, applied
// with the real provider against a real database, re-planned (the plan must
// be empty) and destroyed.
//
// Modules must be installed before a plan, but `terraform init` also installs
// providers, and with dev_overrides it still asks registry.terraform.io for
// overlayipam/ipam (and fails offline). `terraform get` installs only the
// modules, and dev_overrides supplies the provider, so nothing is downloaded.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/internal/tfcli"
)

// moduleSource is the absolute path of examples/modules/<name>, usable as a
// module source. Terraform copies such a source into .terraform/modules.
func moduleSource(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "modules", name))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// newModuleRoot writes a root module (hcl, with %[1]s standing for the
// absolute path of examples/modules) and installs its modules offline.
func newModuleRoot(t *testing.T, url, hcl string) *workdir {
	t.Helper()
	w := newWorkdir(t, url, fmt.Sprintf(hcl, filepath.Dir(moduleSource(t, "x"))))
	w.run("get")
	return w
}

// outputs returns the root module's outputs from `terraform output -json`.
func (w *workdir) outputs() map[string]json.RawMessage {
	w.t.Helper()
	var raw map[string]struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(w.run("output", "-json"), &raw); err != nil {
		w.t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for k, v := range raw {
		out[k] = v.Value
	}
	return out
}

// output decodes the root output name into v.
func (w *workdir) output(outs map[string]json.RawMessage, name string, v any) {
	w.t.Helper()
	raw, ok := outs[name]
	if !ok {
		w.t.Fatalf("no output %q", name)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		w.t.Fatalf("output %s: %v\n%s", name, err, raw)
	}
}

// requireEmptyPlan fails unless `terraform plan -detailed-exitcode` exits 0.
func (w *workdir) requireEmptyPlan() {
	w.t.Helper()
	out, err := w.try("plan", "-input=false", "-detailed-exitcode")
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		w.t.Fatalf("the plan after apply is not empty:\n%s", out)
	default:
		w.t.Fatalf("terraform plan: %v\n%s", err, out)
	}
}

// needsFunctions skips the test, noting why, under a CLI without provider
// functions, which the node-enrollment module uses.
func needsFunctions(t *testing.T) {
	t.Helper()
	if why := lacks(t, featureFunctions); why != "" {
		tfcli.NoteSkip(t, "the node-enrollment module: "+why)
		t.Skip()
	}
}

// count runs a single-value COUNT query against the test's database.
func count(t *testing.T, url, query string) int {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestModuleClusterBootstrap(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	w := newModuleRoot(t, url, `
module "cluster" {
  source = "%[1]s/cluster-bootstrap"

  name              = "edge"
  prefix            = "2001:db8:e::/48"
  node_cooldown     = "7d"
  instance_cooldown = "2h"
  dns_servers       = ["2001:db8:53::53"]

  ipv4_pools = {
    "public-v4" = {
      cidrs    = ["192.0.2.0/24"]
      exclude  = ["192.0.2.1", "192.0.2.240/28"]
      cooldown = "1h"
    }
    "small-v4" = {
      cidrs = ["198.18.0.0/30", "198.18.1.0/31"]
    }
  }
}

output "cluster" {
  value = module.cluster
}
`)
	w.run("apply", "-input=false", "-auto-approve")

	var got struct {
		ClusterID        string            `json:"cluster_id"`
		Prefix           string            `json:"prefix"`
		NodePrefix       string            `json:"node_prefix"`
		InstancePrefix   string            `json:"instance_prefix"`
		NodeCooldown     string            `json:"node_cooldown"`
		InstanceCooldown string            `json:"instance_cooldown"`
		PoolIDs          map[string]string `json:"ipv4_pool_ids"`
		PoolSizes        map[string]int    `json:"ipv4_pool_sizes"`
		Network          struct {
			GatewayIPv6 string   `json:"gateway_ipv6"`
			MTU         int      `json:"mtu"`
			DNSServers  []string `json:"dns_servers"`
		} `json:"network"`
	}
	w.output(w.outputs(), "cluster", &got)
	if got.ClusterID != "edge" || got.Prefix != "2001:db8:e::/48" || got.NodePrefix != "2001:db8:e::/64" ||
		got.InstancePrefix != "2001:db8:e:1::/64" || got.NodeCooldown != "7d" || got.InstanceCooldown != "2h" {
		t.Errorf("cluster outputs: %+v", got)
	}
	if got.Network.GatewayIPv6 != "fe80::1" || got.Network.MTU != 1420 || !reflect.DeepEqual(got.Network.DNSServers, []string{"2001:db8:53::53"}) {
		t.Errorf("network output: %+v", got.Network)
	}
	wantIDs := map[string]string{"public-v4": "edge/public-v4", "small-v4": "edge/small-v4"}
	// 192.0.2.0/24: 254 usable, minus 192.0.2.1 and 16 in 192.0.2.240/28 (the
	// broadcast address among them); /30: 2 usable; /31: both.
	wantSizes := map[string]int{"public-v4": 254 - 1 - 15, "small-v4": 4}
	if !reflect.DeepEqual(got.PoolIDs, wantIDs) || !reflect.DeepEqual(got.PoolSizes, wantSizes) {
		t.Errorf("pools: ids %v sizes %v, want %v %v", got.PoolIDs, got.PoolSizes, wantIDs, wantSizes)
	}
	if n := count(t, url, `SELECT count(*) FROM ipam_pools WHERE cluster_id = 'edge'`); n != 4 { // node, instance and the two IPv4 pools
		t.Errorf("%d pools in the database, want 4", n)
	}

	w.requireEmptyPlan()
	w.run("destroy", "-input=false", "-auto-approve")
	if n := count(t, url, `SELECT count(*) FROM ipam_clusters`) + count(t, url, `SELECT count(*) FROM ipam_pools`); n != 0 {
		t.Errorf("%d clusters and pools left after destroy", n)
	}
}

func TestModuleNodeEnrollment(t *testing.T) {
	t.Parallel()
	needsFunctions(t) // node-enrollment collapses AllowedIPs with a provider function
	url := setup(t)   // cluster c1, node prefix 2001:db8::/64
	w := newModuleRoot(t, url, `
module "nodes" {
  source = "%[1]s/node-enrollment"

  cluster_id = "c1"
  nodes      = ["node-a", "node-b", "node-c"]
  addresses  = { "node-c" = "2001:db8::100" }
  instance_blocks = {
    "node-a" = ["2001:db8:0:1:aa::/80", "2001:db8:0:1:a::/80", "2001:db8:0:1:b::/80"]
  }
}

output "nodes" {
  value = module.nodes
}
`)
	w.run("apply", "-input=false", "-auto-approve")

	var got struct {
		Addresses  map[string]string   `json:"addresses"`
		CIDRs      map[string]string   `json:"cidrs"`
		AllowedIPs map[string][]string `json:"allowed_ips"`
		IDs        map[string]string   `json:"ids"`
		Peers      map[string]struct {
			Address    string `json:"address"`
			AllowedIPs string `json:"allowed_ips"`
		} `json:"wireguard_peers"`
	}
	w.output(w.outputs(), "nodes", &got)

	nodePrefix := netip.MustParsePrefix("2001:db8::/64")
	db := activeAddresses(t, url)
	seen := map[string]string{}
	for _, node := range []string{"node-a", "node-b", "node-c"} {
		addr := got.Addresses[node]
		a, err := netip.ParseAddr(addr)
		if err != nil || !nodePrefix.Contains(a) {
			t.Errorf("%s: address %q is not in the node prefix %s", node, addr, nodePrefix)
			continue
		}
		if prev, dup := seen[addr]; dup {
			t.Errorf("%s handed out to %s and %s", addr, prev, node)
		}
		seen[addr] = node
		if db[addr] != "node/"+node {
			t.Errorf("%s: %s is %q in the database, want active for node/%s", node, addr, db[addr], node)
		}
		if got.CIDRs[node] != addr+"/128" || got.IDs[node] != "c1/"+node || got.Peers[node].Address != addr {
			t.Errorf("%s: cidr %q, id %q, peer %+v", node, got.CIDRs[node], got.IDs[node], got.Peers[node])
		}
	}
	if got.Addresses["node-c"] != "2001:db8::100" {
		t.Errorf("node-c got %s, want the claimed 2001:db8::100", got.Addresses["node-c"])
	}
	wantAllowed := map[string][]string{
		// Sorted, and a::/80 and b::/80 merged into their /79.
		"node-a": {got.Addresses["node-a"] + "/128", "2001:db8:0:1:a::/79", "2001:db8:0:1:aa::/80"},
		"node-b": {got.Addresses["node-b"] + "/128"},
		"node-c": {"2001:db8::100/128"},
	}
	if !reflect.DeepEqual(got.AllowedIPs, wantAllowed) {
		t.Errorf("allowed_ips = %v, want %v", got.AllowedIPs, wantAllowed)
	}
	if p := got.Peers["node-a"].AllowedIPs; p != strings.Join(wantAllowed["node-a"], ", ") {
		t.Errorf("wireguard_peers[node-a].allowed_ips = %q", p)
	}
	if len(db) != 3 {
		t.Errorf("%d active allocations, want 3: %v", len(db), db)
	}

	w.requireEmptyPlan()
	w.run("destroy", "-input=false", "-auto-approve")
	if db := activeAddresses(t, url); len(db) != 0 {
		t.Errorf("active allocations left after destroy: %v", db)
	}
	if n := count(t, url, `SELECT count(*) FROM ipam_allocations WHERE owner_kind = 'node' AND state = 'cooling'`); n != 3 {
		t.Errorf("%d node addresses cooling after destroy, want 3", n)
	}
}

func TestModuleEnvironmentIPv4(t *testing.T) {
	t.Parallel()
	url := setup(t) // pool c1/v4: 198.51.100.0/24, 203.0.113.0/24
	w := newModuleRoot(t, url, `
module "shop_prod" {
  source = "%[1]s/environment-ipv4"

  pool_id = "c1/v4"
  org_id  = "acme"
  env_id  = "shop-prod"
}

module "blog_prod" {
  source = "%[1]s/environment-ipv4"

  pool_id = "c1/v4"
  org_id  = "acme"
  env_id  = "blog-prod"
  address = "203.0.113.10"
}

output "shop_prod" {
  value = module.shop_prod
}

output "blog_prod" {
  value = module.blog_prod
}
`)
	w.run("apply", "-input=false", "-auto-approve")

	type env struct {
		Address string `json:"address"`
		CIDR    string `json:"cidr"`
		ID      string `json:"id"`
	}
	var shop, blog env
	outs := w.outputs()
	w.output(outs, "shop_prod", &shop)
	w.output(outs, "blog_prod", &blog)
	if a, err := netip.ParseAddr(shop.Address); err != nil || !netip.MustParsePrefix("198.51.100.0/24").Contains(a) ||
		shop.CIDR != shop.Address+"/24" || shop.ID != "c1/v4/shop-prod" {
		t.Errorf("shop_prod = %+v, want an address of the first block 198.51.100.0/24", shop)
	}
	if want := (env{"203.0.113.10", "203.0.113.10/24", "c1/v4/blog-prod"}); blog != want {
		t.Errorf("blog_prod = %+v, want %+v", blog, want)
	}
	db := activeAddresses(t, url)
	if len(db) != 2 || db[shop.Address] != "env_ipv4/shop-prod" || db[blog.Address] != "env_ipv4/blog-prod" {
		t.Errorf("active allocations %v", db)
	}

	w.requireEmptyPlan()
	w.run("destroy", "-input=false", "-auto-approve")
	if db := activeAddresses(t, url); len(db) != 0 {
		t.Errorf("active allocations left after destroy: %v", db)
	}
}

// The three module READMEs' examples, as a reader copies them into one root
// module (each module's source the tree's instead of GitHub's; the cluster
// README's terraform and provider blocks, which the test writes, left
// out), compose: the apply allocates what their comments say, the next
// plan is empty, and the destroy removes the cluster.
func TestModulesCompose(t *testing.T) {
	t.Parallel()
	needsFunctions(t) // node-enrollment collapses AllowedIPs with a provider function
	url := testdb.New(t)
	var hcl strings.Builder
	for _, m := range []string{"cluster-bootstrap", "node-enrollment", "environment-ipv4"} {
		block := pageBlock(t, "examples/modules/"+m+"/README.md", "example")
		if m == "cluster-bootstrap" {
			i := strings.Index(block, "module \"cluster\" {")
			if i < 0 {
				t.Fatalf("%s's example does not declare module \"cluster\":\n%s", m, block)
			}
			block = block[i:]
		}
		hcl.WriteString(replaced(t, block, "github.com/overlayipam/terraform-provider-ipam//examples/modules", "%[1]s") + "\n")
	}
	w := newModuleRoot(t, url, hcl.String())
	w.run("apply", "-input=false", "-auto-approve")
	var peers map[string]struct {
		Address    string `json:"address"`
		AllowedIPs string `json:"allowed_ips"`
	}
	var ipv4, nodePrefix string
	outs := w.outputs()
	w.output(outs, "wireguard_peers", &peers)
	w.output(outs, "shop_prod_ipv4", &ipv4)
	w.output(outs, "node_prefix", &nodePrefix)
	if nodePrefix != "2001:db8:abcd::/64" || len(peers) != 3 || peers["node-c"].Address != "2001:db8:abcd::100" ||
		peers["node-a"].AllowedIPs != peers["node-a"].Address+"/128, 2001:db8:abcd:1:a::/80" {
		t.Errorf("node prefix %s, WireGuard peers %+v: not what the READMEs' comments show", nodePrefix, peers)
	}
	for node, p := range peers {
		if a, err := netip.ParseAddr(p.Address); err != nil || !netip.MustParsePrefix(nodePrefix).Contains(a) {
			t.Errorf("%s: %q is not in the node prefix", node, p.Address)
		}
	}
	if a, err := netip.ParseAddr(ipv4); err != nil || !netip.MustParsePrefix("198.51.100.0/24").Contains(a) || ipv4 == "198.51.100.1" {
		t.Errorf("shop-prod IPv4 %q is not in the pool's first block, or is its excluded .1", ipv4)
	}

	w.requireEmptyPlan()
	w.run("destroy", "-input=false", "-auto-approve")
	if n := count(t, url, `SELECT count(*) FROM ipam_clusters`); n != 0 {
		t.Errorf("%d clusters left after destroy", n)
	}
}

// Bad module inputs fail the plan with the modules' own messages, before
// anything is written.
func TestModuleInputValidation(t *testing.T) {
	t.Parallel()
	needsFunctions(t) // node-enrollment collapses AllowedIPs with a provider function
	url := setup(t)
	w := newModuleRoot(t, url, `
module "cluster" {
  source = "%[1]s/cluster-bootstrap"

  name   = "-bad"
  prefix = "10.0.0.0/8"
  ipv4_pools = {
    "v4" = { cidrs = ["2001:db8::/64"] }
  }
}

module "short_prefix" {
  source = "%[1]s/cluster-bootstrap"

  name          = "ok"
  prefix        = "2001:db8::/96"
  node_cooldown = "a month"
}

module "nodes" {
  source = "%[1]s/node-enrollment"

  cluster_id      = ""
  nodes           = ["node-a", "node-a"]
  instance_blocks = { "node-a" = ["not-a-cidr"] }
}

module "env" {
  source = "%[1]s/environment-ipv4"

  pool_id = "no-slash"
  org_id  = "acme"
  env_id  = "shop prod"
  address = "2001:db8::1"
}
`)
	out, err := w.try("plan", "-input=false")
	if err == nil {
		t.Fatalf("plan with bad module inputs succeeded:\n%s", out)
	}
	// Terraform wraps error messages; compare with whitespace collapsed.
	flat := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{
		"The name must be 1 to 128 characters",
		"The prefix must be an IPv6 CIDR prefix",
		"Every pool needs at least one block in cidrs, and every block must be an IPv4 CIDR prefix",
		"The prefix must be a /64 or shorter",
		"The node_cooldown must be a duration",
		"The cluster_id must be 1 to 128 characters",
		"Node IDs must be unique.",
		"Every instance block must be a CIDR prefix",
		"The pool_id must be <cluster_id>/<pool name>",
		"The env_id must be 1 to 128 characters",
		"The address must be null or a plain IPv4 address",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("plan output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("plan output:\n%s", out)
	}

	// Instance blocks for a node that is not enrolled: the output's
	// precondition fails the plan (checked alone: Terraform skips it when
	// input variables are already invalid).
	w = newModuleRoot(t, url, `
module "stray_blocks" {
  source = "%[1]s/node-enrollment"

  cluster_id      = "c1"
  nodes           = ["node-a"]
  instance_blocks = { "node-x" = ["2001:db8:0:1:a::/80"] }
}
`)
	out, err = w.try("plan", "-input=false")
	if flat := strings.Join(strings.Fields(string(out)), " "); err == nil ||
		!strings.Contains(flat, "instance_blocks names nodes that are not in nodes: node-x.") {
		t.Errorf("plan with instance_blocks for an unknown node: err %v\n%s", err, out)
	}

	if n := count(t, url, `SELECT count(*) FROM ipam_clusters`); n != 1 {
		t.Errorf("%d clusters after failed plans, want only c1", n)
	}
	if db := activeAddresses(t, url); len(db) != 0 {
		t.Errorf("failed plans allocated %v", db)
	}
}
