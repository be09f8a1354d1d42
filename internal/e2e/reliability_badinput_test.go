package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input that HCL source cannot carry, in a JSON configuration
// (main.tf.json): duplicate keys, a lone UTF-16 surrogate, a raw byte that is
// not UTF-8, and NUL. Terraform replaces invalid text with U+FFFD before any
// provider sees it (so invalid UTF-8 never reaches the IPAM; the core's
// ValidateID refuses it anyway, see FuzzValidateID), and the provider refuses
// what is left, naming the attribute. Nothing is written. The table of HCL
// inputs is TestAccBadInput_table in internal/provider/badinput_test.go.
func TestBadInputJSONConfigs(t *testing.T) {
	t.Parallel()
	url := setup(t)
	tables := []string{"ipam_clusters", "ipam_pools", "ipam_pool_stripes", "ipam_pool_counters", "ipam_pool_cooling", "ipam_allocations", "ipam_events", "ipam_allocation_failures"}
	counts := func() string {
		var b strings.Builder
		for _, table := range tables {
			fmt.Fprintf(&b, "%s=%d ", table, countRows(t, url, "SELECT count(*) FROM "+table))
		}
		return b.String()
	}
	before := counts()
	const head = `{"terraform": {"required_providers": {"ipam": {"source": "overlayipam/ipam"}}}, "provider": {"ipam": {}},
 "resource": {"ipam_node_address": {"bad": {"cluster_id": "c1", `
	cases := []struct{ name, body, want string }{
		{"duplicate key", `"node_id": "a", "node_id": "b"`, `The argument "node_id" was already set`},
		{"lone surrogate", `"node_id": "n\udc80x"`, "Invalid node_id"},
		{"raw byte 0xff", "\"node_id\": \"n\xffx\"", "Invalid node_id"},
		{"NUL", `"node_id": "n\u0000x"`, "Invalid node_id"},
		{"SQL in a JSON string", `"node_id": "x\"; DROP TABLE ipam_events; --"`, "Invalid node_id"},
	}
	for _, c := range cases {
		w := newWorkdir(t, url, "")
		if err := os.Remove(filepath.Join(w.dir, "main.tf")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w.dir, "main.tf.json"), []byte(head+c.body+"}}}}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := w.try("plan", "-input=false")
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: plan: %v, want an error saying %q:\n%s", c.name, err, c.want, out)
		}
		if after := counts(); after != before {
			t.Errorf("%s: rows changed: %s, before %s", c.name, after, before)
		}
	}
	t.Logf("%d JSON configurations refused at plan; rows unchanged: %s", len(cases), before)
}
