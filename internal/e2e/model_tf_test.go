package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
)

// TestModelTerraform is the Terraform-level variant of the core's randomized
// model test: a few users, each with its own configuration, state and actor,
// apply random edits of their configurations concurrently with the real
// terraform binary. Owners and exact claims overlap between users, so some
// applies are refused (owner_conflict, address_in_use); none may fail with a
// provider bug. After every round the database's invariants hold
// (ipam.Check plus the SQL checks) and every state matches the database:
// each address in a state is the active address of that resource's owner.
//
// IPAM_MODEL_SEED replays a seed; IPAM_MODEL_TF_ROUNDS sets the rounds
// (default 3; 12 under IPAM_SOAK=1).
func TestModelTerraform(t *testing.T) {
	seed := testdb.ModelSeed(t)
	rounds := 3
	if os.Getenv("IPAM_SOAK") != "" {
		rounds = 12
	}
	if s := os.Getenv("IPAM_MODEL_TF_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("IPAM_MODEL_TF_ROUNDS: %v", err)
		}
		rounds = n
	}
	t.Logf("seed %d (replay with IPAM_MODEL_SEED=%d), %d rounds", seed, seed, rounds)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	url := setup(t)

	const users = 3
	dirs := make([]*workdir, users)
	for u := range dirs {
		dirs[u] = &workdir{t: t, dir: t.TempDir(), url: url}
	}
	applies, refused := 0, 0
	for round := 0; round < rounds; round++ {
		configs := make([]string, users)
		for u := range configs {
			configs[u] = randomConfig(rng, u)
			if err := os.WriteFile(filepath.Join(dirs[u].dir, "main.tf"), []byte(configs[u]), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		outs := make([][]byte, users)
		errs := make([]error, users)
		var wg sync.WaitGroup
		for u := range dirs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[u], errs[u] = dirs[u].try("apply", "-input=false", "-auto-approve", "-parallelism=4")
			}()
		}
		wg.Wait()
		for u := range dirs {
			applies++
			if errs[u] != nil {
				refused++
			}
			for _, bug := range []string{"Provider produced", "panic:", "plugin exited", "concurrent change, retry"} {
				if bytes.Contains(outs[u], []byte(bug)) {
					t.Fatalf("seed %d round %d user %d: %q in terraform's output (config below):\n%s\n---\n%s", seed, round, u, bug, outs[u], configs[u])
				}
			}
			if errs[u] != nil && !expectedRefusal(outs[u]) {
				t.Fatalf("seed %d round %d user %d: apply failed for a reason other than a conflict:\n%s\n---\n%s", seed, round, u, outs[u], configs[u])
			}
		}
		checkInvariants(t, url)
		for u := range dirs {
			checkStateMatchesDatabase(t, dirs[u], url, fmt.Sprintf("seed %d round %d user %d", seed, round, u))
		}
		if t.Failed() {
			t.Fatalf("seed %d: stopping after round %d", seed, round)
		}
	}
	for u := range dirs {
		if out, err := dirs[u].try("destroy", "-input=false", "-auto-approve"); err != nil {
			t.Fatalf("seed %d: destroy of user %d: %v\n%s", seed, u, err, out)
		}
	}
	checkInvariants(t, url)
	t.Logf("seed %d: %d rounds, %d applies (%d refused by a conflict), invariants held", seed, rounds, applies, refused)
}

// randomConfig draws a configuration for user u: its own owners, owners
// shared with the other users, and exact claims that may collide.
func randomConfig(rng *rand.Rand, u int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "terraform {\n  required_providers {\n    ipam = { source = \"overlayipam/ipam\" }\n  }\n}\n\n")
	fmt.Fprintf(&b, "provider \"ipam\" {\n  actor = \"user-%d\"\n}\n\n", u)
	nodes := []string{}
	for k := 0; k < 4; k++ {
		if rng.IntN(3) == 0 {
			continue
		}
		id := fmt.Sprintf("u%d-n%d", u, k)
		nodes = append(nodes, id)
		claim := ""
		if rng.IntN(4) == 0 {
			claim = fmt.Sprintf("  address = \"2001:db8::%x\"\n", 0x100+rng.IntN(6))
		}
		fmt.Fprintf(&b, "resource \"ipam_node_address\" %q {\n  cluster_id = \"c1\"\n  node_id = %q\n%s}\n", id, id, claim)
	}
	for k := 0; k < 2; k++ {
		if rng.IntN(2) == 0 {
			id := fmt.Sprintf("shared-n%d", k)
			fmt.Fprintf(&b, "resource \"ipam_node_address\" %q {\n  cluster_id = \"c1\"\n  node_id = %q\n}\n", id, id)
		}
	}
	for k := 0; k < 5; k++ {
		if rng.IntN(3) == 0 {
			continue
		}
		id := fmt.Sprintf("u%d-i%d", u, k)
		node := ""
		if len(nodes) > 0 && rng.IntN(2) == 0 {
			node = fmt.Sprintf("  node_id = %q\n", nodes[rng.IntN(len(nodes))])
		}
		fmt.Fprintf(&b, "resource \"ipam_instance_address\" %q {\n  cluster_id = \"c1\"\n  instance_id = %q\n  org_id = \"acme\"\n  env_id = \"e%d\"\n%s}\n",
			id, id, rng.IntN(3), node)
	}
	for k := 0; k < 3; k++ {
		if rng.IntN(2) == 0 {
			continue
		}
		env := fmt.Sprintf("u%d-e%d", u, k)
		if k == 2 {
			env = "shared-e" // one environment several users want an IPv4 for
		}
		fmt.Fprintf(&b, "resource \"ipam_env_ipv4\" %q {\n  pool_id = \"c1/v4\"\n  org_id = \"acme\"\n  env_id = %q\n}\n", fmt.Sprintf("e%d", k), env)
	}
	return b.String()
}

// expectedRefusal: an apply may fail only because users want the same owner
// or the same exact address.
func expectedRefusal(out []byte) bool {
	for _, ok := range []string{"owner_conflict", "address_in_use", "address_cooling"} {
		if bytes.Contains(out, []byte(ok)) {
			return true
		}
	}
	return false
}

// checkStateMatchesDatabase: every address resource in the state holds the
// active allocation of its owner, with the state's address.
func checkStateMatchesDatabase(t *testing.T, w *workdir, url, where string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, r := range w.ownedResources() {
		kind, owner, _ := strings.Cut(r.Owner, "/")
		var addr string
		err := c.QueryRow(ctx, `SELECT host(address) FROM ipam_allocations WHERE cluster_id = 'c1' AND owner_kind = $1
			AND owner_id = $2 AND state = 'active'`, kind, owner).Scan(&addr)
		if err != nil {
			t.Errorf("%s: %s (%s %s) is in the state with %v, but the database holds no active address for it: %v",
				where, r.Resource, kind, owner, r.Address, err)
			continue
		}
		if r.Address != addr {
			t.Errorf("%s: %s has %s in the state, but the database gives %s %s %s", where, r.Resource, r.Address, kind, owner, addr)
		}
	}
}
