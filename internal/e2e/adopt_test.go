package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// adoptGuide shows the list blocks the TestQuery tests run.
const adoptGuide = "docs/guides/adopting-existing-allocations.md"

// Allocations made outside Terraform (the scheduler's instances, an
// operator's node and IPv4 addresses) are adopted in bulk: `terraform query
// -generate-config-out` writes their import blocks and configuration, the
// apply imports them without changing any, and the next plan is empty.
func TestQueryAdoptsAllocationsMadeOutsideTerraform(t *testing.T) {
	t.Parallel()
	requireCLI(t, featureQuery)
	url := setup(t)
	ctx := context.Background()
	scheduler := openAs(t, url, "scheduler")
	want := map[string]string{} // owner id -> address
	for i := range 3 {
		n, err := scheduler.AllocateNode(ctx, nil, ipam.NodeRequest{ClusterID: "c1", NodeID: fmt.Sprintf("node-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("node-%d", i)] = n.Address.String()
		a, err := scheduler.AllocateInstance(ctx, nil, ipam.InstanceRequest{ClusterID: "c1", InstanceID: fmt.Sprintf("vm-%d", i),
			OrgID: "acme", EnvID: "shop-prod", NodeID: fmt.Sprintf("node-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("vm-%d", i)] = a.Address.String()
	}
	e, err := scheduler.AllocateEnvIPv4(ctx, nil, ipam.EnvIPv4Request{ClusterID: "c1", Pool: "v4", OrgID: "acme", EnvID: "shop",
		Address: netip.MustParseAddr("203.0.113.7")})
	if err != nil {
		t.Fatal(err)
	}
	want["shop"] = e.Address.String()

	w := newWorkdir(t, url, "")
	query := `
list "ipam_node_address" "nodes" {
  provider         = ipam
  include_resource = true
  config {
    cluster_id = "c1"
  }
}

` + replaced(t, pageBlock(t, adoptGuide, "adopt-instances"), `"fra1"`, `"c1"`) + `
list "ipam_env_ipv4" "ipv4" {
  provider         = ipam
  include_resource = true
  config {
    pool_id = "c1/v4"
  }
}
`
	if err := os.WriteFile(filepath.Join(w.dir, "adopt.tfquery.hcl"), []byte(query), 0o600); err != nil {
		t.Fatal(err)
	}
	out := w.run("query", "-generate-config-out=adopted.tf")
	for owner := range want {
		if !strings.Contains(string(out), owner) {
			t.Errorf("terraform query did not list %s:\n%s", owner, out)
		}
	}
	generated, err := os.ReadFile(filepath.Join(w.dir, "adopted.tf"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(generated), "import {"); n != len(want) {
		t.Fatalf("adopted.tf has %d import blocks, want %d:\n%s", n, len(want), generated)
	}
	w.run("apply", "-auto-approve")
	w.requireEmptyPlan()

	// The state holds exactly the allocations that were made, unchanged.
	got := map[string]string{}
	for _, r := range w.ownedResources() {
		_, id, _ := strings.Cut(r.Owner, "/")
		got[id] = r.Address
	}
	for owner, addr := range want {
		if got[owner] != addr {
			t.Errorf("%s: adopted with %q, allocated %s", owner, got[owner], addr)
		}
	}
	if len(got) != len(want) {
		t.Errorf("state holds %d allocations, want %d: %v", len(got), len(want), got)
	}
}

// What a cluster is made of is adopted the same way: the cluster, its
// operator pool, an address set and a node's instance blocks, all made
// through the core, are found by `terraform query`, imported by the apply
// without a change to any address or block, and the next plan is empty.
func TestQueryAdoptsClustersPoolsSetsAndBlocks(t *testing.T) {
	t.Parallel()
	requireCLI(t, featureQuery)
	url := setup(t)
	ctx := context.Background()
	op := openAs(t, url, "ipamctl")
	if _, err := op.ApplySet(ctx, ipam.SetChange{ClusterID: "c1", Owner: ipam.Owner{ID: "web", OrgID: "acme", EnvID: "prod"},
		Add: []ipam.SetEntry{{Key: "v6", Family: 6}, {Key: "v4", Pools: []string{"c1/v4"}}}}); err != nil {
		t.Fatal(err)
	}
	demand := int64(20)
	if _, err := op.ScaleNodeBlocks(ctx, "c1", "node-1", ipam.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.5,
		MaxBlocks: 8, Demand: &demand}); err != nil {
		t.Fatal(err)
	}
	blocks := func() string {
		nb, err := op.GetNodeBlocks(ctx, "c1", "node-1")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(nb.Blocks)
	}
	addrsBefore, blocksBefore := activeAddresses(t, url), blocks()

	w := newWorkdir(t, url, "")
	query := replaced(t, pageBlock(t, adoptGuide, "adopt-cluster"), `"fra1"`, `"c1"`) + `
list "ipam_address_set" "acme" {
  provider         = ipam
  include_resource = true
  config {
    org_id = "acme"
  }
}

list "ipam_node_instance_blocks" "nodes" {
  provider         = ipam
  include_resource = true
  config {
    cluster_id = "c1"
  }
}
`
	if err := os.WriteFile(filepath.Join(w.dir, "adopt.tfquery.hcl"), []byte(query), 0o600); err != nil {
		t.Fatal(err)
	}
	out := w.run("query", "-generate-config-out=adopted.tf")
	for _, found := range []string{"c1", "c1/v4", "c1/web", "c1/node-1"} {
		if !strings.Contains(string(out), found) {
			t.Errorf("terraform query did not list %s:\n%s", found, out)
		}
	}
	generated, err := os.ReadFile(filepath.Join(w.dir, "adopted.tf"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(generated), "import {"); n != 4 {
		t.Fatalf("adopted.tf has %d import blocks, want 4 (cluster, pool, set, blocks):\n%s", n, generated)
	}
	w.run("apply", "-auto-approve")
	w.requireEmptyPlan()

	var types []string
	for _, line := range strings.Fields(string(w.run("state", "list"))) {
		types = append(types, strings.SplitN(line, ".", 2)[0])
	}
	slices.Sort(types)
	if got := strings.Join(types, " "); got != "ipam_address_set ipam_cluster ipam_node_instance_blocks ipam_pool" {
		t.Errorf("state holds %s", got)
	}
	if after := activeAddresses(t, url); !maps.Equal(after, addrsBefore) {
		t.Errorf("adoption changed allocations:\nbefore %v\nafter  %v", addrsBefore, after)
	}
	if after := blocks(); after != blocksBefore {
		t.Errorf("adoption changed node-1's blocks: before %s, after %s", blocksBefore, after)
	}

	// A bad filter is refused at validate time, naming the attribute and what is valid.
	bad := "list \"ipam_pool\" \"bad\" {\n  provider = ipam\n  config {\n    category = \"v6\"\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(w.dir, "adopt.tfquery.hcl"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := w.try("query"); err == nil || !strings.Contains(string(out), "category") || !strings.Contains(string(out), `"ipv6"`) {
		t.Errorf("a query with category \"v6\" gave %v:\n%s", err, out)
	}
}

// What a Terraform state already holds is not offered for adoption: a
// configuration's pool and node address, and the cluster once its refresh
// read it, are left out of `terraform query` (the scheduler's allocation
// and the core's pool are listed); `include_managed = true` lists them too,
// each marked and warned about, naming the configuration. A listing
// confirms nothing: the scheduler's allocation it read is still held by no
// state afterwards (so no stale report or release rule starts to treat it
// as a state's).
func TestQueryLeavesOutWhatAStateHolds(t *testing.T) {
	t.Parallel()
	requireCLI(t, featureQuery)
	url := setup(t)
	ctx := context.Background()
	scheduler := openAs(t, url, "scheduler")
	if _, err := scheduler.AllocateNode(ctx, nil, ipam.NodeRequest{ClusterID: "c1", NodeID: "sched-1"}); err != nil {
		t.Fatal(err)
	}
	managing := newWorkdir(t, url, `
resource "ipam_pool" "extra" {
  cluster_id = "c1"
  name       = "extra"
  cidrs      = ["192.0.2.0/24"]
}
resource "ipam_node_address" "tf" {
  cluster_id = "c1"
  node_id    = "tf-1"
}
import {
  to = ipam_cluster.c1
  id = "c1"
}
resource "ipam_cluster" "c1" {
  name   = "c1"
  prefix = "2001:db8::/48"
}
`)
	managing.run("apply", "-input=false", "-auto-approve")

	w := newWorkdir(t, url, "")
	query := func(include bool, types ...string) string {
		t.Helper()
		cfg := ""
		if include {
			cfg = "  config {\n    include_managed = true\n  }\n"
		}
		q := ""
		for _, typ := range types {
			q += "list \"" + typ + "\" \"all\" {\n  provider = ipam\n" + cfg + "}\n"
		}
		if err := os.WriteFile(filepath.Join(w.dir, "adopt.tfquery.hcl"), []byte(q), 0o600); err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(string(w.run("query"))), " ")
	}
	all := []string{"ipam_cluster", "ipam_pool", "ipam_node_address"}
	out := query(false, all...)
	for _, listed := range []string{"sched-1", "c1/v4"} {
		if !strings.Contains(out, listed) {
			t.Errorf("terraform query did not list %s:\n%s", listed, out)
		}
	}
	for _, held := range []string{"tf-1", "c1/extra", "list.ipam_cluster.all name="} {
		if strings.Contains(out, held) {
			t.Errorf("terraform query listed %s, which another state holds:\n%s", held, out)
		}
	}
	out = query(true, all...)
	for _, held := range []string{"tf-1 (2001:db8::", "c1/extra (managed elsewhere)", "name=c1 c1 (managed elsewhere)", "Managed by Another Configuration",
		"terraform state rm"} {
		if !strings.Contains(out, held) {
			t.Errorf("terraform query with include_managed lacks %q:\n%s", held, out)
		}
	}
	// The guide's block: the pools, with those another state holds.
	if err := os.WriteFile(filepath.Join(w.dir, "adopt.tfquery.hcl"), []byte(pageBlock(t, adoptGuide, "adopt-managed")), 0o600); err != nil {
		t.Fatal(err)
	}
	if out = strings.Join(strings.Fields(string(w.run("query"))), " "); !strings.Contains(out, "c1/extra (managed elsewhere)") ||
		!strings.Contains(out, "the Terraform configuration in \""+managing.dir+"\"") {
		t.Errorf("the warning on the pool does not name the configuration that created it:\n%s", out)
	}
	if n := count(t, url, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'sched-1' AND confirmed_at IS NOT NULL`); n != 0 {
		t.Errorf("listing confirmed the scheduler's allocation: no state holds it")
	}
}

// A cluster and a pool that exist already, made outside any Terraform
// state: a configuration declaring them fails at plan with the create's own
// refusal (already exists; import it), instead of planning creates that
// fail at apply; imported, they plan no change.
func TestPlanRefusesWhatExistsAlready(t *testing.T) {
	t.Parallel()
	url := setup(t) // cluster c1 and its pool c1/v4, made through the Go API
	hcl := `resource "ipam_cluster" "c" {
  name   = "c1"
  prefix = "2001:db8::/48"
}
resource "ipam_pool" "v4" {
  cluster_id = ipam_cluster.c.id
  name       = "v4"
  cooldown   = "1h"
  cidrs      = ["198.51.100.0/24", "203.0.113.0/24"]
}
`
	w := newWorkdir(t, url, hcl)
	out, err := w.try("plan", "-input=false")
	said := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{`cluster "c1" already exists; import it to manage it`, "Unable to Create Cluster: Already Exists"} {
		if err == nil || !strings.Contains(said, want) {
			t.Errorf("the plan of a cluster that exists: %v, want %q:\n%s", err, want, out)
		}
	}
	w.run("import", "-input=false", "ipam_cluster.c", "c1")
	out, err = w.try("plan", "-input=false")
	said = strings.Join(strings.Fields(string(out)), " ")
	if err == nil || !strings.Contains(said, `pool "c1/v4" already exists; import it to manage it`) {
		t.Errorf("the plan of a pool that exists: %v, want its refusal:\n%s", err, out)
	}
	w.run("import", "-input=false", "ipam_pool.v4", "c1/v4")
	w.run("plan", "-input=false", "-detailed-exitcode")
}

// A cluster's new gateway_ipv6 that a node holds fails at plan with the
// update's own refusal (the gateway is never handed out), where the plan
// showed a clean update that the apply then refused.
func TestPlanRefusesAHeldGateway(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	cluster := func(gw string) string {
		return fmt.Sprintf(`resource "ipam_cluster" "c" {
  name         = "gw1"
  prefix       = "2001:db8:56::/48"
  gateway_ipv6 = %q
}
resource "ipam_node_address" "e" {
  cluster_id = ipam_cluster.c.id
  node_id    = "e"
  address    = "2001:db8:56::2"
}
`, gw)
	}
	w := newWorkdir(t, url, cluster("fe80::1"))
	w.run("apply", "-input=false", "-auto-approve")
	w.write(cluster("2001:db8:56::2"))
	out, err := w.try("plan", "-input=false")
	if said := strings.Join(strings.Fields(string(out)), " "); err == nil ||
		!strings.Contains(said, "2001:db8:56::2 is held by node e; the gateway is never handed out") {
		t.Errorf("the plan of a gateway a node holds: %v, want the update's refusal:\n%s", err, out)
	}
}
