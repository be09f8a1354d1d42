package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
)

// replaceConfig is two clusters, node n1's address in cluster "in" (with
// a claimed address when claim is set), and instance i1 on node n1, with
// node n1's instance blocks when blocks is set. cbd puts every address
// resource under create_before_destroy.
func replaceConfig(cbd bool, in, claim string, blocks bool) string {
	lc := ""
	if cbd {
		lc = "\n  lifecycle {\n    create_before_destroy = true\n  }"
	}
	claimLine := ""
	if claim != "" {
		claimLine = fmt.Sprintf("\n  address    = %q", claim)
	}
	hcl := fmt.Sprintf(`resource "ipam_cluster" "a" {
  name   = "a"
  prefix = "2001:db8:a::/48"
}
resource "ipam_cluster" "b" {
  name   = "b"
  prefix = "2001:db8:b::/48"
}
resource "ipam_node_address" "n1" {
  cluster_id = ipam_cluster.%s.id
  node_id    = "n1"%s%s
}
resource "ipam_instance_address" "i1" {
  cluster_id  = ipam_cluster.a.id
  instance_id = "i1"
  org_id      = "o1"
  env_id      = "e1"
  node_id     = "n1"%s
}
`, in, claimLine, lc, lc)
	if blocks {
		hcl += `resource "ipam_node_instance_blocks" "n1" {
  cluster_id    = ipam_cluster.a.id
  node_id       = "n1"
  block_prefix_length = 124
  demand              = 2
}
`
	}
	return hcl
}

// Replacements keep or move the owner's address in both orders: Terraform's
// own (-replace), a claimed address changed, a cluster_id changed, and an
// instance moving into its node's blocks; with and without
// create_before_destroy. Each ends with one active address per owner, the
// old one cooling for its owner, and an empty plan.
func TestReplacementsInBothOrders(t *testing.T) {
	t.Parallel()
	for _, cbd := range []bool{false, true} {
		t.Run(fmt.Sprintf("create_before_destroy=%v", cbd), func(t *testing.T) {
			url := testdb.New(t)
			w := newWorkdir(t, url, replaceConfig(cbd, "a", "", false))
			w.run("apply", "-input=false", "-auto-approve")
			first := w.addresses("")
			node, inst := first["ipam_node_address.n1"], first["ipam_instance_address.i1"]
			if node != "2001:db8:a::1" {
				t.Fatalf("n1 got %s, want 2001:db8:a::1", node)
			}
			w.run("plan", "-input=false") // a refresh confirms both

			// Terraform's own replacement of an unchanged resource keeps its
			// address, which the saved plan shows.
			// So does its id. (The time it was allocated is "(known after
			// apply)": destroying first releases the address, and the create
			// takes it back, allocated anew.)
			w.run("plan", "-input=false", "-replace=ipam_node_address.n1", "-out=replace.tfplan")
			if got := w.addresses("replace.tfplan")["ipam_node_address.n1"]; got != node {
				t.Errorf("-replace: the plan shows %q for n1, want its own %s", got, node)
			}
			if was, planned := w.values("", "id")["ipam_node_address.n1"], w.values("replace.tfplan", "id")["ipam_node_address.n1"]; planned != was {
				t.Errorf("-replace: the plan shows n1's id as %q, want %q, which the apply keeps", planned, was)
			}
			w.run("apply", "-input=false", "replace.tfplan")
			if got := w.addresses("")["ipam_node_address.n1"]; got != node {
				t.Errorf("-replace: n1 has %s, want its own %s back", got, node)
			}
			expectOwners(t, url, "node/n1", node)

			// A claimed address changed: the new one, the old one cools for n1.
			w.write(replaceConfig(cbd, "a", "2001:db8:a::9", false))
			if out := string(w.run("apply", "-input=false", "-auto-approve")); strings.Contains(out, "Managed Elsewhere") {
				t.Errorf("claim: the apply warns that the owner is managed elsewhere, though it replaces it:\n%s", out)
			}
			if got := w.addresses("")["ipam_node_address.n1"]; got != "2001:db8:a::9" {
				t.Errorf("claim: n1 has %s, want 2001:db8:a::9", got)
			}
			expectOwners(t, url, "node/n1", "2001:db8:a::9")

			// cluster_id changed: an address of cluster b.
			w.write(replaceConfig(cbd, "b", "", false))
			w.run("apply", "-input=false", "-auto-approve")
			if got := w.addresses("")["ipam_node_address.n1"]; !strings.HasPrefix(got, "2001:db8:b::") {
				t.Errorf("cluster_id: n1 has %s, want one of cluster b", got)
			}

			// The instance moves into its node's blocks: the apply that makes
			// them leaves it alone, the next one replaces it.
			w.write(replaceConfig(cbd, "b", "", true))
			w.run("apply", "-input=false", "-auto-approve")
			if got := w.addresses("")["ipam_instance_address.i1"]; got != inst {
				t.Errorf("blocks: the apply that made them moved i1 to %s", got)
			}
			w.run("apply", "-input=false", "-auto-approve")
			got := w.addresses("")["ipam_instance_address.i1"]
			if got == inst {
				t.Errorf("blocks: i1 kept %s, outside n1's blocks", got)
			}
			expectOwners(t, url, "instance/i1", got)
			if out := w.run("plan", "-input=false", "-detailed-exitcode"); !strings.Contains(string(out), "No changes") {
				t.Fatalf("plan after the replacements is not empty:\n%s", out)
			}
		})
	}
}

// expectOwners: owner (kind/id) holds exactly the active address want.
func expectOwners(t *testing.T, url, owner, want string) {
	t.Helper()
	var held []string
	for a, o := range activeAddresses(t, url) {
		if o == owner {
			held = append(held, a)
		}
	}
	if len(held) != 1 || held[0] != want {
		t.Errorf("%s holds %v, want exactly %s", owner, held, want)
	}
}

// A saved plan of a new address-set key that the plan held in a later pool
// of its list (the first was full) applies as planned after the first pool
// has room again: Terraform's re-plan at apply finds the hold where the plan
// took it. It took a new hold in the first pool, and the apply failed with
// "Provider produced inconsistent final plan".
func TestSavedSetPlanKeepsItsPool(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	pools := `resource "ipam_cluster" "c1" {
  name   = "c1"
  prefix = "2001:db8:c1::/48"
}
resource "ipam_pool" "a" {
  cluster_id = ipam_cluster.c1.id
  name       = "a"
  cidrs      = ["198.51.100.8/32"]
  cooldown   = "0s"
}
resource "ipam_pool" "b" {
  cluster_id = ipam_cluster.c1.id
  name       = "b"
  cidrs      = ["203.0.113.8/29"]
}
`
	filler := `resource "ipam_env_ipv4" "fill" {
  pool_id = ipam_pool.a.id
  org_id  = "o1"
  env_id  = "fill"
}
`
	ops := newWorkdir(t, url, pools+filler)
	ops.run("apply", "-input=false", "-auto-approve") // pool a's one address taken
	vm := newWorkdir(t, url, `resource "ipam_address_set" "vm" {
  cluster_id = "c1"
  owner_id   = "vm-1"
  addresses = {
    pub = { pools = ["c1/a", "c1/b"] }
  }
}
`)
	vm.run("plan", "-input=false", "-out=vm.tfplan")
	planned := vm.run("show", "-json", "vm.tfplan")
	if !strings.Contains(string(planned), `"address":"203.0.113.9"`) {
		t.Fatalf("the plan does not hold 203.0.113.9 in pool b:\n%s", planned)
	}
	ops.write(pools)
	ops.run("apply", "-input=false", "-auto-approve") // pool a has room again
	vm.run("apply", "-input=false", "vm.tfplan")
	if got := activeAddresses(t, url)["203.0.113.9"]; got != "set/vm-1#pub" {
		t.Errorf("after the saved plan's apply, 203.0.113.9 is held by %q, want set/vm-1#pub", got)
	}
}

// A cluster renamed (which replaces it) keeping its prefix: the plan of the
// new cluster's create (Terraform plans a replacement's create again, without
// the old state) no longer fails because its prefix overlaps the old cluster,
// which is this same configuration's and which the apply destroys first; the
// apply replaces it, and the next plan is empty. (The provider warns of the
// overlap there, which Terraform 1.11 does not show.) Another configuration's
// cluster with the prefix still fails the plan.
func TestRenamedClusterIsReplaced(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	cluster := func(name string) string {
		return fmt.Sprintf("resource \"ipam_cluster\" \"c\" {\n  name   = %q\n  prefix = \"2001:db8:77::/48\"\n}\n", name)
	}
	w := newWorkdir(t, url, cluster("prod"))
	w.run("apply", "-input=false", "-auto-approve")
	w.write(cluster("prod2"))
	if out := string(w.run("plan", "-input=false")); !strings.Contains(out, "must be replaced") {
		t.Errorf("the rename's plan does not replace the cluster:\n%s", out)
	}
	w.run("apply", "-input=false", "-auto-approve")
	if got := queryMap(t, url, `SELECT id, host(prefix) FROM ipam_clusters`); len(got) != 1 || got["prod2"] == "" {
		t.Errorf("clusters after the rename: %v, want prod2 alone", got)
	}
	if out := w.run("plan", "-input=false", "-detailed-exitcode"); !strings.Contains(string(out), "No changes") {
		t.Errorf("the plan after the rename is not empty:\n%s", out)
	}
	other := newWorkdir(t, url, cluster("prod3"))
	if out, err := other.try("plan", "-input=false"); err == nil || !strings.Contains(string(out), "Invalid Cluster") {
		t.Errorf("a cluster overlapping another configuration's: %v, want Invalid Cluster:\n%s", err, out)
	}
}

// A cluster's prefix changed (which replaces it, under the same name): the
// old cluster's destroy deletes its operator pools. The plan showed the
// cluster replaced alone, and the pools were gone after the apply, though
// the state kept them (found by a trial as a new team). The replacement's
// id is unknown until the apply, so that a pool whose cluster_id refers to
// it is replaced with it, as the plan shows; the plan warns of every pool
// the destroy deletes, one that names the cluster as a literal string
// among them, which the next plan creates again.
func TestClusterPrefixChangeReplacesItsPools(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	cfg := func(prefix string) string {
		return fmt.Sprintf(`resource "ipam_cluster" "c" {
  name   = "cx"
  prefix = %q
}
resource "ipam_pool" "v4" {
  cluster_id = ipam_cluster.c.id
  name       = "priv-v4"
  cidrs      = ["10.9.0.0/28"]
}
resource "ipam_pool" "lit" {
  cluster_id = "cx"
  name       = "lit-v4"
  cidrs      = ["10.9.1.0/28"]
  depends_on = [ipam_cluster.c]
}
`, prefix)
	}
	w := newWorkdir(t, url, cfg("2001:db8:300::/56"))
	w.run("apply", "-input=false", "-auto-approve")
	w.write(cfg("2001:db8:301::/56"))
	out := string(w.run("plan", "-input=false", "-no-color"))
	for _, want := range []string{"ipam_cluster.c must be replaced", "ipam_pool.v4 must be replaced", "Replacing the Cluster Deletes Its Pools",
		"cx/lit-v4 (0 cooling)", "cx/priv-v4 (0 cooling)", "Plan: 2 to add, 0 to change, 2 to destroy"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("the prefix change's plan does not say %q:\n%s", want, out)
		}
	}
	w.run("apply", "-input=false", "-auto-approve")
	if got := queryMap(t, url, `SELECT id, host(prefix) FROM ipam_clusters`); got["cx"] != "2001:db8:301::" {
		t.Errorf("clusters after the prefix change: %v, want cx with 2001:db8:301::/56", got)
	}
	if got := queryMap(t, url, `SELECT id, name FROM ipam_pools WHERE cluster_id = 'cx' AND name NOT IN ('node', 'instance')`); len(got) != 1 || got["cx/priv-v4"] == "" {
		t.Errorf("operator pools after the prefix change: %v, want cx/priv-v4 alone (replaced with the cluster)", got)
	}
	if out := string(w.run("plan", "-input=false", "-no-color")); !strings.Contains(out, "ipam_pool.lit will be created") ||
		!strings.Contains(out, "Plan: 1 to add, 0 to change, 0 to destroy") {
		t.Errorf("the plan after the prefix change does not create the literal cluster's pool again, alone:\n%s", out)
	}
}

// A saved plan of create_before_destroy replacements applied after
// reservation_ttl has passed keeps every address: the replacements' marks
// outlive the plan's holds (at least a week). The mark lasted
// reservation_ttl, so the apply's re-plan found the owner managed by this
// configuration with no mark, showed its address unknown, and Terraform
// failed with "Provider produced inconsistent final plan", leaving the old
// objects deposed in the state, which no later apply could replace (found by
// a trial as a Terraform power user).
func TestSavedReplacementPlanAppliedAfterTheHoldsExpired(t *testing.T) {
	t.Parallel()
	url := setup(t)
	const hcl = `resource "ipam_instance_address" "i" {
  cluster_id  = "c1"
  instance_id = "late-1"
  org_id      = "o1"
  env_id      = "e1"
  lifecycle {
    create_before_destroy = true
  }
}
resource "ipam_address_set" "s" {
  cluster_id = "c1"
  owner_id   = "late-set"
  addresses = {
    pub = { pools = ["c1/v4"] }
  }
  lifecycle {
    create_before_destroy = true
  }
}
`
	w := newWorkdirWith(t, url, `  reservation_ttl = "2s"`, hcl)
	w.run("apply", "-input=false", "-auto-approve")
	before := activeAddresses(t, url)
	w.run("plan", "-input=false", "-replace=ipam_instance_address.i", "-replace=ipam_address_set.s", "-out=tfplan")
	time.Sleep(3 * time.Second) // past reservation_ttl
	if out, err := w.try("apply", "-input=false", "tfplan"); err != nil {
		t.Fatalf("the saved replacement plan applied after reservation_ttl: %v\n%s", err, out)
	}
	if after := activeAddresses(t, url); !equalMaps(after, before) {
		t.Errorf("the replacements changed the addresses: %v, want %v", after, before)
	}
	if out, err := w.try("plan", "-input=false", "-detailed-exitcode"); err != nil {
		t.Fatalf("the plan after the replacements is not empty: %v\n%s", err, out)
	}
}

// A create_before_destroy replacement that moves an instance or an
// environment's IPv4 to another org plans and applies without a warning that
// it fails, as any replacement that moves the owner does, and the instance
// gets another address (the old one cools for the old tenant). A trial as a
// Terraform power user reported such a warning; this is the case it named,
// which does not show it.
func TestReplacementToAnotherTenantPlansQuietly(t *testing.T) {
	t.Parallel()
	url := setup(t)
	cfg := func(org string) string {
		return "resource \"ipam_instance_address\" \"i\" {\n  cluster_id  = \"c1\"\n  instance_id = \"moving-1\"\n  org_id      = \"" + org +
			"\"\n  env_id      = \"e1\"\n  lifecycle {\n    create_before_destroy = true\n  }\n}\n" +
			"resource \"ipam_env_ipv4\" \"e\" {\n  pool_id = \"c1/v4\"\n  org_id  = \"" + org +
			"\"\n  env_id  = \"moving-env\"\n  lifecycle {\n    create_before_destroy = true\n  }\n}\n"
	}
	w := newWorkdir(t, url, cfg("o1"))
	w.run("apply", "-input=false", "-auto-approve")
	before := w.addresses("")["ipam_instance_address.i"]
	w.write(cfg("o2"))
	plan := strings.Join(strings.Fields(string(w.run("plan", "-input=false"))), " ")
	if strings.Contains(plan, "Cannot Be Reserved") || strings.Contains(plan, "fails with the same error") {
		t.Errorf("the plan of a replacement to another org warns that it fails:\n%s", plan)
	}
	applied := strings.Join(strings.Fields(string(w.run("apply", "-input=false", "-auto-approve"))), " ")
	if strings.Contains(applied, "Cannot Be Reserved") || strings.Contains(applied, "fails with the same error") {
		t.Errorf("the apply of a replacement to another org warns that it fails:\n%s", applied)
	}
	if after := w.addresses("")["ipam_instance_address.i"]; after == "" || after == before {
		t.Errorf("after the move to another org: %q (was %q), want another address", after, before)
	}
}
