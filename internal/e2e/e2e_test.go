// Package e2e drives the real terraform binary against the built provider
// (dev_overrides) and a real PostgreSQL, as several users would: separate
// working directories and states, processes at once, saved plans, killed applies.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

var (
	terraformBin string
	cliConfig    string
)

// The tests' wall-clock limits are bounds on hangs, generous for a busy
// machine (make test runs every package at once on few cores), never
// performance targets: speed is make bench's business.
const (
	// commandBound: one terraform, ipamctl or shell command of a test.
	commandBound = 15 * time.Minute
	// waitBound: a wait for something that normally takes moments (a
	// server to reload, an apply to make its first allocations).
	waitBound = 5 * time.Minute
)

// TestMain builds the provider once and writes a CLI configuration whose
// dev_overrides point terraform at it, so no registry is ever contacted.
func TestMain(m *testing.M) {
	if os.Getenv("TF_ACC") == "" {
		if os.Getenv("CI") != "" {
			fmt.Fprintln(os.Stderr, "TF_ACC is not set in CI: end-to-end tests must run (use `make test`)")
			os.Exit(1)
		}
		fmt.Println("e2e: TF_ACC not set; skipping the end-to-end tests (make test runs them)")
		os.Exit(0)
	}
	terraformBin = os.Getenv("TF_ACC_TERRAFORM_PATH")
	if terraformBin == "" {
		p, err := exec.LookPath("terraform")
		if err != nil {
			fmt.Fprintln(os.Stderr, "no terraform: run `make test`, which provides one")
			os.Exit(1)
		}
		terraformBin = p
	}
	dir, err := os.MkdirTemp("", "ipam-e2e-")
	if err != nil {
		panic(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "terraform-provider-ipam"), "../..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the provider:", err)
		os.Exit(1)
	}
	cliConfig = filepath.Join(dir, "terraformrc")
	// Both registry addresses: terraform resolves overlayipam/ipam under
	// registry.terraform.io, OpenTofu under registry.opentofu.org.
	rc := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"registry.terraform.io/overlayipam/ipam\" = %[1]q\n"+
		"    \"registry.opentofu.org/overlayipam/ipam\" = %[1]q\n  }\n  direct {}\n}\n", dir)
	if err := os.WriteFile(cliConfig, []byte(rc), 0o600); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// workdir is one user's Terraform working directory with its own state.
type workdir struct {
	t   *testing.T
	dir string
	url string
	env []string // more environment for terraform
}

func newWorkdir(t *testing.T, url, hcl string) *workdir {
	t.Helper()
	w := &workdir{t: t, dir: t.TempDir(), url: url}
	w.write(hcl)
	return w
}

// write replaces the configuration (after the provider's blocks).
func (w *workdir) write(hcl string) {
	w.t.Helper()
	main := "terraform {\n  required_providers {\n    ipam = { source = \"overlayipam/ipam\" }\n  }\n}\n\nprovider \"ipam\" {}\n\n" + hcl
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(main), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

func (w *workdir) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, terraformBin, args...)
	cmd.Dir = w.dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"IPAM_DATABASE_URL="+w.url, "TF_LOG=")
	cmd.Env = append(cmd.Env, w.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run runs terraform and returns its standard output, failing on error.
func (w *workdir) run(args ...string) []byte {
	w.t.Helper()
	out, err := w.try(args...)
	if err != nil {
		w.t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// try runs terraform and returns its output: on failure its standard error
// first, so that the error leads a failure message however long the plan
// before it (CI shows a failure's beginning).
func (w *workdir) try(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := w.command(ctx, append(args, "-no-color")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return append(stderr.Bytes(), stdout.Bytes()...), err
	}
	return stdout.Bytes(), nil
}

// addresses reads resource address -> "address" attribute from `terraform
// show -json` of a plan file (planned values) or of the state.
func (w *workdir) addresses(planFile string) map[string]string {
	w.t.Helper()
	return w.values(planFile, "address")
}

// values is addresses for another string attribute.
func (w *workdir) values(planFile, attr string) map[string]string {
	w.t.Helper()
	args := []string{"show", "-json"}
	if planFile != "" {
		args = append(args, planFile)
	}
	return valuesOf(w.t, w.run(args...), attr)
}

// addressesOf reads resource address -> "address" attribute from the output
// of `terraform show -json`.
func addressesOf(t *testing.T, showJSON []byte) map[string]string {
	t.Helper()
	return valuesOf(t, showJSON, "address")
}

// valuesOf reads resource address -> the string attribute attr (known
// ones only) from the output of `terraform show -json`.
func valuesOf(t *testing.T, showJSON []byte, attr string) map[string]string {
	t.Helper()
	var doc struct {
		PlannedValues *struct {
			RootModule module `json:"root_module"`
		} `json:"planned_values"`
		Values *struct {
			RootModule module `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal(showJSON, &doc); err != nil {
		t.Fatal(err)
	}
	var m module
	switch {
	case doc.PlannedValues != nil:
		m = doc.PlannedValues.RootModule
	case doc.Values != nil:
		m = doc.Values.RootModule
	}
	out := map[string]string{}
	for _, r := range m.Resources {
		if a, ok := r.Values[attr].(string); ok {
			out[r.Address] = a
		}
	}
	return out
}

type module struct {
	Resources []struct {
		Address string         `json:"address"`
		Values  map[string]any `json:"values"`
	} `json:"resources"`
}

// setup creates a database with a cluster and an IPv4 pool, through the core.
func setup(t *testing.T) string {
	t.Helper()
	url := testdb.New(t)
	ctx := context.Background()
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, Actor: "terraform"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateCluster(ctx, ipam.Cluster{ID: "c1", Prefix: netip.MustParsePrefix("2001:db8::/48"),
		NodeCooldown: ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreatePool(ctx, ipam.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24")}}); err != nil {
		t.Fatal(err)
	}
	return url
}

// openAs opens a client of the core as actor on the database at url,
// closed when the test ends.
func openAs(t *testing.T, url, actor string) *ipam.Client {
	t.Helper()
	st, err := ipam.Open(context.Background(), ipam.Config{DatabaseURL: url, Actor: actor})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// mixed writes n resources for one user: node, instance and IPv4 in turn.
func mixed(user string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%d", user, i)
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "resource \"ipam_node_address\" %q {\n  cluster_id = \"c1\"\n  node_id = %q\n}\n", "r"+id, id)
		case 1:
			fmt.Fprintf(&b, "resource \"ipam_instance_address\" %q {\n  cluster_id = \"c1\"\n  instance_id = %q\n  org_id = \"acme\"\n  env_id = %q\n}\n", "r"+id, id, user)
		default:
			fmt.Fprintf(&b, "resource \"ipam_env_ipv4\" %q {\n  pool_id = \"c1/v4\"\n  org_id = \"acme\"\n  env_id = %q\n}\n", "r"+id, id)
		}
	}
	return b.String()
}

func activeAddresses(t *testing.T, url string) map[string]string {
	t.Helper()
	return queryMap(t, url, `SELECT host(address), owner_kind || '/' || owner_id FROM ipam_allocations WHERE state = 'active'`)
}

// queryMap runs q, which selects two text columns, into a map of the
// first to the second.
func queryMap(t *testing.T, url, q string) map[string]string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Several users plan and apply at once against one database, each with a
// saved plan applied later: every planned address is the applied one, none is
// handed out twice, and the database holds exactly what the states hold.
func TestConcurrentAppliesMatchTheirPlans(t *testing.T) {
	t.Parallel()
	url := setup(t)
	const users, each = 4, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied := map[string]string{} // address -> user/resource
	for u := 0; u < users; u++ {
		w := newWorkdir(t, url, mixed(fmt.Sprintf("u%d", u), each))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := w.try("plan", "-input=false", "-out=tfplan"); err != nil {
				t.Errorf("plan: %v\n%s", err, out)
				return
			}
			planned := w.addresses("tfplan")
			if len(planned) != each {
				t.Errorf("%s: %d addresses known at plan, want %d", w.dir, len(planned), each)
			}
			time.Sleep(200 * time.Millisecond) // the saved plan is applied later
			if out, err := w.try("apply", "-input=false", "tfplan"); err != nil {
				t.Errorf("apply: %v\n%s", err, out)
				return
			}
			state := w.addresses("")
			mu.Lock()
			defer mu.Unlock()
			for res, addr := range state {
				if planned[res] != addr {
					t.Errorf("%s: planned %q, applied %q", res, planned[res], addr)
				}
				if prev, dup := applied[addr]; dup {
					t.Errorf("%s handed out twice: %s and %s", addr, prev, res)
				}
				applied[addr] = w.dir + ":" + res
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	db := activeAddresses(t, url)
	if len(applied) != users*each || len(db) != users*each {
		t.Fatalf("%d addresses in states, %d active in the database, want %d", len(applied), len(db), users*each)
	}
	for addr := range applied {
		if _, ok := db[addr]; !ok {
			t.Errorf("%s is in a state but not active in the database", addr)
		}
	}
}

// An apply killed half way leaks nothing: the next apply adopts what the
// killed one allocated, and every active allocation ends up in the state.
func TestKilledApplyIsAdopted(t *testing.T) {
	url := setup(t)
	const n = 45
	w := newWorkdir(t, url, mixed("k", n))
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := w.command(ctx, "apply", "-input=false", "-auto-approve", "-parallelism=1", "-no-color")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill terraform and its provider process once some addresses are allocated.
	deadline := time.Now().Add(waitBound)
	for len(activeAddresses(t, url)) < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("the apply made no progress:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	before := len(activeAddresses(t, url))
	if before >= n {
		t.Fatalf("the apply finished before it was killed (%d allocations); the test proves nothing", before)
	}
	t.Logf("killed the apply after %d of %d allocations", before, n)
	// A SIGKILL during terraform's write of the local state can leave it torn
	// (terraform's own file, rewritten in place): a person would put the
	// backup back or drop it. Dropped here: the next apply from the same
	// directory adopts every allocation all the same.
	if b, err := os.ReadFile(filepath.Join(w.dir, "terraform.tfstate")); err == nil && !json.Valid(b) {
		t.Logf("the kill tore the state file (%d bytes): removed", len(b))
		if err := os.Remove(filepath.Join(w.dir, "terraform.tfstate")); err != nil {
			t.Fatal(err)
		}
	}
	// A SIGKILL leaves the local state lock behind; a person would force-unlock.
	w.run("apply", "-input=false", "-auto-approve", "-lock=false")
	state := w.addresses("")
	db := activeAddresses(t, url)
	if len(state) != n || len(db) != n {
		t.Fatalf("%d resources in state, %d active allocations, want %d each", len(state), len(db), n)
	}
	for res, addr := range state {
		if _, ok := db[addr]; !ok {
			t.Errorf("%s: %s not active in the database", res, addr)
		}
	}
	// A further plan is empty: nothing to create, nothing leaked.
	if out := w.run("plan", "-input=false", "-detailed-exitcode", "-lock=false"); !bytes.Contains(out, []byte("No changes")) {
		t.Fatalf("plan after recovery is not empty:\n%s", out)
	}
}
