package e2e

import (
	"strings"
	"testing"
)

// Ownership through the real terraform, case by case (the core's tests run
// the same rules on every path; see ipam/internal/engine/ownership_test.go).

// Another organisation's cluster built on a destroyed cluster's prefix and
// public IPv4 block, with owners of the same names, gets none of the
// destroyed owners' addresses inside their cooldown: an owner key means
// something only inside its cluster.
func TestNamesakesInAnotherClusterGetOtherAddresses(t *testing.T) {
	t.Parallel()
	url := setup(t)
	cluster := func(name string) string {
		return `resource "ipam_cluster" "c" {
  name   = "` + name + `"
  prefix = "2001:db8:77::/48"
}
resource "ipam_pool" "v4" {
  cluster_id = ipam_cluster.c.id
  name       = "public"
  cidrs      = ["192.0.2.0/28"]
  cooldown   = "720h"
}
resource "ipam_env_ipv4" "prod" {
  pool_id = ipam_pool.v4.id
  org_id  = "acme"
  env_id  = "prod"
}
resource "ipam_instance_address" "web" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "web-1"
  org_id      = "acme"
  env_id      = "prod"
}
`
	}
	acme := newWorkdir(t, url, cluster("fra1"))
	acme.run("apply", "-input=false", "-auto-approve")
	old := acme.addresses("")
	acme.run("destroy", "-input=false", "-auto-approve")
	globex := newWorkdir(t, url, cluster("ams1"))
	globex.run("apply", "-input=false", "-auto-approve")
	now := globex.addresses("")
	for _, r := range []string{"ipam_env_ipv4.prod", "ipam_instance_address.web"} {
		if old[r] == "" || now[r] == "" || old[r] == now[r] {
			t.Errorf("%s: fra1's was %q, ams1's namesake got %q; want another address inside the cooldown", r, old[r], now[r])
		}
	}
}

// A plan of configuration A that replaces web-1 opens no door for
// configuration B (another working directory, the same actor) declaring
// web-1: B is refused, and A's state keeps the allocation.
func TestAReplacementPlanMarksOnlyForItsConfiguration(t *testing.T) {
	t.Parallel()
	url := setup(t)
	const hcl = "resource \"ipam_node_address\" \"n\" {\n  cluster_id = \"c1\"\n  node_id    = \"web-1\"\n}\n"
	a := newWorkdir(t, url, hcl)
	a.run("apply", "-input=false", "-auto-approve")
	a.run("plan", "-input=false") // its refresh reads it
	held := activeAddresses(t, url)
	a.run("plan", "-input=false", "-replace=ipam_node_address.n", "-out=tfplan")
	b := newWorkdir(t, url, hcl)
	out, err := b.try("apply", "-input=false", "-auto-approve")
	if err == nil || !strings.Contains(string(out), "owner_conflict") {
		t.Fatalf("B's apply after A planned a replacement: %v\n%s", err, out)
	}
	if got := b.addresses(""); len(got) != 0 {
		t.Errorf("B's state holds %v", got)
	}
	a.run("apply", "-input=false", "tfplan") // A's replacement keeps the address
	if now := activeAddresses(t, url); !equalMaps(now, held) {
		t.Errorf("after A's replacement: %v, want %v", now, held)
	}
}

// What `terraform apply` has just created is held by a state: an
// operator's release without --force refuses it, before any refresh.
func TestAFreshCreateIsHeldByItsState(t *testing.T) {
	url := setup(t)
	w := newWorkdir(t, url, "resource \"ipam_node_address\" \"n\" {\n  cluster_id = \"c1\"\n  node_id    = \"fresh-1\"\n}\n")
	w.run("apply", "-input=false", "-auto-approve")
	addr := w.addresses("")["ipam_node_address.n"]
	out, code := runIpamctl(t, url, "release", addr, "--reason", "test")
	if code == 0 || !strings.Contains(out, "Terraform") {
		t.Fatalf("ipamctl release of a fresh create: exit %d\n%s", code, out)
	}
	if now := activeAddresses(t, url); len(now) != 1 {
		t.Fatalf("the refused release changed the allocations: %v", now)
	}
}
