package e2e

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// A plan-time hold is its planning configuration's: another configuration
// of the same actor declaring the owner is refused (owner_conflict naming
// the hold, with no import advice) while the hold is live. Once it expired,
// another manager (that configuration, or the scheduler) takes the owner,
// and the saved plan's apply fails with the provider's own owner_conflict,
// never with Terraform's "Provider produced inconsistent final plan", and
// the other manager keeps the owner.
func TestOwnerTakenBetweenPlanAndApply(t *testing.T) {
	t.Parallel()
	const hcl = "resource \"ipam_node_address\" \"n\" {\n  cluster_id = \"c1\"\n  node_id = \"race-1\"\n}\n"
	expire := func(t *testing.T, url string) {
		sqlExec(t, url, `UPDATE ipam_allocations SET reserved_until = now() - interval '1 second',
			reusable_at = now() - interval '1 second' WHERE state = 'reserved'`)
	}
	for _, tc := range []struct {
		name string
		take func(t *testing.T, url string)
	}{
		{"another configuration", func(t *testing.T, url string) {
			other := newWorkdir(t, url, hcl)
			out, err := other.try("apply", "-input=false", "-auto-approve")
			said := strings.Join(strings.Fields(string(out)), " ")
			if err == nil || !strings.Contains(said, "owner_conflict") || !strings.Contains(said, "held at") || strings.Contains(said, "terraform import") {
				t.Fatalf("another configuration's apply during the first one's live hold: %v\n%s", err, out)
			}
			expire(t, url)
			other.run("apply", "-input=false", "-auto-approve")
		}},
		{"the scheduler", func(t *testing.T, url string) {
			expire(t, url)
			if _, err := openAs(t, url, "scheduler").Allocate(context.Background(), ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: ipam.Owner{Kind: ipam.OwnerNode, ID: "race-1", NodeID: "race-1"}}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := setup(t)
			w := newWorkdir(t, url, hcl)
			w.run("plan", "-input=false", "-out=tfplan")
			tc.take(t, url)
			before := activeAddresses(t, url)
			out, err := w.try("apply", "-input=false", "tfplan")
			if err == nil {
				t.Fatalf("the saved plan applied after another manager took its owner:\n%s", out)
			}
			said := []byte(strings.Join(strings.Fields(string(out)), " "))
			if bytes.Contains(said, []byte("inconsistent final plan")) || bytes.Contains(said, []byte("bug in the provider")) {
				t.Errorf("Terraform's provider-bug error instead of the provider's own:\n%s", out)
			}
			if !bytes.Contains(said, []byte("owner_conflict")) || !bytes.Contains(said, []byte("allocates nothing")) {
				t.Errorf("apply output lacks owner_conflict:\n%s", out)
			}
			if after := activeAddresses(t, url); !equalMaps(after, before) {
				t.Errorf("the failed apply changed the allocations: %v, want %v", after, before)
			}
		})
	}
}

// A taint under create_before_destroy: Terraform plans the new object's
// create without the tainted object's state, so nothing tells it from a
// second resource declaring the owner, and the apply is refused. The
// refusal says what works (untaint, then -replace, whose plan marks the
// allocation), and that works: the owner keeps its address.
func TestTaintUnderCreateBeforeDestroySaysToReplace(t *testing.T) {
	t.Parallel()
	url := setup(t)
	w := newWorkdir(t, url, "resource \"ipam_node_address\" \"n\" {\n  cluster_id = \"c1\"\n  node_id    = \"taint-1\"\n"+
		"  lifecycle {\n    create_before_destroy = true\n  }\n}\n")
	w.run("apply", "-input=false", "-auto-approve")
	w.run("plan", "-input=false") // a refresh reads it: this state holds it
	before := activeAddresses(t, url)
	w.run("taint", "ipam_node_address.n")
	out, err := w.try("apply", "-input=false", "-auto-approve")
	said := strings.Join(strings.Fields(string(out)), " ")
	if err == nil || !strings.Contains(said, "owner_conflict") || !strings.Contains(said, "untaint it and replace it with terraform apply -replace=ADDRESS") {
		t.Fatalf("the apply after a taint under create_before_destroy: %v\n%s", err, out)
	}
	w.run("untaint", "ipam_node_address.n")
	w.run("apply", "-input=false", "-auto-approve", "-replace=ipam_node_address.n")
	if after := activeAddresses(t, url); !equalMaps(after, before) {
		t.Fatalf("after -replace: %v, want %v (the address kept)", after, before)
	}
	w.requireEmptyPlan()
}

// A saved plan made in one working directory and applied from another (a
// copy of the first, say: another configuration to the IPAM) meets the
// first one's live hold: the apply fails with the provider's owner_conflict
// and allocates nothing. The re-plan at apply shows the held address as the
// plan did, its cidr included (the pool block's prefix length, not /32): an
// ipam_env_ipv4 failed with Terraform's "Provider produced inconsistent
// final plan" on cidr.
func TestSavedPlanAppliedFromAnotherDirectory(t *testing.T) {
	t.Parallel()
	url := setup(t)
	const hcl = "resource \"ipam_env_ipv4\" \"e\" {\n  pool_id = \"c1/v4\"\n  org_id  = \"o1\"\n  env_id  = \"e-moved\"\n}\n" +
		"resource \"ipam_node_address\" \"n\" {\n  cluster_id = \"c1\"\n  node_id    = \"n-moved\"\n}\n"
	planned := newWorkdir(t, url, hcl)
	planned.run("plan", "-input=false", "-out=tfplan")
	elsewhere := newWorkdir(t, url, hcl)
	copyFile(t, filepath.Join(planned.dir, "tfplan"), filepath.Join(elsewhere.dir, "tfplan"))
	out, err := elsewhere.try("apply", "-input=false", "tfplan")
	said := strings.Join(strings.Fields(string(out)), " ")
	if err == nil || strings.Contains(said, "inconsistent final plan") || strings.Contains(said, "bug in the provider") {
		t.Fatalf("a saved plan applied from another directory: %v\n%s", err, out)
	}
	if strings.Count(said, "owner_conflict") < 2 || !strings.Contains(said, "allocates nothing") {
		t.Errorf("the apply does not fail with owner_conflict for both resources:\n%s", out)
	}
	if got := activeAddresses(t, url); len(got) != 0 {
		t.Errorf("the failed apply allocated %v", got)
	}
}

// Two configurations plan the same owners, one after the other; the first
// applies its saved plan, then the second applies its own: the second plan
// showed the first one's held addresses ("Is Managed Elsewhere"), and its
// apply fails with the provider's owner_conflict, allocating nothing. Its
// re-plan found the owners now allocated (no longer held) and showed their
// addresses unknown, and Terraform failed with "Provider produced
// inconsistent final plan" (found by a trial as a Terraform power user).
func TestTwoSavedPlansOfTheSameOwnersAppliedInTurn(t *testing.T) {
	t.Parallel()
	url := setup(t)
	const hcl = "resource \"ipam_instance_address\" \"i\" {\n  cluster_id  = \"c1\"\n  instance_id = \"seq-1\"\n  org_id      = \"o1\"\n  env_id      = \"e1\"\n}\n" +
		"resource \"ipam_env_ipv4\" \"e\" {\n  pool_id = \"c1/v4\"\n  org_id  = \"o1\"\n  env_id  = \"seq-env\"\n}\n"
	a, b := newWorkdir(t, url, hcl), newWorkdir(t, url, hcl)
	a.run("plan", "-input=false", "-out=tfplan")
	b.run("plan", "-input=false", "-out=tfplan")
	a.run("apply", "-input=false", "tfplan")
	want := activeAddresses(t, url)
	out, err := b.try("apply", "-input=false", "tfplan")
	said := strings.Join(strings.Fields(string(out)), " ")
	if err == nil || strings.Contains(said, "inconsistent final plan") || strings.Contains(said, "bug in the provider") {
		t.Fatalf("the second saved plan, applied after the first: %v\n%s", err, out)
	}
	if strings.Count(said, "owner_conflict") < 2 {
		t.Errorf("the second apply does not fail with owner_conflict for both resources:\n%s", out)
	}
	if got := activeAddresses(t, url); !equalMaps(got, want) {
		t.Errorf("the second apply changed the allocations: %v, want %v", got, want)
	}
}
