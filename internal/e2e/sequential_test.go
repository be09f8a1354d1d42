package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
)

// sequentialRuns is how many applies TestApplyHandsOutConsecutiveNodeAddresses
// makes of each size: normal in make test, 50 in make soak, or
// IPAM_SEQUENTIAL_RUNS.
func sequentialRuns(t *testing.T, normal int) int {
	if v := os.Getenv("IPAM_SEQUENTIAL_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("IPAM_SEQUENTIAL_RUNS=%q: want a positive number of runs", v)
		}
		return n
	}
	return pick(normal, 50)
}

// One apply that creates a cluster and n node addresses (for_each, at
// Terraform's default parallelism, so that the provider allocates them at
// once and shares statements) gives the nodes the first n addresses of the
// node prefix, ::1 to ::n, whatever order Terraform creates them in. Each
// run is a new cluster in its own working directory; make test makes a few
// runs of 20 nodes, make soak 50 of 3 and 50 of 20.
func TestApplyHandsOutConsecutiveNodeAddresses(t *testing.T) {
	t.Parallel()
	url := testdb.New(t)
	for _, size := range []struct{ nodes, normal int }{{3, 0}, {20, 5}} {
		runs := sequentialRuns(t, size.normal)
		if runs == 0 {
			continue // make test runs the larger size only
		}
		for run := range runs {
			seq := size.nodes*1000 + run
			prefix := netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/48", seq))
			ids := make([]string, size.nodes)
			for i := range ids {
				ids[i] = fmt.Sprintf("n%02d", i+1)
			}
			w := newWorkdir(t, url, fmt.Sprintf(`resource "ipam_cluster" "c" {
  name   = "seq-%d"
  prefix = %q
}
resource "ipam_node_address" "n" {
  for_each   = toset([%s])
  cluster_id = ipam_cluster.c.id
  node_id    = each.key
}
`, seq, prefix, `"`+strings.Join(ids, `", "`)+`"`))
			w.run("apply", "-input=false", "-auto-approve")
			got := w.addresses("")
			var addrs []netip.Addr
			for res, a := range got {
				if strings.HasPrefix(res, "ipam_node_address.") {
					addrs = append(addrs, netip.MustParseAddr(a))
				}
			}
			sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
			want := prefix.Addr()
			ok := len(addrs) == size.nodes
			for _, a := range addrs {
				want = want.Next()
				ok = ok && a == want
			}
			if !ok {
				t.Fatalf("run %d of %d nodes: the nodes got %v, want %s::1 to ::%x", run+1, size.nodes, addrs,
					strings.TrimSuffix(prefix.Addr().String(), "::"), size.nodes)
			}
		}
		where := fmt.Sprintf(`FROM ipam_allocations WHERE cluster_id LIKE 'seq-%d%%'`, size.nodes)
		rows, txs := count(t, url, `SELECT count(*) `+where), count(t, url, `SELECT count(DISTINCT xmin::text) `+where)
		t.Logf("%d applies of a cluster and %d node addresses: each gave the first %d addresses (%d rows written by %d transactions)",
			runs, size.nodes, size.nodes, rows, txs)
	}
}
