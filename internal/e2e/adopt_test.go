package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-version"

	"github.com/overlayipam/terraform-provider-ipam/internal/tfcli"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// requireCLI skips t, noting why, when the terraform under test is older
// than minimum.
func requireCLI(t *testing.T, minimum string, feature string) {
	t.Helper()
	out, err := exec.Command(terraformBin, "version", "-json").Output()
	if err != nil {
		t.Fatalf("%s version -json: %v", terraformBin, err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s version -json: %v", terraformBin, err)
	}
	if version.Must(version.NewVersion(v.Version)).Core().LessThan(version.Must(version.NewVersion(minimum))) {
		why := fmt.Sprintf("%s needs Terraform %s or later, this CLI is %s", feature, minimum, v.Version)
		tfcli.NoteSkip(t, why)
		t.Skip(why)
	}
}

// Allocations made outside Terraform (the scheduler's instances, an
// operator's node and IPv4 addresses) are adopted in bulk: `terraform query
// -generate-config-out` writes their import blocks and configuration, the
// apply imports them without changing any, and the next plan is empty.
func TestQueryAdoptsAllocationsMadeOutsideTerraform(t *testing.T) {
	t.Parallel()
	requireCLI(t, "1.14.0", "terraform query")
	url := setup(t)
	ctx := context.Background()
	scheduler, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, Actor: "scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	defer scheduler.Close()
	want := map[string]string{} // owner id -> address
	for i := range 3 {
		n, err := scheduler.AllocateNode(ctx, nil, ipam.NodeRequest{ClusterID: "c1", NodeID: fmt.Sprintf("node-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("node-%d", i)] = n.Address.String()
		a, err := scheduler.AllocateInstance(ctx, nil, ipam.InstanceRequest{ClusterID: "c1", InstanceID: fmt.Sprintf("vm-%d", i),
			OrgID: "acme", EnvID: "prod", NodeID: fmt.Sprintf("node-%d", i)})
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

list "ipam_instance_address" "instances" {
  provider         = ipam
  include_resource = true
  config {
    cluster_id = "c1"
    org_id     = "acme"
  }
}

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
