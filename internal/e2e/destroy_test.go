package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// destroyConfig is a cluster, an IPv4 pool, two environments' IPv4 and a
// node address, none with force_destroy; with more, a second node address
// that is in the configuration but not in the state (added after the last
// apply).
func destroyConfig(more bool) string {
	hcl := `resource "ipam_cluster" "c" {
  name   = "eu1"
  prefix = "2001:db8:7::/48"
}
resource "ipam_pool" "v4" {
  cluster_id = ipam_cluster.c.id
  name       = "v4"
  cidrs      = ["203.0.113.0/29"]
  cooldown   = "1h"
}
resource "ipam_env_ipv4" "a" {
  pool_id = ipam_pool.v4.id
  org_id  = "o1"
  env_id  = "a"
}
resource "ipam_env_ipv4" "b" {
  pool_id = ipam_pool.v4.id
  org_id  = "o1"
  env_id  = "b"
}
resource "ipam_node_address" "n1" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n1"
}
`
	if more {
		hcl += `resource "ipam_node_address" "n2" {
  cluster_id = ipam_cluster.c.id
  node_id    = "n2"
}
`
	}
	return hcl
}

// A plain terraform destroy of a cluster, a pool and their addresses
// succeeds without force_destroy, directly and through PgBouncer in both
// pooling modes. Its preliminary plan of a resource not yet created takes
// no hold; the cooling addresses stay behind as tombstones; and the same
// cluster and pool created at once hand none of them to other owners.
func TestDestroyWithoutForce(t *testing.T) {
	for _, via := range []string{"direct", "transaction", "session"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			db := fmt.Sprintf("destroy_%s_%d", via, os.Getpid())
			direct := createEmptyDatabase(t, testdb.AdminURL(t), db)
			url := direct
			if via != "direct" {
				url = startPgBouncer(t, testdb.AdminURL(t), via, db)
			}
			w := newWorkdir(t, url, destroyConfig(false))
			w.run("apply", "-input=false", "-auto-approve")
			first := w.addresses("")
			w.write(destroyConfig(true))
			out := w.run("destroy", "-input=false", "-auto-approve")
			if !bytes.Contains(out, []byte("Destroy complete! Resources: 5 destroyed.")) {
				t.Fatalf("destroy:\n%s", out)
			}
			if n := count(t, direct, `SELECT count(*) FROM ipam_clusters`); n != 0 {
				t.Fatalf("%d clusters left after the destroy", n)
			}
			if n := count(t, direct, `SELECT count(*) FROM ipam_allocations`); n != 0 {
				t.Fatalf("%d allocation rows left after the destroy", n)
			}
			// The cluster's destroy would drop a hold of n2 (with an
			// event) anyway: no event of n2 says none was taken.
			if n := count(t, direct, `SELECT count(*) FROM ipam_events WHERE owner_id = 'n2'`); n != 0 {
				t.Fatalf("the destroy's preliminary plan took a hold for n2 (%d events of n2)", n)
			}
			if n := count(t, direct, `SELECT count(*) FROM ipam_tombstones WHERE reusable_at > now()`); n != 3 {
				t.Fatalf("%d tombstones after the destroy, want the 3 cooling addresses", n)
			}
			// The same cluster and pool at once, for other owners.
			w.write(strings.NewReplacer(`env_id  = "a"`, `env_id  = "c"`, `env_id  = "b"`, `env_id  = "d"`,
				`node_id    = "n1"`, `node_id    = "n3"`).Replace(destroyConfig(false)))
			w.run("apply", "-input=false", "-auto-approve")
			again := w.addresses("")
			for r, a := range first {
				for r2, b := range again {
					if a == b {
						t.Errorf("%s's address %s (cooling) handed to %s of the re-created configuration", r, a, r2)
					}
				}
			}
			w.run("destroy", "-input=false", "-auto-approve")
		})
	}
}

// The getting-started guide's way to destroy a cluster that still holds an
// address no Terraform state manages (one the Go API made): the destroy's
// plan warns that the destroy will be refused, naming that address and not
// the configuration's own; setting force_destroy and destroying at once
// fails, since a destroy reads the setting from the state; after an apply
// that records it, the destroy plans without a warning, releases the
// address into its cooldown and succeeds. The same for a pool.
func TestForceDestroyTakesAnApplyFirst(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	config := func(force bool) string {
		return fmt.Sprintf("resource \"ipam_cluster\" \"lab\" {\n  name          = \"lab\"\n  prefix        = \"2001:db8:42::/48\"\n  force_destroy = %v\n}\n", force) +
			fmt.Sprintf("resource \"ipam_pool\" \"v4\" {\n  cluster_id    = ipam_cluster.lab.id\n  name          = \"v4\"\n  cidrs         = [\"203.0.113.0/29\"]\n  force_destroy = %v\n}\n", force) +
			"resource \"ipam_node_address\" \"n1\" {\n  cluster_id = ipam_cluster.lab.id\n  node_id    = \"n1\"\n}\n"
	}
	w := newWorkdir(t, url, config(false))
	w.run("apply", "-input=false", "-auto-approve")
	if out := string(w.run("plan", "-destroy", "-input=false")); strings.Contains(out, "Will Be Refused") {
		t.Fatalf("the destroy plan of what this configuration alone holds warns:\n%s", out)
	}
	st := openAs(t, url, "scheduler")
	if _, err := st.Allocate(t.Context(), ipam.AllocateRequest{Pool: ipam.NodePool("lab"), Owner: ipam.Owner{Kind: ipam.OwnerNode, ID: "node-4", NodeID: "node-4"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AllocateEnvIPv4(t.Context(), nil, ipam.EnvIPv4Request{ClusterID: "lab", Pool: "v4", OrgID: "o1", EnvID: "env-9"}); err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(strings.Fields(string(w.run("plan", "-destroy", "-input=false"))), " ")
	for _, want := range []string{`Cluster Destroy Will Be Refused`, `cluster "lab" holds 2 active addresses that this configuration did not allocate`,
		`node "node-4"`, `Pool Destroy Will Be Refused`, `pool "lab/v4" holds 1 active address`, `env_ipv4 "env-9"`} {
		if !strings.Contains(plan, want) {
			t.Errorf("the destroy plan does not say %q:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, `node "n1"`) {
		t.Errorf("the destroy plan names this configuration's own address:\n%s", plan)
	}
	w.write(config(true))
	if out, err := w.try("destroy", "-input=false", "-auto-approve"); err == nil || !strings.Contains(string(out), "still holds") {
		t.Fatalf("destroy with force_destroy set but not applied: %v, want the refusal:\n%s", err, out)
	}
	w.run("apply", "-input=false", "-auto-approve")
	if out := string(w.run("plan", "-destroy", "-input=false")); strings.Contains(out, "Will Be Refused") {
		t.Fatalf("the destroy plan warns with force_destroy applied:\n%s", out)
	}
	w.run("destroy", "-input=false", "-auto-approve")
	if got := queryMap(t, url, `SELECT owner_id, cluster_id FROM ipam_tombstones WHERE owner_id = 'node-4' AND reusable_at > now()`); got["node-4"] != "lab" {
		t.Errorf("node-4's tombstones after the forced destroy: %v, want one of cluster lab, cooling", got)
	}
}
