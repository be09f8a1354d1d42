package e2e

// The node-enrollment README's walk-through "From a fresh clone", run as the
// page shows it (its block is marked not-run with the key [fresh-clone]): in a
// copy of the repository, from its second line on (the first clones from
// GitHub), as a reader with a home of their own types it. It starts its own
// PostgreSQL in .demo/pg, installs the provider with make install-mirror and
// the CLI configuration that prints, builds the second provider into the same
// mirror, and runs an unmodified init and an apply of a root module that calls
// cluster-bootstrap and node-enrollment and uses the second provider; then the
// destroy and make demo-down. With Terraform, and with OpenTofu when
// IPAM_E2E_TOFU names it (`tofu` typed for `terraform`, as the page says).
//
// Nothing is downloaded: the walk-through's second provider is the one of the
// install test (internal/e2e/echoprovider), which the page builds itself, and
// terraform is the tests' own.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/internal/tfcli"
)

const freshCloneReadme = "examples/modules/node-enrollment/README.md"

// The walk-through's cluster, which the page names.
const (
	freshCloneCluster = "modules"
	freshClonePrefix  = "2001:db8:c10e::/48"
)

var freshCloneNodes = []string{"node-a", "node-b", "node-c"}

// The node-enrollment README's fresh-clone walk-through, run in a copy of the
// repository with Terraform (and OpenTofu when IPAM_E2E_TOFU names it): init
// installs the IPAM provider from make install-mirror's mirror and a second
// provider, and writes both to the lock file; the apply enrolls three nodes
// with addresses in the cluster's node prefix and outputs their WireGuard
// peers; the destroy and make demo-down leave no resource, no server and no
// .demo/.
func TestFreshClone(t *testing.T) {
	t.Parallel()
	block := pageBlock(t, freshCloneReadme, "fresh-clone")
	lines := strings.SplitAfter(block, "\n")
	if !strings.HasPrefix(lines[0], "git clone https://github.com/overlayipam/terraform-provider-ipam") ||
		!strings.Contains(lines[0], "&& cd terraform-provider-ipam") || strings.Contains(strings.Join(lines[1:], ""), "git clone") {
		t.Fatalf("%s: the walk-through does not start with its one line that clones the repository and goes into it:\n%s", freshCloneReadme, block)
	}
	script := strings.Join(lines[1:], "")

	clis := clisUnderTest(t)
	covered := map[string]bool{}
	for _, c := range clis {
		covered[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			freshClone(t, c, script)
		})
	}
	if !covered["tofu"] {
		t.Run("tofu", func(t *testing.T) {
			why := "the fresh-clone walk-through with OpenTofu runs when " + EnvE2ETofu + " names a tofu binary (or the suite runs under tofu)"
			tfcli.NoteSkip(t, why)
			t.Skip(why)
		})
	}
}

// freshClone runs the walk-through's script (the block without its clone
// line) with one CLI in a copy of the repository and checks what it did.
func freshClone(t *testing.T, c cli, script string) {
	src := copyWorkingTree(t)
	// If the walk-through fails before make demo-down, its server is stopped here.
	t.Cleanup(func() {
		_ = exec.Command("bash", filepath.Join(src, "scripts", "pg.sh"), "stop", filepath.Join(src, ".demo", "pg")).Run()
	})

	// An OpenTofu reader types tofu where the page says terraform.
	cmdRE := regexp.MustCompile(`(?m)^terraform ([a-z])`)
	if n := len(cmdRE.FindAllString(script, -1)); n < 3 {
		t.Fatalf("%s: the walk-through has %d terraform commands, want init, apply and destroy:\n%s", freshCloneReadme, n, script)
	}
	script = cmdRE.ReplaceAllString(script, c.name+" $1")

	// What the apply did, kept before the destroy and make demo-down remove
	// it: the state, the lock file, and the server's process ID. The one line
	// the test adds to the page's script.
	keep := t.TempDir()
	apply := "\n" + c.name + " apply\n"
	script = replaced(t, script, apply, apply+c.name+" show -json > "+strconv.Quote(filepath.Join(keep, "state.json"))+
		" && cp .terraform.lock.hcl "+strconv.Quote(keep)+
		" && head -n 1 ../pg/data/postmaster.pid > "+strconv.Quote(filepath.Join(keep, "pid"))+"\n")

	out, err := runAnswering(t, src, freshCloneEnv(t, c), script)
	if err != nil {
		t.Fatalf("%s: the walk-through failed with %s (%v):\n%s\noutput:\n%s", freshCloneReadme, c.name, err, script, out)
	}

	// init installed both providers from the mirror, and the lock file names them.
	m := regexp.MustCompile(`Installed overlayipam/ipam v(\S+) \(unauthenticated\)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "Installed example/echo v1.0.0 (unauthenticated)") {
		t.Fatalf("init did not install both providers from the mirror:\n%s", out)
	}
	lock := filepath.Join(keep, ".terraform.lock.hcl")
	for addr, want := range map[string]string{c.host + "/overlayipam/ipam": m[1], c.host + "/example/echo": "1.0.0"} {
		if v, hashes := lockEntry(t, lock, addr); v != want || !slices.ContainsFunc(hashes, func(h string) bool { return strings.HasPrefix(h, "h1:") }) {
			t.Errorf("the lock file has %s at %q with %v, want %s with its h1: checksum:\n%s", addr, v, hashes, want, mustRead(t, lock))
		}
	}

	// The apply: the page's cluster, three nodes in its node prefix, their
	// WireGuard peers, and the second provider's resource.
	st := readFreshCloneState(t, filepath.Join(keep, "state.json"))
	cluster := st.resources["module.cluster.ipam_cluster.this"]
	if cluster["id"] != freshCloneCluster || cluster["prefix"] != freshClonePrefix {
		t.Errorf("the cluster is %v %v, want the page's %s %s", cluster["id"], cluster["prefix"], freshCloneCluster, freshClonePrefix)
	}
	nodePrefix, err := netip.ParsePrefix(str(cluster["node_prefix"]))
	if err != nil || !netip.MustParsePrefix(freshClonePrefix).Contains(nodePrefix.Addr()) {
		t.Fatalf("the cluster's node prefix %v is not in %s (%v)", cluster["node_prefix"], freshClonePrefix, err)
	}
	if got := sortedKeys(st.peers); !slices.Equal(got, freshCloneNodes) {
		t.Fatalf("wireguard_peers has %v, want %v: %v", got, freshCloneNodes, st.peers)
	}
	seen := map[netip.Addr]string{}
	for _, node := range freshCloneNodes {
		p := st.peers[node]
		a, err := netip.ParseAddr(p.Address)
		switch {
		case err != nil || !nodePrefix.Contains(a):
			t.Errorf("%s's address %q is not in the node prefix %s", node, p.Address, nodePrefix)
		case seen[a] != "":
			t.Errorf("%s and %s both have %s", seen[a], node, a)
		case p.AllowedIPs != a.String()+"/128":
			t.Errorf("%s's allowed_ips is %q, want %s/128", node, p.AllowedIPs, a)
		case str(st.resources[`module.nodes.ipam_node_address.this["`+node+`"]`]["address"]) != p.Address:
			t.Errorf("%s's output address %s is not its ipam_node_address's %v", node, p.Address, st.resources[`module.nodes.ipam_node_address.this["`+node+`"]`])
		}
		seen[a] = node
	}
	if echoed := str(st.resources["echo_text.node_a"]["text"]); echoed != st.peers["node-a"].Address {
		t.Errorf("the second provider's echo_text.node_a holds %q, want node-a's address %s", echoed, st.peers["node-a"].Address)
	}

	// The apply and the destroy each took every resource of the state, and
	// make demo-down stopped the server and removed .demo/.
	n := strconv.Itoa(len(st.resources))
	for _, want := range []string{"Apply complete! Resources: " + n + " added, 0 changed, 0 destroyed.", "Destroy complete! Resources: " + n + " destroyed."} {
		if !strings.Contains(out, want) {
			t.Errorf("the output does not say %q:\n%s", want, out)
		}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(mustRead(t, filepath.Join(keep, "pid"))))
	if err != nil {
		t.Fatalf("the server's process ID: %v", err)
	}
	// pg.sh stop returns once the server has removed its pid file, moments
	// before the process is gone.
	for deadline := time.Now().Add(waitBound); processRuns(pid); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the walk-through's PostgreSQL (process %d) still runs %s after make demo-down", pid, waitBound)
			break
		}
	}
	if _, err := os.Stat(filepath.Join(src, ".demo")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("make demo-down left .demo/ (%v)", err)
	}
}

// freshCloneEnv is a reader's environment: no TF_, PG or IPAM_ settings, a
// home of their own (no CLI configuration, no plugin cache) but the machine's
// Go caches and settings, and the CLI on PATH.
func freshCloneEnv(t *testing.T, c cli) []string {
	t.Helper()
	goEnv := map[string]string{}
	out, err := exec.Command("go", "env", "-json", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV").Output()
	if err == nil {
		err = json.Unmarshal(out, &goEnv)
	}
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	tools := t.TempDir()
	if err := os.Symlink(c.bin, filepath.Join(tools, c.name)); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range makeEnv() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TF_") || strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "IPAM_") ||
			k == "HOME" || k == "PATH" || k == "DEMO_DIR" || k == "XDG_CONFIG_HOME" || k == "XDG_DATA_HOME" {
			continue
		}
		if _, ok := goEnv[k]; ok {
			continue
		}
		env = append(env, kv)
	}
	for _, k := range sortedKeys(goEnv) {
		env = append(env, k+"="+goEnv[k])
	}
	return append(env, "HOME="+t.TempDir(), "PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CHECKPOINT_DISABLE=1",
		// Failures read better without colour codes.
		"TF_CLI_ARGS=-no-color")
}

// processRuns reports whether a process exists and is not a zombie.
func processRuns(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: the state follows the last ")".
	_, rest, _ := bytes.Cut(stat[bytes.LastIndexByte(stat, ')')+1:], []byte(" "))
	return !bytes.HasPrefix(rest, []byte("Z"))
}

// runAnswering runs a shell script (bash -e) in dir with env, answering "yes"
// to every question (apply, then destroy: as many as are asked, since the
// first to read its standard input may read ahead), and returns its combined
// output.
func runAnswering(t *testing.T, dir string, env []string, script string) (string, error) {
	t.Helper()
	ctx, cancel := testContext(t)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = yesForever{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// yesForever reads as an endless "yes\n" (exec stops copying it when the
// script ends).
type yesForever struct{}

func (yesForever) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = "yes\n"[i%4]
	}
	return len(p), nil
}

type freshCloneState struct {
	resources map[string]map[string]any // address -> values, every module's
	peers     map[string]struct {
		Address    string `json:"address"`
		AllowedIPs string `json:"allowed_ips"`
	}
}

// readFreshCloneState reads the output of `terraform show -json` after the
// apply: the resources of the root module and its modules, and the
// wireguard_peers output.
func readFreshCloneState(t *testing.T, p string) freshCloneState {
	t.Helper()
	type mod struct {
		module
		ChildModules []json.RawMessage `json:"child_modules"`
	}
	var doc struct {
		Values struct {
			Outputs struct {
				Peers struct {
					Value json.RawMessage `json:"value"`
				} `json:"wireguard_peers"`
			} `json:"outputs"`
			RootModule json.RawMessage `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal(mustReadBytes(t, p), &doc); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	st := freshCloneState{resources: map[string]map[string]any{}}
	if err := json.Unmarshal(doc.Values.Outputs.Peers.Value, &st.peers); err != nil {
		t.Fatalf("the wireguard_peers output: %v\n%s", err, mustRead(t, p))
	}
	var walk func(raw json.RawMessage)
	walk = func(raw json.RawMessage) {
		var m mod
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, r := range m.Resources {
			st.resources[r.Address] = r.Values
		}
		for _, c := range m.ChildModules {
			walk(c)
		}
	}
	walk(doc.Values.RootModule)
	return st
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
