package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// A saved plan applied after its plan-time hold expired and another owner
// took the address: the apply's re-plan shows the planned address again
// (so Terraform finds nothing inconsistent), with a warning saying it was
// taken; the create fails with the provider's own error naming it and
// saying to plan again; nothing is allocated or held for the owner; and the
// next apply takes a new address.
func TestSavedPlanAfterItsHoldWasLost(t *testing.T) {
	t.Parallel()
	url := setup(t)
	w := newWorkdir(t, url, "resource \"ipam_node_address\" \"n\" {\n  cluster_id = \"c1\"\n  node_id = \"lost-1\"\n}\n")
	w.run("plan", "-input=false", "-out=tfplan")
	planned := w.addresses("tfplan")["ipam_node_address.n"]
	addr, err := netip.ParseAddr(planned)
	if err != nil {
		t.Fatalf("planned address %q: %v", planned, err)
	}
	sqlExec(t, url, `UPDATE ipam_allocations SET reserved_until = now() - interval '1 second',
		reusable_at = now() - interval '1 second' WHERE state = 'reserved'`)
	ctx := context.Background()
	st := openAs(t, url, "someone-else")
	if _, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: ipam.Owner{Kind: ipam.OwnerNode, ID: "thief", NodeID: "thief"}, Address: addr}); err != nil {
		t.Fatal(err)
	}
	out, err := w.try("apply", "-input=false", "tfplan")
	if err == nil {
		t.Fatalf("the saved plan applied after its address was taken:\n%s", out)
	}
	said := []byte(strings.Join(strings.Fields(string(out)), " ")) // Terraform wraps its diagnostics
	for _, want := range []string{"Planned Address No Longer Available", "Earlier Planned Address Was Taken", planned, "run terraform plan again"} {
		if !bytes.Contains(said, []byte(want)) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	if bytes.Contains(out, []byte("inconsistent final plan")) {
		t.Errorf("Terraform's own inconsistency error instead of the provider's:\n%s", out)
	}
	if _, err := st.GetActive(ctx, "c1", ipam.OwnerNode, "lost-1"); err == nil {
		t.Fatal("an address was allocated for the failed resource")
	}
	if n := count(t, url, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'lost-1'`); n != 0 {
		t.Fatalf("the failed apply left %d rows (a hold) for the owner, want none", n)
	}
	// The failed apply told the loss: the next plan holds a new address
	// without telling it again.
	if next := string(w.run("plan", "-input=false")); strings.Contains(next, "Earlier Planned Address Was Taken") {
		t.Errorf("the plan after the failed apply tells the loss again:\n%s", next)
	}
	w.run("apply", "-input=false", "-auto-approve")
	if got := w.addresses("")["ipam_node_address.n"]; got == "" || got == planned {
		t.Fatalf("after a new plan: %q", got)
	}
}

// A plan of more new addresses than its pool has free: the plan-time holds
// it takes first are counted as held, not active, in the warning of the
// address it could not hold (the pool has no allocation at all), and the
// warning says how many of them are this plan's own; another plan, which
// holds none of them, is told so (it said this plan's were among them).
func TestPlanExhaustionCountsHoldsApart(t *testing.T) {
	url := setup(t)
	ctx := context.Background()
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, Actor: "terraform"})
	if err != nil {
		t.Fatal(err)
	}
	// A /30: two addresses.
	if _, err := st.CreatePool(ctx, ipam.Pool{ClusterID: "c1", Name: "tiny", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/30")}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var hcl strings.Builder
	for i := range 3 {
		fmt.Fprintf(&hcl, "resource \"ipam_env_ipv4\" \"e%d\" {\n  pool_id = \"c1/tiny\"\n  org_id  = \"acme\"\n  env_id  = \"e%d\"\n}\n", i, i)
	}
	w := newWorkdir(t, url, hcl.String())
	out := strings.Join(strings.Fields(string(w.run("plan", "-input=false"))), " ")
	for _, want := range []string{
		"Some Addresses Known After Apply",
		`ipam_exhausted: pool "c1/tiny" has no free address: size 2, 0 active, 2 held by plan-time holds, 0 cooling`,
		"2 of the pool's addresses are held by plan-time holds (2 of them this plan's other new addresses from this pool)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
	// Another configuration's plan of one more address finds the pool held
	// by the first plan's holds, none of them its own.
	other := newWorkdir(t, url, "resource \"ipam_env_ipv4\" \"late\" {\n  pool_id = \"c1/tiny\"\n  org_id  = \"acme\"\n  env_id  = \"late\"\n}\n")
	out = strings.Join(strings.Fields(string(other.run("plan", "-input=false"))), " ")
	if want := "2 of the pool's addresses are held by plan-time holds (none of them taken by this run"; !strings.Contains(out, want) {
		t.Errorf("another plan lacks %q:\n%s", want, out)
	}
}

// A plan of a new instance on a node whose blocks are full: a plan-time hold
// never grows a node, so the address is left to the apply, and the warning
// says that the apply grows the node (not that it fails, as it says of a
// full pool); the apply does, and the instance lands in the new block.
func TestPlanOnAFullNodeSaysTheApplyGrowsIt(t *testing.T) {
	t.Parallel()
	url := setup(t)
	ctx := context.Background()
	st := openAs(t, url, "scheduler")
	if _, err := st.ScaleNodeBlocks(ctx, "c1", "n1", ipam.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		if _, err := st.AllocateInstance(ctx, nil, ipam.InstanceRequest{ClusterID: "c1", InstanceID: fmt.Sprint("f", i), OrgID: "o1", EnvID: "e1", NodeID: "n1"}); err != nil {
			t.Fatal(err)
		}
	}
	w := newWorkdir(t, url, "resource \"ipam_instance_address\" \"late\" {\n  cluster_id  = \"c1\"\n  instance_id = \"late\"\n  org_id      = \"acme\"\n  env_id      = \"prod\"\n  node_id     = \"n1\"\n}\n")
	out := strings.Join(strings.Fields(string(w.run("plan", "-input=false"))), " ")
	for _, want := range []string{
		"Some Addresses Known After Apply",
		`pool "c1/blocks/n1" has no free address`,
		`the apply will try again after the other changes of this plan, and grow node "n1"'s blocks if they are still full, up to its max_blocks`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
	w.run("apply", "-input=false", "-auto-approve")
	nb, err := st.GetNodeBlocks(ctx, "c1", "n1")
	if err != nil || len(nb.Blocks) != 2 || nb.Used != 17 {
		t.Fatalf("after the apply: %+v %v, want 2 blocks and 17 addresses in use", nb, err)
	}
}

// A saved plan applied from another checkout of its configuration (a CI
// job that plans in one directory and applies in another, without setting
// origin): the plan's holds are its directory's, so the apply's re-plan
// finds them held by a plan of another configuration. It shows the held
// address again (Terraform finds nothing inconsistent), the create fails
// with the provider's own owner_conflict naming both directories and
// saying to set origin, nothing is allocated, and the plan still applies
// where it was made. The re-plan made the address unknown, and Terraform
// failed the apply with "Provider produced inconsistent final plan".
func TestSavedPlanAppliedFromAnotherCheckout(t *testing.T) {
	t.Parallel()
	url := setup(t)
	hcl := `resource "ipam_node_address" "n" {
  cluster_id = "c1"
  node_id    = "moved-1"
}
resource "ipam_address_set" "vm" {
  cluster_id = "c1"
  owner_id   = "moved-vm"
  addresses = {
    v4 = { pools = ["c1/v4"] }
  }
}
`
	w := newWorkdir(t, url, hcl)
	w.run("plan", "-input=false", "-out=tfplan")
	planned := w.addresses("tfplan")["ipam_node_address.n"]
	if _, err := netip.ParseAddr(planned); err != nil {
		t.Fatalf("planned address %q: %v", planned, err)
	}
	ci := newWorkdir(t, url, hcl)
	plan, err := os.ReadFile(filepath.Join(w.dir, "tfplan"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ci.dir, "tfplan"), plan, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := ci.try("apply", "-input=false", "tfplan")
	if err == nil {
		t.Fatalf("the saved plan applied in another directory, whose configuration does not own its holds:\n%s", out)
	}
	said := strings.Join(strings.Fields(string(out)), " ") // Terraform wraps its diagnostics
	for _, want := range []string{"owner_conflict", planned, "by a plan", w.dir, ci.dir, "origin"} {
		if !strings.Contains(said, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(said, "inconsistent final plan") {
		t.Errorf("Terraform's own inconsistency error instead of the provider's:\n%s", out)
	}
	if n := count(t, url, `SELECT count(*) FROM ipam_allocations WHERE owner_id IN ('moved-1', 'moved-vm#v4') AND state = 'active'`); n != 0 {
		t.Fatalf("the failed apply allocated %d addresses, want none", n)
	}
	w.run("apply", "-input=false", "tfplan")
	if got := activeAddresses(t, url)[planned]; got != "node/moved-1" {
		t.Errorf("after the saved plan's apply where it was made, %s is held by %q, want node/moved-1", planned, got)
	}
}

// An abandoned plan expired by the operator, as the operations guide tells
// it: a saved plan of one configuration holds a node's address, so another
// configuration of the same actor that declares the node is refused,
// naming the hold and ipamctl expire-hold. The operator expires it with
// ipamctl; the other configuration then applies, and the saved plan's
// apply fails with the provider's owner_conflict (not Terraform's
// inconsistent final plan), naming the configuration that manages the
// owner now (it told to release that configuration's address), and
// allocating nothing.
func TestAnAbandonedPlanExpiredByTheOperator(t *testing.T) {
	t.Parallel()
	url := setup(t)
	hcl := "resource \"ipam_node_address\" \"n\" {\n  cluster_id = \"c1\"\n  node_id    = \"abandoned-1\"\n}\n"
	ci := newWorkdir(t, url, hcl)
	ci.run("plan", "-input=false", "-out=tfplan")
	planned := ci.addresses("tfplan")["ipam_node_address.n"]
	if _, err := netip.ParseAddr(planned); err != nil {
		t.Fatalf("planned address %q: %v", planned, err)
	}
	team := newWorkdir(t, url, hcl)
	out, err := team.try("apply", "-input=false", "-auto-approve")
	said := strings.Join(strings.Fields(string(out)), " ")
	if err == nil || !strings.Contains(said, "owner_conflict") || !strings.Contains(said, "ipamctl expire-hold") {
		t.Fatalf("another configuration's apply while the plan holds the node: %v\n%s", err, out)
	}
	msg, code := runIpamctl(t, url, "expire-hold", "--cluster", "c1", "--kind", "node", "--owner", "abandoned-1",
		"--reason", "CI plan abandoned")
	if code != 0 || !strings.Contains(msg, "expired the hold on "+planned) {
		t.Fatalf("ipamctl expire-hold: exit %d\n%s", code, msg)
	}
	team.run("apply", "-input=false", "-auto-approve")
	if got := activeAddresses(t, url)[team.addresses("")["ipam_node_address.n"]]; got != "node/abandoned-1" {
		t.Fatalf("after the other configuration's apply: %q", got)
	}
	out, err = ci.try("apply", "-input=false", "tfplan")
	said = strings.Join(strings.Fields(string(out)), " ")
	if err == nil || !strings.Contains(said, "owner_conflict") || strings.Contains(said, "inconsistent final plan") ||
		strings.Contains(said, "release it first") || !strings.Contains(said, team.dir) {
		t.Fatalf("the abandoned plan's apply after the operator expired its hold: %v, want owner_conflict naming the "+
			"configuration that manages the owner now, not telling to release its address\n%s", err, out)
	}
	if n := count(t, url, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'abandoned-1' AND state IN ('active', 'reserved')`); n != 1 {
		t.Fatalf("%d live rows of the node, want the other configuration's one", n)
	}
}

// An address set's saved plan applied after a key's plan-time hold was
// lost, as a single address's is: its hold expired (the operator ended it)
// and another owner took the address, or another configuration took the
// key. The re-plan shows the lost address again, with a warning, so the
// apply fails with the provider's own error rather than Terraform's
// "Provider produced inconsistent final plan", allocates nothing and leaves
// no hold behind. The next plan holds a new address, or warns that another
// configuration manages the key (it planned the key as new, silently).
func TestSavedSetPlanAfterAKeysHoldWasLost(t *testing.T) {
	t.Parallel()
	url := setup(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		take func(t *testing.T, planned string)
	}{
		{"another owner took the address", func(t *testing.T, planned string) {
			st := openAs(t, url, "someone-else")
			if _, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.OperatorPool("c1", "v4"),
				Owner: ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: "thief", OrgID: "acme", EnvID: "thief"}, Address: netip.MustParseAddr(planned)}); err != nil {
				t.Fatal(err)
			}
		}},
		{"another configuration took the key", func(t *testing.T, _ string) {
			other := newWorkdir(t, url, setHCL("lost-set-2"))
			other.run("apply", "-input=false", "-auto-approve")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := map[bool]string{true: "lost-set-1", false: "lost-set-2"}[strings.HasPrefix(tc.name, "another owner")]
			w := newWorkdir(t, url, setHCL(owner))
			w.run("plan", "-input=false", "-out=tfplan")
			planned := setKeyAddress(t, w.run("show", "-json", "tfplan"), "public")
			if _, err := netip.ParseAddr(planned); err != nil {
				t.Fatalf("planned address %q: %v", planned, err)
			}
			if msg, code := runIpamctl(t, url, "expire-hold", "--cluster", "c1", "--kind", "set", "--owner", owner+"#public",
				"--reason", "abandoned"); code != 0 {
				t.Fatalf("ipamctl expire-hold: exit %d\n%s", code, msg)
			}
			tc.take(t, planned)
			out, err := w.try("apply", "-input=false", "tfplan")
			said := strings.Join(strings.Fields(string(out)), " ")
			if err == nil || strings.Contains(said, "inconsistent final plan") || !strings.Contains(said, "Earlier Planned Address Was Taken") {
				t.Fatalf("the saved plan's apply after the key's hold was lost: %v\n%s", err, out)
			}
			live := count(t, url, fmt.Sprintf(`SELECT count(*) FROM ipam_allocations WHERE owner_id = '%s#public'
				AND state IN ('active', 'reserved') AND coalesce(origin, '') = '%s'`, owner, w.dir))
			if live != 0 {
				t.Fatalf("the failed apply left %d live rows of the key for its configuration, want none", live)
			}
			// The next plan: a new address, or (the key taken) a warning
			// that another configuration manages the key.
			next := strings.Join(strings.Fields(string(w.run("plan", "-input=false"))), " ")
			if taken := !strings.HasPrefix(tc.name, "another owner"); taken != strings.Contains(next, "owner_conflict") {
				t.Fatalf("the next plan (the key taken by another configuration: %v):\n%s", taken, next)
			}
		})
	}
}

// setKeyAddress is the address of key in the set ipam_address_set.vm in
// the output of terraform show -json (of a plan).
func setKeyAddress(t *testing.T, showJSON []byte, key string) string {
	t.Helper()
	var doc struct {
		PlannedValues struct {
			RootModule struct {
				Resources []struct {
					Address string `json:"address"`
					Values  struct {
						Addresses map[string]struct {
							Address string `json:"address"`
						} `json:"addresses"`
					} `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"planned_values"`
	}
	if err := json.Unmarshal(showJSON, &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range doc.PlannedValues.RootModule.Resources {
		if r.Address == "ipam_address_set.vm" {
			return r.Values.Addresses[key].Address
		}
	}
	return ""
}

// setHCL is an address set of one key, public, from pool c1/v4.
func setHCL(owner string) string {
	return fmt.Sprintf(`resource "ipam_address_set" "vm" {
  cluster_id = "c1"
  owner_id   = %q
  org_id     = "acme"
  env_id     = "prod"
  addresses = {
    public = { pools = ["c1/v4"] }
  }
}
`, owner)
}
