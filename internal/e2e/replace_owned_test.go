package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
)

// replaceOwnedConfig is an address set of two keys and a node's instance
// blocks, both under create_before_destroy.
const replaceOwnedConfig = `resource "ipam_cluster" "a" {
  name   = "a"
  prefix = "2001:db8:a::/48"
}
resource "ipam_address_set" "vm" {
  cluster_id = ipam_cluster.a.id
  owner_id   = "vm-1"
  addresses = {
    overlay = { family = "ipv6" }
    second  = { family = "ipv6" }
  }
  lifecycle {
    create_before_destroy = true
  }
}
resource "ipam_node_instance_blocks" "n1" {
  cluster_id          = ipam_cluster.a.id
  node_id             = "n1"
  block_prefix_length = 124
  demand              = 2
  lifecycle {
    create_before_destroy = true
  }
}
`

// An address set and a node's instance blocks can be replaced under
// create_before_destroy (-replace), as the single addresses can: the create
// half takes over what the replaced object holds (the set keeps each key's
// address, the node keeps its blocks), and the destroy half of the old
// object, carrying the generations its state read, releases nothing the
// new one holds. (A taint under create_before_destroy is not covered: the
// plan of a tainted object's replacement carries neither its state nor its
// private state, for any resource.)
func TestReplacingSetsAndNodeBlocks(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	w := newWorkdir(t, url, replaceOwnedConfig)
	w.run("apply", "-input=false", "-auto-approve")
	w.run("plan", "-input=false") // a refresh confirms them
	members, blocks := setMembers(t, url), nodeBlocks(t, url)
	if len(members) != 2 || len(blocks) != 1 {
		t.Fatalf("after the first apply: members %v, blocks %v", members, blocks)
	}
	for _, how := range [][]string{
		{"apply", "-input=false", "-auto-approve", "-replace=ipam_address_set.vm"},
		{"apply", "-input=false", "-auto-approve", "-replace=ipam_node_instance_blocks.n1"},
	} {
		w.run(how...)
		if got := setMembers(t, url); fmt.Sprint(got) != fmt.Sprint(members) {
			t.Errorf("after %s: the set holds %v, want its own %v", strings.Join(how, " "), got, members)
		}
		if got := nodeBlocks(t, url); fmt.Sprint(got) != fmt.Sprint(blocks) {
			t.Errorf("after %s: n1's blocks %v, want its own %v", strings.Join(how, " "), got, blocks)
		}
		if out := w.run("plan", "-input=false"); !strings.Contains(string(out), "No changes") {
			t.Fatalf("plan after %s is not empty:\n%s", strings.Join(how, " "), out)
		}
	}
}

// A node's instance blocks with an instance placed in them can be replaced
// destroy-first (-replace, no create_before_destroy): the destroy half
// leaves the blocks that its plan marked, with the instance's address in
// them, and the create half takes them over. The destroy used to be refused
// (the node still had an address in its blocks) halfway through the apply.
func TestReplacingNodeBlocksDestroyFirstWithAnInstance(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	w := newWorkdir(t, url, `resource "ipam_cluster" "a" {
  name   = "a"
  prefix = "2001:db8:a::/48"
}
resource "ipam_node_instance_blocks" "n1" {
  cluster_id          = ipam_cluster.a.id
  node_id             = "n1"
  block_prefix_length = 124
}
resource "ipam_instance_address" "vm" {
  cluster_id  = ipam_cluster.a.id
  node_id     = ipam_node_instance_blocks.n1.node_id
  instance_id = "vm-1"
  org_id      = "o1"
  env_id      = "e1"
}
`)
	w.run("apply", "-input=false", "-auto-approve")
	w.run("plan", "-input=false") // a refresh confirms them
	blocks := nodeBlocks(t, url)
	vm := activeInstances(t, url)
	if len(blocks) != 1 || len(vm) != 1 {
		t.Fatalf("after the first apply: blocks %v, instances %v", blocks, vm)
	}
	w.run("apply", "-input=false", "-auto-approve", "-replace=ipam_node_instance_blocks.n1")
	if got := nodeBlocks(t, url); fmt.Sprint(got) != fmt.Sprint(blocks) {
		t.Errorf("after the replacement: n1's blocks %v, want its own %v", got, blocks)
	}
	if got := activeInstances(t, url); fmt.Sprint(got) != fmt.Sprint(vm) {
		t.Errorf("after the replacement: instances %v, want %v", got, vm)
	}
	if out := w.run("plan", "-input=false"); !strings.Contains(string(out), "No changes") {
		t.Fatalf("plan after the replacement is not empty:\n%s", out)
	}
	// Destroyed in order (the instance first), the blocks are released.
	w.run("destroy", "-input=false", "-auto-approve")
	if got := nodeBlocks(t, url); len(got) != 0 {
		t.Fatalf("after destroy: n1's blocks %v, want none", got)
	}
}

// activeInstances: instance id -> address of the active instance addresses.
func activeInstances(t *testing.T, url string) map[string]string {
	t.Helper()
	return queryMap(t, url, `SELECT owner_id, host(address) FROM ipam_allocations WHERE owner_kind = 'instance' AND state = 'active'`)
}

// setMembers: key -> address of vm-1's active members.
func setMembers(t *testing.T, url string) map[string]string {
	t.Helper()
	return queryMap(t, url, `SELECT split_part(owner_id, '#', 2), host(address) FROM ipam_allocations
		WHERE owner_kind = 'set' AND state = 'active'`)
}

// nodeBlocks: block -> state of n1's blocks that are not cooling.
func nodeBlocks(t *testing.T, url string) map[string]string {
	t.Helper()
	return queryMap(t, url, `SELECT block::text, state FROM ipam_node_blocks WHERE node_id = 'n1' AND state = 'active'`)
}
