package e2e

import (
	"bytes"
	"context"
	"net/netip"
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// A saved plan applied after its plan-time hold expired and another owner
// took the address: Terraform's final plan cannot match the saved one, so it
// stops the resource before apply; the provider's warning, shown with that
// error, says why and to plan again, nothing is allocated for the owner, and
// a new plan applies.
func TestSavedPlanAfterItsHoldWasLost(t *testing.T) {
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
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, Actor: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: ipam.Owner{Kind: ipam.OwnerNode, ID: "thief", NodeID: "thief"}, Address: addr}); err != nil {
		t.Fatal(err)
	}
	out, err := w.try("apply", "-input=false", "tfplan")
	if err == nil {
		t.Fatalf("the saved plan applied after its address was taken:\n%s", out)
	}
	for _, want := range []string{"Earlier Planned Address Was Taken", planned, "run terraform plan again"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	if _, err := st.GetActive(ctx, "c1", ipam.OwnerNode, "lost-1"); err == nil {
		t.Fatal("an address was allocated for the failed resource")
	}
	w.run("apply", "-input=false", "-auto-approve")
	if got := w.addresses("")["ipam_node_address.n"]; got == "" || got == planned {
		t.Fatalf("after a new plan: %q", got)
	}
}
