package e2e

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The allocation's generation rides in each address resource's private
// state, in a short form: Terraform rewrites the whole state file after every
// resource an apply changes, so its bytes are paid once per resource of the
// state. A state that earlier builds wrote ({"generation":N} under
// "generation") still works: a destroy without refresh releases the address
// its old entry names, and leaves an address whose generation moved on since
// (a stale state) alone, which it could not do had it ignored the old entry;
// a refresh writes the short form in its place.
func TestPrivateGenerationShortAndOldFormRead(t *testing.T) {
	t.Parallel()
	url := setup(t)
	w := newWorkdir(t, url, `resource "ipam_instance_address" "a" {
  cluster_id  = "c1"
  instance_id = "vm-a"
  org_id      = "o1"
  env_id      = "e1"
}
resource "ipam_instance_address" "b" {
  cluster_id  = "c1"
  instance_id = "vm-b"
  org_id      = "o1"
  env_id      = "e1"
}
resource "ipam_instance_address" "c" {
  cluster_id  = "c1"
  instance_id = "vm-c"
  org_id      = "o1"
  env_id      = "e1"
}
`)
	w.run("apply", "-input=false", "-auto-approve")
	gens := queryMap(t, url, `SELECT owner_id, generation::text FROM ipam_allocations WHERE owner_kind = 'instance' AND state = 'active'`)
	if len(gens) != 3 {
		t.Fatalf("active instance addresses after the apply: %v, want vm-a, vm-b and vm-c", gens)
	}

	statePath := filepath.Join(w.dir, "terraform.tfstate")
	state, instances := readState(t, statePath)
	owner := map[string]string{"a": "vm-a", "b": "vm-b", "c": "vm-c"}
	for name, inst := range instances {
		keys := privateKeys(t, inst["private"])
		if want := map[string]string{"g": gens[owner[name]]}; !maps.Equal(keys, want) {
			t.Fatalf("%s's private state: %v, want only the generation as a bare number %v", name, keys, want)
		}
	}

	// The state as an earlier build wrote it: a's and c's entries name their
	// current generation, b's one that is no longer current.
	old := func(gen int64) string {
		inner, _ := json.Marshal(map[string]int64{"generation": gen})
		outer, _ := json.Marshal(map[string][]byte{"generation": inner})
		return base64.StdEncoding.EncodeToString(outer)
	}
	genA, _ := strconv.ParseInt(gens["vm-a"], 10, 64)
	genB, _ := strconv.ParseInt(gens["vm-b"], 10, 64)
	genC, _ := strconv.ParseInt(gens["vm-c"], 10, 64)
	instances["a"]["private"] = old(genA)
	instances["b"]["private"] = old(genB + 7)
	instances["c"]["private"] = old(genC)
	raw, err := json.MarshalIndent(state, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statePath, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	// A refresh of c writes the short form in place of the old one.
	w.run("apply", "-refresh-only", "-input=false", "-auto-approve", "-target=ipam_instance_address.c")
	_, instances = readState(t, statePath)
	if keys, want := privateKeys(t, instances["c"]["private"]), map[string]string{"g": gens["vm-c"]}; !maps.Equal(keys, want) {
		t.Fatalf("c's private state after its refresh: %v, want %v (the old entry replaced by the short one)", keys, want)
	}

	out := w.run("destroy", "-input=false", "-auto-approve", "-refresh=false")
	if !strings.Contains(string(out), "Resources: 3 destroyed.") {
		t.Fatalf("destroy:\n%s", out)
	}
	rows := queryMap(t, url, `SELECT owner_id, state FROM ipam_allocations WHERE owner_kind = 'instance'`)
	if rows["vm-a"] != "cooling" {
		t.Errorf("vm-a, whose old-form entry named its generation: %q after the destroy, want cooling", rows["vm-a"])
	}
	if rows["vm-b"] != "active" {
		t.Errorf("vm-b, whose old-form entry named a past generation: %q after the destroy, want active (a stale release does nothing)", rows["vm-b"])
	}
	if rows["vm-c"] != "cooling" {
		t.Errorf("vm-c, refreshed into the short form: %q after the destroy, want cooling", rows["vm-c"])
	}
}

// readState reads a local state file: the whole document, and each
// resource's (first) instance object by resource name, which share maps.
func readState(t *testing.T, path string) (map[string]any, map[string]map[string]any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	if err := json.Unmarshal(raw, &state); err != nil {
		t.Fatal(err)
	}
	instances := map[string]map[string]any{}
	for _, r := range state["resources"].([]any) {
		r := r.(map[string]any)
		instances[r["name"].(string)] = r["instances"].([]any)[0].(map[string]any)
	}
	return state, instances
}

// privateKeys decodes a state's private entry (the framework's JSON object of
// base64 values, base64-encoded by Terraform): key -> its value's text.
func privateKeys(t *testing.T, private any) map[string]string {
	t.Helper()
	s, _ := private.(string)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("private state %q: %v", s, err)
	}
	var m map[string][]byte
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("private state %s: %v", b, err)
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}
