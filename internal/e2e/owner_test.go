package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
)

// ownerConfig: a cluster made by the core (c1, pool c1/v4, see setup), a
// node address and an environment's IPv4.
const ownerConfig = `resource "ipam_node_address" "n1" {
  cluster_id = "c1"
  node_id    = "n1"
}
resource "ipam_env_ipv4" "e1" {
  pool_id = "c1/v4"
  org_id  = "o1"
  env_id  = "e1"
}
`

// One owner, one configuration: a second working directory (its own state)
// that declares owners the first one manages is refused with owner_conflict
// at apply, warned at plan, and writes nothing, even before the first
// configuration's next refresh. A killed apply (its state lost) recovers
// with the next apply from its own directory, or from another one given
// the first one's origin.
func TestOneOwnerOneConfiguration(t *testing.T) {
	url := setup(t)
	first := newWorkdir(t, url, ownerConfig)
	first.run("apply", "-input=false", "-auto-approve")
	held := activeAddresses(t, url)

	// Before any refresh of the first configuration.
	second := newWorkdir(t, url, ownerConfig)
	plan := string(second.run("plan", "-input=false"))
	if !strings.Contains(plan, "Is Managed Elsewhere") || !strings.Contains(plan, "owner_conflict") {
		t.Errorf("the second configuration's plan does not warn:\n%s", plan)
	}
	out, err := second.try("apply", "-input=false", "-auto-approve")
	if err == nil || !strings.Contains(string(out), "owner_conflict") || !strings.Contains(string(out), "terraform import") {
		t.Fatalf("the second configuration's apply: %v\n%s", err, out)
	}
	if got := second.addresses(""); len(got) != 0 {
		t.Errorf("the second configuration's state holds %v", got)
	}
	if now := activeAddresses(t, url); len(now) != len(held) {
		t.Errorf("active allocations %v, want %v", now, held)
	}
	// Imported there instead, while the first configuration holds them:
	// each import warns, naming the first configuration. Then the second
	// one lets them go again (state rm), as the warning's advice undone.
	for _, imp := range [][2]string{{"ipam_node_address.n1", "c1/n1"}, {"ipam_env_ipv4.e1", "c1/v4/e1"}} {
		out := strings.Join(strings.Fields(string(second.run("import", "-input=false", imp[0], imp[1]))), " ")
		if !strings.Contains(out, "Managed by Another Configuration") || !strings.Contains(out, `the Terraform configuration in "`+first.dir+`"`) {
			t.Errorf("terraform import %s %s in the second configuration did not warn:\n%s", imp[0], imp[1], out)
		}
		second.run("state", "rm", imp[0])
	}

	// A killed apply: its creates committed, its state never saved.
	killed := newWorkdir(t, url, strings.ReplaceAll(strings.ReplaceAll(ownerConfig, "n1", "n2"), "e1", "e2"))
	killed.run("apply", "-input=false", "-auto-approve")
	want := killed.addresses("")
	loseState := func(w *workdir) {
		if err := os.Remove(filepath.Join(w.dir, "terraform.tfstate")); err != nil {
			t.Fatal(err)
		}
	}
	loseState(killed)
	// The next apply from the same directory adopts every allocation.
	killed.run("apply", "-input=false", "-auto-approve")
	if got := killed.addresses(""); !equalMaps(got, want) {
		t.Fatalf("the next apply from the same directory: %v, want %v", got, want)
	}
	loseState(killed)
	// Resumed elsewhere: refused, naming the origin to give; given it, one
	// apply adopts every allocation.
	elsewhere := newWorkdir(t, url, strings.ReplaceAll(strings.ReplaceAll(ownerConfig, "n1", "n2"), "e1", "e2"))
	out, err = elsewhere.try("apply", "-input=false", "-auto-approve")
	if err == nil || !strings.Contains(strings.Join(strings.Fields(string(out)), " "), "set the provider's origin") {
		t.Fatalf("resumed elsewhere without the origin: %v\n%s", err, out)
	}
	elsewhere.env = []string{"IPAM_ORIGIN=" + killed.dir}
	elsewhere.run("apply", "-input=false", "-auto-approve")
	if got := elsewhere.addresses(""); !equalMaps(got, want) {
		t.Fatalf("resumed elsewhere with the origin: %v, want %v", got, want)
	}
	if out := elsewhere.run("plan", "-input=false", "-detailed-exitcode"); !strings.Contains(string(out), "No changes") {
		t.Fatalf("plan after the recovery is not empty:\n%s", out)
	}
}

// An import of a cluster, a pool or an address set that another
// configuration created warns, naming that configuration, as an address's
// does (TestOneOwnerOneConfiguration); the configuration that created them
// imports them again without a warning, and plans no change.
func TestImportWarnsWhatAnotherConfigurationCreated(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	hcl := `resource "ipam_cluster" "c7" {
  name   = "c7"
  prefix = "2001:db8:c7::/48"
}
resource "ipam_pool" "v4" {
  cluster_id = ipam_cluster.c7.id
  name       = "v4"
  cidrs      = ["198.51.100.64/29"]
}
resource "ipam_address_set" "vm" {
  cluster_id = ipam_cluster.c7.id
  owner_id   = "vm-1"
  addresses = {
    pub = { pools = [ipam_pool.v4.id] }
  }
}
`
	first := newWorkdir(t, url, hcl)
	first.run("apply", "-input=false", "-auto-approve")
	imports := [][2]string{{"ipam_cluster.c7", "c7"}, {"ipam_pool.v4", "c7/v4"}, {"ipam_address_set.vm", "c7/vm-1"}}
	second := newWorkdir(t, url, hcl)
	for _, imp := range imports {
		out := strings.Join(strings.Fields(string(second.run("import", "-input=false", imp[0], imp[1]))), " ")
		if !strings.Contains(out, "Managed by Another Configuration") || !strings.Contains(out, `the Terraform configuration in "`+first.dir+`"`) {
			t.Errorf("terraform import %s %s in the second configuration did not warn:\n%s", imp[0], imp[1], out)
		}
		second.run("state", "rm", imp[0])
	}
	for _, imp := range imports {
		first.run("state", "rm", imp[0])
		if out := string(first.run("import", "-input=false", imp[0], imp[1])); strings.Contains(out, "Managed by Another Configuration") {
			t.Errorf("terraform import %s %s in the configuration that created it warned:\n%s", imp[0], imp[1], out)
		}
	}
	if out := first.run("plan", "-input=false", "-detailed-exitcode"); !strings.Contains(string(out), "No changes") {
		t.Fatalf("plan after the imports is not empty:\n%s", out)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A CI pipeline that plans in one job and applies the saved plan in
// another, each in a directory of its own (as runners with a workspace per
// job do): with origin set (the provider page's advice), the apply gets the
// planned addresses; with the default origin (the working directory) the
// plan's holds belong to the plan job's directory, and the apply is refused
// with owner_conflict and allocates nothing.
func TestCIPlanAndApplyInOtherDirectories(t *testing.T) {
	t.Parallel()
	url := setup(t)
	saved := func(providerBody, hcl string) (planDir, applyDir *workdir) {
		planDir = newWorkdirWith(t, url, providerBody, hcl)
		planDir.run("plan", "-input=false", "-out=tfplan")
		applyDir = newWorkdirWith(t, url, providerBody, hcl)
		plan, err := os.ReadFile(filepath.Join(planDir.dir, "tfplan"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(applyDir.dir, "tfplan"), plan, 0o600); err != nil {
			t.Fatal(err)
		}
		return planDir, applyDir
	}

	planJob, applyJob := saved(`  origin = "ci/network"`, ownerConfig)
	want := planJob.addresses("tfplan")
	if len(want) != 2 {
		t.Fatalf("the plan shows %v, want the two addresses", want)
	}
	applyJob.run("apply", "-input=false", "tfplan")
	if got := applyJob.addresses(""); !equalMaps(got, want) {
		t.Fatalf("the apply job with origin set: %v, want the planned %v", got, want)
	}

	other := strings.ReplaceAll(strings.ReplaceAll(ownerConfig, "n1", "n3"), "e1", "e3")
	_, applyJob = saved("", other)
	before := len(activeAddresses(t, url))
	out, err := applyJob.try("apply", "-input=false", "tfplan")
	if err == nil || !strings.Contains(string(out), "owner_conflict") {
		t.Fatalf("the apply job with the default origin: %v, want owner_conflict from its own plan's holds\n%s", err, out)
	}
	if now := len(activeAddresses(t, url)); now != before {
		t.Errorf("the refused apply changed the active allocations: %d, want %d", now, before)
	}
}

// An address imported into a second resource of the configuration that
// created it, whose first resource still declares it, warns that two
// resources now manage one address (the plan of the second would then
// replace it, releasing the address the first uses; found by a trial as a
// new team); an import after a state rm warns the same, and says that it
// is what was meant then.
func TestImportOfAnAddressThisConfigurationCreatedWarns(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	w := newWorkdir(t, url, `resource "ipam_cluster" "lab" {
  name   = "lab"
  prefix = "2001:db8:1ab::/48"
}
resource "ipam_node_address" "node3" {
  cluster_id = ipam_cluster.lab.id
  node_id    = "node-3"
}
resource "ipam_node_address" "imp" {
  cluster_id = ipam_cluster.lab.id
  node_id    = "node-x"
}
`)
	w.run("apply", "-input=false", "-auto-approve", "-target=ipam_node_address.node3")
	out := strings.Join(strings.Fields(string(w.run("import", "-input=false", "ipam_node_address.imp", "lab/node-3"))), " ")
	if !strings.Contains(out, "Created by This Configuration") || !strings.Contains(out, "two resources now manage one address") {
		t.Errorf("importing lab/node-3, which ipam_node_address.node3 manages, did not warn:\n%s", out)
	}
}

// An owner id is one owner in a cluster, whatever its tenant: an
// environment's IPv4 declared for another org under an env id that one org
// already uses is refused at plan and apply, saying that the address is
// held for the other org, with no advice to import it (which would hand one
// org's address to the other). It was told that the same configuration
// managed it, and to import it (found by a trial as a new team).
func TestAnOwnerIDOfAnotherTenantIsNotImportAdvice(t *testing.T) {
	t.Parallel()
	url := setup(t)
	const acme = "resource \"ipam_env_ipv4\" \"acme\" {\n  pool_id = \"c1/v4\"\n  org_id  = \"acme\"\n  env_id  = \"shop-prod\"\n}\n"
	w := newWorkdir(t, url, acme)
	w.run("apply", "-input=false", "-auto-approve")
	before := activeAddresses(t, url)
	w.write(acme + strings.ReplaceAll(acme, `"acme"`, `"globex"`)) // resource globex, org globex, the same env id
	out, err := w.try("apply", "-input=false", "-auto-approve")
	said := strings.Join(strings.Fields(string(out)), " ")
	if err == nil || !strings.Contains(said, "owner_conflict") || !strings.Contains(said, `held for org "acme" and env "shop-prod", not "globex"`) ||
		strings.Contains(said, "terraform import") || strings.Contains(said, "this same configuration manages it") {
		t.Fatalf("another org's env declared under the same env id: %v\n%s", err, out)
	}
	if after := activeAddresses(t, url); !equalMaps(after, before) {
		t.Errorf("the refused apply changed the allocations: %v, want %v", after, before)
	}
}

// Each workspace of a working directory has a state of its own, so it is
// another configuration to the provider: a second workspace that declares
// the owners of the first is refused (warned at plan, owner_conflict at
// apply, nothing written), as a second directory is. Both workspaces had
// the directory as their origin, so the second one adopted the first one's
// allocations as a retried apply, and its destroy then released what the
// first still used (found by a trial as a Terraform power user).
func TestAnotherWorkspaceIsAnotherConfiguration(t *testing.T) {
	t.Parallel()
	url := setup(t)
	w := newWorkdir(t, url, ownerConfig)
	w.run("apply", "-input=false", "-auto-approve")
	held := activeAddresses(t, url)
	w.run("workspace", "new", "staging")
	plan := strings.Join(strings.Fields(string(w.run("plan", "-input=false"))), " ")
	if !strings.Contains(plan, "Is Managed Elsewhere") || !strings.Contains(plan, "(workspace staging)") {
		t.Errorf("the staging workspace's plan does not warn, naming its workspace:\n%s", plan)
	}
	out, err := w.try("apply", "-input=false", "-auto-approve")
	if err == nil || !strings.Contains(string(out), "owner_conflict") {
		t.Fatalf("the staging workspace's apply of the default workspace's owners: %v\n%s", err, out)
	}
	if now := activeAddresses(t, url); !equalMaps(now, held) {
		t.Errorf("active allocations %v after the refused apply, want %v", now, held)
	}
	// Back in the default workspace, the configuration is itself again.
	w.run("workspace", "select", "default")
	if out, err := w.try("plan", "-input=false", "-detailed-exitcode"); err != nil {
		t.Fatalf("the default workspace's plan after the other's refusal: %v\n%s", err, out)
	}
}

// A provider whose origin is known only after apply takes no plan-time hold
// (the plan says why, and shows the address unknown), and its apply
// allocates under that origin. The plan held the address under the working
// directory's origin, and the apply, under the real one, was refused by
// that hold (owner_conflict) until it expired (found by a trial as a
// Terraform power user).
func TestAnOriginKnownOnlyAfterApplyTakesNoHold(t *testing.T) {
	t.Parallel()
	url := setup(t)
	w := newWorkdirWith(t, url, `  origin = terraform_data.o.output`,
		"resource \"terraform_data\" \"o\" {\n  input = \"origin-x\"\n}\n"+
			"resource \"ipam_node_address\" \"n\" {\n  cluster_id = \"c1\"\n  node_id    = \"late-origin\"\n}\n")
	plan := strings.Join(strings.Fields(string(w.run("plan", "-input=false"))), " ")
	if !strings.Contains(plan, "The provider's origin depends on values known only after apply") {
		t.Errorf("the plan does not say why its address is unknown:\n%s", plan)
	}
	if n := count(t, url, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'late-origin'`); n != 0 {
		t.Errorf("the plan held %d rows for the owner, want none", n)
	}
	w.run("apply", "-input=false", "-auto-approve")
	if got := queryMap(t, url, `SELECT owner_id, origin FROM ipam_allocations WHERE owner_id = 'late-origin' AND state = 'active'`); got["late-origin"] != "origin-x" {
		t.Errorf("the allocation's origin: %v, want origin-x", got)
	}
}
