package e2e

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
)

// A plan against a read-only server (a standby, or a primary being demoted
// in a switchover) works, as the plan-time reservations guide says: the
// refresh reads every resource, and a new address shows as known after
// apply with a warning that says the server is read-only, without waiting
// for the failover bound. Before, each plan-time hold and each refresh's
// record was waited out as a failover (failover_timeout, here two minutes),
// and the plan then failed with "IPAM Database Unreachable". An apply's
// writes still ride out a failover: against the same server the apply fails
// as unreachable once its (short) bound is spent, and nothing is written.
func TestPlanAgainstAReadOnlyServer(t *testing.T) {
	url := testdb.New(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	admin := testdb.AdminURL(t)
	readOnly := func(on bool) {
		v := "off"
		if on {
			v = "on"
		}
		sqlExec(t, admin, "ALTER DATABASE "+pgx.Identifier{cfg.Database}.Sanitize()+" SET default_transaction_read_only = "+v)
	}
	t.Cleanup(func() { readOnly(false) })

	base := `resource "ipam_cluster" "c" {
  name          = "ro"
  prefix        = "2001:db8:7::/48"
  force_destroy = true
}
resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
}
resource "ipam_instance_address" "i" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "web-1"
  org_id      = "acme"
  env_id      = "prod"
}
`
	w := newWorkdirWith(t, url, `  failover_timeout = "2m"`, base)
	w.run("apply", "-input=false", "-auto-approve")
	counts := func() string {
		return fmt.Sprintf("allocations %d, events %d",
			countRows(t, url, `SELECT count(*) FROM ipam_allocations`), countRows(t, url, `SELECT count(*) FROM ipam_events`))
	}
	before := counts()

	readOnly(true)
	more := base + `resource "ipam_instance_address" "j" {
  cluster_id  = "ro"
  instance_id = "web-2"
  org_id      = "acme"
  env_id      = "prod"
}
`
	w.setHCL(`  failover_timeout = "2m"`, more)
	out, err := w.try("plan", "-input=false", "-detailed-exitcode")
	plan := string(out)
	if err == nil || !strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("a plan against a read-only server: %v, want exit status 2 (changes):\n%s", err, plan)
	}
	if !strings.Contains(plan, "Addresses Known After Apply") || !strings.Contains(plan, "the server is read-only") ||
		!regexp.MustCompile(`(?s)ipam_instance_address\.j will be created.*address\s+= \(known after apply\)`).MatchString(plan) {
		t.Errorf("the plan does not show the new address as known after apply, saying the server is read-only:\n%s", plan)
	}
	if strings.Contains(plan, "Waited for the IPAM Database") || strings.Contains(plan, "Unreachable") {
		t.Errorf("the plan waited for a writable server:\n%s", plan)
	}
	if strings.Count(plan, "will be created") != 1 || strings.Contains(plan, "must be replaced") || strings.Contains(plan, "will be destroyed") {
		t.Errorf("the refresh against a read-only server lost track of the resources it has:\n%s", plan)
	}

	// The apply's writes are waited out as a failover, then refused.
	w.setHCL(`  failover_timeout = "2s"`, more)
	applyOut, err := w.try("apply", "-input=false", "-auto-approve")
	if err == nil || !bytes.Contains(applyOut, []byte("IPAM Database Unreachable")) || !bytes.Contains(applyOut, []byte("is read-only")) {
		t.Errorf("an apply against a read-only server: %v, want it unreachable, saying the server is read-only:\n%s", err, applyOut)
	}
	readOnly(false)
	if after := counts(); after != before {
		t.Errorf("the plan and the apply against a read-only server wrote: before %s, after %s", before, after)
	}
	w.run("destroy", "-input=false", "-auto-approve")
}
