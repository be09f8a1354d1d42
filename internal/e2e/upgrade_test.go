package e2e

// The upgrade of docs/guides/upgrading.md, run as the guide shows it: the
// previous release's provider and ipamctl, built from its commit, make a
// database and its allocations; the guide's blocks (marked not-run with a key
// in brackets, taken by the key as TestInstallFromMirror takes the install
// guide's) upgrade a configuration to the provider of this tree, through a
// provider mirror that holds both; what a configuration still on the previous
// release does meanwhile (the mixed fleet) is run, not assumed; and the
// guide's rollback restores the backup into a new database.
//
// Nothing is downloaded: the previous release is built from this clone's
// history with the Go module cache and proxy, and terraform is the tests' own.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/internal/tfcli"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// previousRelease is what the upgrade starts from: anything `git archive`
// takes (a tag or a commit) whose provider and ipamctl stand for the previous
// release. No release is tagged yet, so a commit of main stands in for it:
// the last one at schema version 18, before migration 19 (c63c44d). Its
// database is taken through seven migrations, the function definitions of
// migration 21 among them, and it has every resource of the provider
// (clusters, pools, node and instance addresses, the IPv4 add-on, address
// sets, node instance blocks). Once v0.1.0 is tagged, "v0.1.0" replaces it,
// and later each release's predecessor.
const previousRelease = "0d4e3536c73e0bd83a581525415cdc4aee63c114"

const upgradeGuide = "docs/guides/upgrading.md"

// The versions the test's provider mirror gives the two builds: its own
// labels, which the configurations ask for as the guide's [version] block does.
const (
	previousVersion = "0.0.1"
	currentVersion  = "0.0.2"
)

// The guide's placeholders, which the test replaces with its own.
const (
	guideVersion      = `"0.2.0"`
	guideRestoredName = "ipam_restored"
)

// buildPreviousRelease builds the provider and ipamctl of previousRelease
// (git archive of the commit, go build) into a directory it returns. An
// archive rather than a git worktree: a killed test leaves no worktree
// registered in the clone that others work in. Without
// the commit in the clone (a shallow one), the test is skipped and says so,
// and fails in CI.
func buildPreviousRelease(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", previousRelease+"^{commit}").CombinedOutput(); err != nil {
		why := fmt.Sprintf("the previous release %s is not in this clone's history (%v%s): fetch it (git fetch --unshallow)",
			previousRelease, err, strings.TrimSpace(" "+string(out)))
		if os.Getenv("CI") != "" {
			t.Fatal(why)
		}
		tfcli.NoteSkip(t, why)
		t.Skip(why)
	}
	src, bin := t.TempDir(), t.TempDir()
	if out, err := runScript(t, root, os.Environ(), fmt.Sprintf("git archive --format=tar %s | tar -x -C %q", previousRelease, src)); err != nil {
		t.Fatalf("git archive %s: %v\n%s", previousRelease, err, out)
	}
	// make build's flags (none but the version stamp), so that the build
	// cache of the tests' own builds serves the dependencies.
	cmd := exec.Command("go", "build", "-ldflags", "-X main.version="+previousVersion, "-o", bin+string(os.PathSeparator), ".", "./cmd/ipamctl")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of %s: %v\n%s", previousRelease, err, out)
	}
	return bin
}

// upgrade is the test's fleet: one database, a provider mirror holding both
// releases, and a tool directory per release (its ipamctl, the tests' terraform).
type upgrade struct {
	t                   *testing.T
	url                 string // the database
	config              string // the CLI configuration file: the mirror
	prevTools, curTools string
}

// toolsWith is a directory with the tests' terraform and the given ipamctl.
func toolsWith(t *testing.T, ctl string) string {
	t.Helper()
	dir := t.TempDir()
	for name, target := range map[string]string{"terraform": terraformBin, "ipamctl": ctl} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// releaseMirror lays out a filesystem mirror (the unpacked layout) with a
// provider binary per version, under the CLI's registry host.
func releaseMirror(t *testing.T, host string, builds map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for v, bin := range builds {
		p := filepath.Join(dir, host, "overlayipam", "ipam", v, runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-ipam_v"+v)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(bin, p); err != nil {
			copyFile(t, bin, p)
		}
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// env is a reader's environment: tools first on PATH, the database, the
// mirror's CLI configuration, and no other TF_ or PG settings.
func (u *upgrade) env(tools, url string, more ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); {
		case k == "PATH", k == "IPAM_DATABASE_URL", k == "IPAM_ORIGIN", k == "DEMO_DIR",
			strings.HasPrefix(k, "TF_"), strings.HasPrefix(k, "PG"):
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"),
		"IPAM_DATABASE_URL="+url, "TF_CLI_CONFIG_FILE="+u.config, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1",
		"TF_CLI_ARGS_init=-no-color", "TF_CLI_ARGS_plan=-no-color", "TF_CLI_ARGS_apply=-no-color", "TF_CLI_ARGS_destroy=-no-color")
	return append(env, more...)
}

// sh runs a script (bash -e) in dir, answering "yes" to a question.
func (u *upgrade) sh(dir, tools, url, script string, more ...string) (string, error) {
	u.t.Helper()
	s := &shellEnv{t: u.t, dir: dir, url: url, env: u.env(tools, url, more...)}
	return s.run(dir, script)
}

func (u *upgrade) must(dir, tools, url, script string, more ...string) string {
	u.t.Helper()
	out, err := u.sh(dir, tools, url, script, more...)
	if err != nil {
		u.t.Fatalf("%s: %v\n%s", strings.TrimSpace(script), err, out)
	}
	return out
}

// guide runs a block of the guide line by line, as a reader types it (each
// command answered "yes" on its own), and returns each line's output.
func (u *upgrade) guide(key, dir, tools, url string, more ...string) []string {
	u.t.Helper()
	var outs []string
	for _, line := range strings.Split(pageBlock(u.t, upgradeGuide, key), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		outs = append(outs, u.must(dir, tools, url, line, more...))
	}
	return outs
}

// configure writes a configuration's files: the guide's [version] block
// asking for version, the provider block and the resources.
func (u *upgrade) configure(dir, version, provider, hcl string) {
	u.t.Helper()
	files := map[string]string{
		"versions.tf": replaced(u.t, pageBlock(u.t, upgradeGuide, "version"), guideVersion, strconv.Quote(version)),
		"provider.tf": provider,
		"main.tf":     hcl,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			u.t.Fatal(err)
		}
	}
}

// initAt runs terraform init (-upgrade when asked) and checks the version it installed.
func (u *upgrade) initAt(dir, tools, version string, upgrade bool) {
	u.t.Helper()
	var out string
	if upgrade {
		out = u.guide("init", dir, tools, u.url)[0]
	} else {
		out = u.must(dir, tools, u.url, "terraform init -input=false")
	}
	if want := "Installed overlayipam/ipam v" + version; !strings.Contains(out, want) {
		u.t.Fatalf("terraform init in %s did not say %q:\n%s", dir, want, out)
	}
}

// platformConfig is the configuration that the upgrade is guided through:
// a cluster, node addresses, instances (two in a node's instance blocks), an
// IPv4 pool of three addresses with environments' add-ons, an address set
// with a member in that pool, and extra resources.
func platformConfig(nodes []string, vms map[string]string, envs []string, extra string) string {
	q := func(s []string) string {
		quoted := make([]string, len(s))
		for i, v := range s {
			quoted[i] = strconv.Quote(v)
		}
		return "[" + strings.Join(quoted, ", ") + "]"
	}
	var vm []string
	for _, k := range sortedKeys(vms) {
		vm = append(vm, fmt.Sprintf("%q = %q", k, vms[k]))
	}
	return fmt.Sprintf(`resource "ipam_cluster" "prod" {
  name   = "prod"
  prefix = "2001:db8:100::/48"
}

resource "ipam_node_address" "node" {
  for_each   = toset(%s)
  cluster_id = ipam_cluster.prod.id
  node_id    = each.key
}

resource "ipam_node_instance_blocks" "node2" {
  cluster_id          = ipam_cluster.prod.id
  node_id             = ipam_node_address.node["node-2"].node_id
  block_prefix_length = 124
  demand              = 5
}

resource "ipam_instance_address" "vm" {
  for_each    = { %s }
  cluster_id  = ipam_cluster.prod.id
  instance_id = each.key
  org_id      = "acme"
  env_id      = "shop"
  node_id     = each.value
  depends_on  = [ipam_node_address.node, ipam_node_instance_blocks.node2]
}

# Three addresses: .1, .2 and .3 (.0 and .7 are never handed out).
resource "ipam_pool" "public_v4" {
  cluster_id = ipam_cluster.prod.id
  name       = "public-v4"
  cidrs      = ["198.51.100.0/29"]
  exclude    = ["198.51.100.4/31", "198.51.100.6"]
  cooldown   = "24h"
}

resource "ipam_env_ipv4" "env" {
  for_each = toset(%s)
  pool_id  = ipam_pool.public_v4.id
  org_id   = "acme"
  env_id   = each.key
}

resource "ipam_address_set" "vm9" {
  cluster_id  = ipam_cluster.prod.id
  owner_id    = "vm-9"
  org_id      = "acme"
  env_id      = "shop"
  instance_id = "vm-9"
  addresses = {
    overlay = { family = "ipv6" }
    public  = { pools = [ipam_pool.public_v4.id] }
  }
}
%s`, q(nodes), strings.Join(vm, ", "), q(envs), extra)
}

// The team's configuration (another working directory and state, in the
// cluster the platform made): instances, and in its second apply, behind a
// gate that the test opens, a node for the first instance, two more
// instances and a pool.
const teamBase = `resource "ipam_instance_address" "team" {
  for_each    = toset(["team-1", "team-2"])
  cluster_id  = "prod"
  instance_id = each.key
  org_id      = "acme"
  env_id      = "team"
}
`

const teamGated = `# Waits (5 minutes at most) until the test creates gate-open.
resource "terraform_data" "gate" {
  provisioner "local-exec" {
    command = "touch gate-waiting; n=0; while [ ! -e gate-open ] && [ $n -lt 3000 ]; do sleep 0.1; n=$((n+1)); done"
  }
}

resource "ipam_instance_address" "team" {
  for_each    = toset(["team-1", "team-2"])
  cluster_id  = "prod"
  instance_id = each.key
  org_id      = "acme"
  env_id      = "team"
  node_id     = each.key == "team-1" ? "node-1" : null
  depends_on  = [terraform_data.gate]
}

resource "ipam_instance_address" "late" {
  for_each    = toset(["team-3", "team-4"])
  cluster_id  = "prod"
  instance_id = each.key
  org_id      = "acme"
  env_id      = "team"
  depends_on  = [terraform_data.gate]
}

resource "ipam_pool" "team_v4" {
  cluster_id = "prod"
  name       = "team-v4"
  cidrs      = ["192.0.2.0/29"]
  depends_on = [terraform_data.gate]
}
`

// The edge configuration: one node address, and nothing else ever.
const edgeConfig = `resource "ipam_node_address" "edge" {
  cluster_id = "prod"
  node_id    = "edge-1"
}
`

const (
	providerBlock          = "provider \"ipam\" {}\n"
	providerBlockNoMigrate = "provider \"ipam\" {\n  auto_migrate = false\n}\n"
)

// snapshot is every row of the IPAM's tables, each as the JSON of the
// columns named (table -> columns), sorted, by table.
type snapshot map[string][]string

// schemaColumns names the columns of each table of the IPAM's schema (not
// its views, and not the schema version's table, which an upgrade changes).
func schemaColumns(t *testing.T, url string) map[string][]string {
	t.Helper()
	cols := map[string][]string{}
	for k, v := range queryMap(t, url, `SELECT c.table_name::text, string_agg(c.column_name::text, ' ' ORDER BY c.ordinal_position)
		FROM information_schema.columns c
		JOIN information_schema.tables t ON (t.table_schema, t.table_name) = (c.table_schema, c.table_name)
		WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
			AND c.table_name LIKE 'ipam\_%' AND c.table_name <> 'ipam_schema_version'
		GROUP BY c.table_name`) {
		cols[k] = strings.Fields(v)
	}
	return cols
}

// takeSnapshot reads the columns cols names of every table in it.
func takeSnapshot(t *testing.T, url string, cols map[string][]string) snapshot {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	snap := snapshot{}
	for table, names := range cols {
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = pgx.Identifier{n}.Sanitize()
		}
		rows, err := c.Query(ctx, fmt.Sprintf("SELECT row_to_json(x)::text FROM (SELECT %s FROM %s) x",
			strings.Join(quoted, ", "), pgx.Identifier{table}.Sanitize()))
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		list, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		sort.Strings(list)
		snap[table] = list
	}
	return snap
}

// changedRows lists what differs between two snapshots, by table: rows
// gone (-) and rows new (+), except those skip accepts.
func changedRows(before, after snapshot, skip func(table, row string) bool) []string {
	var out []string
	for _, table := range sortedKeys(before) {
		a, b := map[string]int{}, map[string]int{}
		for _, r := range before[table] {
			a[r]++
		}
		for _, r := range after[table] {
			b[r]++
		}
		for _, r := range before[table] {
			if b[r] == 0 && (skip == nil || !skip(table, r)) {
				out = append(out, table+" - "+r)
			}
			b[r]--
		}
		for _, r := range after[table] {
			if a[r] == 0 && (skip == nil || !skip(table, r)) {
				out = append(out, table+" + "+r)
			}
			a[r]--
		}
	}
	return out
}

// usageFigures are the figures of `ipamctl usage --json` that both releases
// print: per cluster, category and pool, the counts and the cooldown queue.
type usageFigures []struct {
	ClusterID  string `json:"cluster_id"`
	Categories []struct {
		Category      string `json:"category"`
		Pools         int64  `json:"pools"`
		Size          int64  `json:"size"`
		Active        int64  `json:"active"`
		Reserved      int64  `json:"reserved"`
		Cooling       int64  `json:"cooling"`
		Free          int64  `json:"free"`
		CooldownQueue struct {
			Count          int64      `json:"count"`
			NextReusableAt *time.Time `json:"next_reusable_at"`
		} `json:"cooldown_queue"`
	} `json:"categories"`
}

func (u *upgrade) usage(tools string) usageFigures {
	u.t.Helper()
	var f usageFigures
	out := u.must(u.t.TempDir(), tools, u.url, "ipamctl usage --json")
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		u.t.Fatalf("ipamctl usage --json: %v\n%s", err, out)
	}
	return f
}

// schemaVersion is the database's schema version.
func schemaVersion(t *testing.T, url string) int32 {
	t.Helper()
	return int32(countRows(t, url, "SELECT version FROM "+operator.VersionTable))
}

// ownerRows maps owner (kind/id) -> "address state reusable_at" of the rows of
// the owners named.
func ownerRows(t *testing.T, url string, owners ...string) map[string]string {
	t.Helper()
	m := queryMap(t, url, `SELECT owner_kind || '/' || owner_id, concat_ws(' ', host(address), state, reusable_at)
		FROM ipam_allocations WHERE owner_kind IS NOT NULL AND state <> 'free'`)
	out := map[string]string{}
	for _, o := range owners {
		if v, ok := m[o]; ok {
			out[o] = v
		}
	}
	return out
}

// checkErrorSampleIn checks that the paragraphs of the guide's error sample
// that starts with title appear in out, in order, numbers aside; only its
// title and its message (the last paragraph) unless whole.
func checkErrorSampleIn(t *testing.T, title, out string, whole bool) {
	t.Helper()
	var sample string
	for _, f := range parseFences(t, repoRoot(t), upgradeGuide) {
		if strings.HasPrefix(f.body, "Error: "+title) {
			sample = f.body
		}
	}
	if sample == "" {
		t.Fatalf("%s: no error sample starting with %q", upgradeGuide, "Error: "+title)
	}
	digits := regexp.MustCompile(`\d+`)
	norm := func(s string) string { return digits.ReplaceAllString(collapse(s), "N") }
	got := norm(out)
	paras := regexp.MustCompile(`\n\s*\n`).Split(strings.TrimSpace(sample), -1)
	if !whole {
		paras = []string{paras[0], paras[len(paras)-1]}
	}
	at := 0
	for _, p := range paras {
		// A paragraph that ends in "..." shows the beginning of the
		// output's (its wording past that is the release's own), as the
		// guides' other samples do (docs_errors_test.go).
		p, _ = strings.CutSuffix(norm(p), "...")
		i := strings.Index(got[at:], p)
		if i < 0 {
			t.Fatalf("%s: the error sample's paragraph %q is not in the output (in this order):\n%s", upgradeGuide, p, out)
		}
		at += i + len(p)
	}
}

// The guide's upgrade, from the previous release to this tree, with
// allocations live: active, cooling after a release, held by the plan of a
// running apply, in node blocks, in an IPv4 pool that is full. Another
// configuration's apply of the previous release is running during the
// migration (held at a gate), a third configuration stays on the previous
// release. Each claim of the guide is checked here: the migration changes
// no row of the previous schema (every column of every table, events and
// holds included) and the usage figures stay the same; the upgraded
// configuration plans no changes and keeps every address; cooling addresses
// are still refused to new owners and given back to their owner; the
// previous release started afterwards is refused (plan, destroy,
// auto_migrate false, ipamctl) and changes nothing; the apply running
// through the migration completes, with the holds its plan took, and its
// configuration plans no changes once upgraded; a rollback restores the
// backup into a new database, where an unchanged configuration plans no
// changes and the new ipamctl migrates it again.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	t.Parallel()
	prev := buildPreviousRelease(t)
	start := time.Now()
	ctx := context.Background()
	admin := testdb.AdminURL(t)
	name := fmt.Sprintf("ipam_upgrade_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	u := &upgrade{t: t, url: createEmptyDatabase(t, admin, name),
		prevTools: toolsWith(t, filepath.Join(prev, "ipamctl")), curTools: toolsWith(t, ipamctl(t))}
	mirror := releaseMirror(t, cliOf(t, terraformBin).host, map[string]string{
		previousVersion: filepath.Join(prev, "terraform-provider-ipam"),
		currentVersion:  filepath.Join(filepath.Dir(cliConfig), "terraform-provider-ipam"),
	})
	u.config = filepath.Join(t.TempDir(), "cli.tfrc")
	if err := os.WriteFile(u.config, []byte(replaced(t, guideBlock(t, "local-config"), guideMirrorPath, strconv.Quote(mirror))), 0o600); err != nil {
		t.Fatal(err)
	}
	latest, err := ipam.LatestSchemaVersion()
	if err != nil {
		t.Fatal(err)
	}

	// 1. The previous release: three configurations, then a release of a
	// node, an instance in node-2's blocks and an environment's IPv4, which
	// leaves the pool full (two active, one cooling).
	platform, team, edge := t.TempDir(), t.TempDir(), t.TempDir()
	nodes := []string{"node-1", "node-2", "node-3"}
	vms := map[string]string{"vm-1": "node-1", "vm-2": "node-2", "vm-3": "node-2"}
	envs := []string{"shop", "blog"}
	kept := map[string]string{"vm-1": "node-1", "vm-2": "node-2"} // vm-3 is released
	u.configure(platform, previousVersion, providerBlock, platformConfig(nodes, vms, envs, ""))
	u.initAt(platform, u.prevTools, previousVersion, false)
	u.must(platform, u.prevTools, u.url, "terraform apply -input=false -auto-approve")
	u.configure(team, previousVersion, providerBlock, teamBase)
	u.initAt(team, u.prevTools, previousVersion, false)
	u.must(team, u.prevTools, u.url, "terraform apply -input=false -auto-approve")
	u.configure(edge, previousVersion, providerBlock, edgeConfig)
	u.initAt(edge, u.prevTools, previousVersion, false)
	u.must(edge, u.prevTools, u.url, "terraform apply -input=false -auto-approve")
	previousSchema := schemaVersion(t, u.url)
	if previousSchema >= latest {
		t.Fatalf("the previous release made schema version %d, this tree's is %d: nothing to upgrade, the test proves nothing", previousSchema, latest)
	}
	u.configure(platform, previousVersion, providerBlock, platformConfig(nodes[:2], kept, envs[:1], ""))
	out := u.must(platform, u.prevTools, u.url, "terraform apply -input=false -auto-approve")
	if !strings.Contains(out, "3 destroyed") {
		t.Fatalf("the release of node-3, vm-3 and blog:\n%s", out)
	}
	released := []string{"node/node-3", "instance/vm-3", "env_ipv4/blog"}
	cooling := ownerRows(t, u.url, released...)
	for _, o := range released {
		if f := strings.Fields(cooling[o]); len(f) < 2 || f[1] != "cooling" {
			t.Fatalf("%s after its release: %q, want a cooling address", o, cooling[o])
		}
	}
	platformState := addressesOf(t, []byte(u.must(platform, u.prevTools, u.url, "terraform show -json")))

	// 2. The guide's checks and backup, with the previous release's ipamctl.
	outs := u.guide("status", platform, u.prevTools, u.url)
	if !strings.Contains(outs[0], "up to date") || !strings.HasPrefix(outs[1], "ok:") {
		t.Fatalf("ipamctl migrate status and check of the previous release:\n%s", strings.Join(outs, ""))
	}
	u.guide("backup", platform, u.prevTools, u.url)

	// 3. The team's apply of the previous release starts (its plan holds the
	// two new instances' addresses) and waits at its gate, its provider
	// configured against the old schema.
	u.configure(team, previousVersion, providerBlock, teamGated)
	bg := exec.Command("bash", "-c", "terraform apply -input=false -auto-approve")
	bg.Dir, bg.Env = team, u.env(u.prevTools, u.url)
	bg.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var bgOut bytes.Buffer
	bg.Stdout, bg.Stderr = &bgOut, &bgOut
	if err := bg.Start(); err != nil {
		t.Fatal(err)
	}
	var bgErr error
	bgDone := make(chan struct{}) // closed when the apply has ended (bgErr)
	go func() { bgErr = bg.Wait(); close(bgDone) }()
	t.Cleanup(func() {
		select {
		case <-bgDone:
		default:
			_ = syscall.Kill(-bg.Process.Pid, syscall.SIGKILL)
			<-bgDone
		}
	})
	deadline := time.Now().Add(waitBound)
	for {
		if _, err := os.Stat(filepath.Join(team, "gate-waiting")); err == nil {
			break
		}
		select {
		case <-bgDone:
			t.Fatalf("the team's apply ended before its gate: %v\n%s", bgErr, bgOut.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the team's apply did not reach its gate in %s", waitBound)
		}
	}
	holds := queryMap(t, u.url, `SELECT owner_id, host(address) FROM ipam_allocations WHERE state = 'reserved' AND owner_kind = 'instance'`)
	if len(holds) != 2 || holds["team-3"] == "" || holds["team-4"] == "" {
		t.Fatalf("the team's plan holds %v, want team-3 and team-4", holds)
	}

	// 4. Before the migration: every row, the usage figures.
	cols := schemaColumns(t, u.url)
	before := takeSnapshot(t, u.url, cols)
	usageBefore := u.usage(u.prevTools)

	// 5. The guide's upgrade of the platform: the version, init -upgrade, and
	// the plan, which migrates and finds no changes.
	u.configure(platform, currentVersion, providerBlock, platformConfig(nodes[:2], kept, envs[:1], ""))
	u.initAt(platform, u.curTools, currentVersion, true)
	out = u.guide("plan", platform, u.curTools, u.url)[0]
	if !strings.Contains(out, "No changes. Your infrastructure matches the configuration.") {
		t.Fatalf("the plan after the upgrade is not empty:\n%s", out)
	}
	// The plan that migrated says so, with the versions.
	if flat := strings.Join(strings.Fields(out), " "); !strings.Contains(flat, "IPAM Database Schema Upgraded") ||
		!strings.Contains(flat, fmt.Sprintf("from version %d to %d", previousSchema, latest)) {
		t.Fatalf("the plan that migrated the schema does not say so:\n%s", out)
	}
	if v := schemaVersion(t, u.url); v != latest {
		t.Fatalf("after the plan of the new release the schema is at version %d, want %d", v, latest)
	}
	// The migration (and the new release's refresh) changed no row: every
	// column of the previous schema, in every table, events and holds
	// included; the usage figures are the same, read by the new ipamctl.
	if diff := changedRows(before, takeSnapshot(t, u.url, cols), nil); len(diff) > 0 {
		t.Fatalf("the upgrade changed rows of the previous schema:\n%s", strings.Join(diff, "\n"))
	}
	if got := u.usage(u.curTools); !reflect.DeepEqual(got, usageBefore) {
		t.Fatalf("usage before the upgrade (previous ipamctl):\n%+v\nafter it (new ipamctl):\n%+v", usageBefore, got)
	}

	// 6. The mixed fleet: the edge configuration, still on the previous
	// release, is refused whatever it runs, and so is the previous ipamctl;
	// nothing changes. The guide's error sample is the default's
	// (auto_migrate = true); without it, the provider says "Nothing was
	// changed." instead of the sample's first paragraph.
	for _, c := range []struct {
		provider, cmd string
		whole         bool
	}{
		{providerBlock, "terraform plan -input=false", true},
		{providerBlock, "terraform destroy -input=false -auto-approve", true},
		{providerBlockNoMigrate, "terraform plan -input=false", false},
	} {
		u.configure(edge, previousVersion, c.provider, edgeConfig)
		out, err := u.sh(edge, u.prevTools, u.url, c.cmd)
		if err == nil {
			t.Fatalf("%s of the previous release against the upgraded database (%s) succeeded:\n%s", c.cmd, strings.TrimSpace(c.provider), out)
		}
		checkErrorSampleIn(t, "IPAM Database Schema Mismatch", out, c.whole)
	}
	u.configure(edge, previousVersion, providerBlock, edgeConfig)
	for _, cmd := range []string{"ipamctl list", "ipamctl usage"} {
		out, err := u.sh(edge, u.prevTools, u.url, cmd)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "schema_mismatch: the database schema is at version") {
			t.Fatalf("%s of the previous release against the upgraded database: %v\n%s", cmd, err, out)
		}
	}
	if diff := changedRows(before, takeSnapshot(t, u.url, cols), nil); len(diff) > 0 {
		t.Fatalf("the refused previous release changed rows:\n%s", strings.Join(diff, "\n"))
	}

	// 7. The team's apply, started before the migration, runs to its end
	// with the previous release's code: it confirms the holds its plan took,
	// updates team-1 and creates a pool, which records no creating
	// configuration (the previous release does not know the column).
	if err := os.WriteFile(filepath.Join(team, "gate-open"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-bgDone:
		if bgErr != nil {
			t.Fatalf("the team's apply of the previous release, running through the migration, failed: %v\n%s", bgErr, bgOut.String())
		}
	case <-time.After(commandBound):
		t.Fatalf("the team's apply did not end after its gate opened")
	}
	if out := bgOut.String(); !strings.Contains(out, "Resources: 4 added, 1 changed, 0 destroyed.") {
		t.Fatalf("the team's apply:\n%s", out)
	}
	active := activeAddresses(t, u.url)
	for owner, addr := range holds {
		if active[addr] != "instance/"+owner {
			t.Errorf("%s was held for %s by the plan before the migration; now it is %q", addr, owner, active[addr])
		}
	}
	if got := queryMap(t, u.url, `SELECT owner_id, coalesce(node_id, '') FROM ipam_allocations WHERE owner_id = 'team-1' AND state = 'active'`); got["team-1"] != "node-1" {
		t.Errorf("team-1's node after the team's apply: %q, want node-1", got["team-1"])
	}
	managed := func(pool string) bool {
		t.Helper()
		m, err := operator.New(openAs(t, u.url, "terraform")).Managers(ctx, operator.ManagedPool, []string{pool})
		if err != nil {
			t.Fatal(err)
		}
		_, ok := m[pool]
		return ok
	}
	if managed("prod/team-v4") {
		t.Errorf("the pool the previous release created after the migration counts as managed by a state before the new release read it")
	}

	// 8. The guide's refresh and apply of the platform: every address is the
	// one it had, in the state and in the database.
	outs = u.guide("apply", platform, u.curTools, u.url)
	if !strings.Contains(outs[1], "No changes.") {
		t.Fatalf("the apply after the refresh has something to do:\n%s", outs[1])
	}
	if got := addressesOf(t, []byte(u.must(platform, u.curTools, u.url, "terraform show -json"))); !reflect.DeepEqual(got, platformState) {
		t.Fatalf("the platform's state before the upgrade:\n%v\nafter it:\n%v", platformState, got)
	}
	// Nothing changed but what the team's apply did: its instances' rows and
	// events, the instance pool's active count, its new pool.
	teamRow := regexp.MustCompile(`"owner_id":"team-\d"|"id":"prod/team-v4"|"pool_id":"prod/team-v4"`)
	teamRows := func(table, row string) bool {
		return teamRow.MatchString(row) || table == "ipam_pool_counters" && strings.Contains(row, `"pool_id":"prod/instance"`)
	}
	if diff := changedRows(before, takeSnapshot(t, u.url, cols), teamRows); len(diff) > 0 {
		t.Fatalf("rows changed that the team's apply did not touch:\n%s", strings.Join(diff, "\n"))
	}
	outs = u.guide("status", platform, u.curTools, u.url)
	if !strings.Contains(outs[0], "up to date") || !strings.HasPrefix(outs[1], "ok:") {
		t.Fatalf("ipamctl migrate status and check of the new release:\n%s", strings.Join(outs, ""))
	}

	// 9. Cooldowns survive the upgrade: a new environment finds the pool
	// exhausted (its third address cools for blog), a node claiming node-3's
	// address is refused, and blog, declared again, gets its address back.
	node3 := strings.Fields(cooling["node/node-3"])[0]
	intruders := `
resource "ipam_env_ipv4" "news" {
  pool_id = ipam_pool.public_v4.id
  org_id  = "acme"
  env_id  = "news"
}

resource "ipam_node_address" "intruder" {
  cluster_id = ipam_cluster.prod.id
  node_id    = "intruder"
  address    = "` + node3 + `"
}
`
	u.configure(platform, currentVersion, providerBlock, platformConfig(nodes[:2], kept, envs[:1], intruders))
	out, err = u.sh(platform, u.curTools, u.url, "terraform apply -input=false -auto-approve")
	if err == nil || !strings.Contains(out, "ipam_exhausted: ") || !strings.Contains(out, "address_cooling: "+node3) {
		t.Fatalf("new owners asking for the cooling addresses after the upgrade: %v\n%s", err, out)
	}
	if got := ownerRows(t, u.url, released...); !reflect.DeepEqual(got, cooling) {
		t.Fatalf("the released addresses before the upgrade:\n%v\nafter it:\n%v", cooling, got)
	}
	if got := ownerRows(t, u.url, "env_ipv4/news", "node/intruder"); len(got) > 0 {
		t.Fatalf("new owners got addresses: %v", got)
	}
	u.configure(platform, currentVersion, providerBlock, platformConfig(nodes[:2], kept, envs, ""))
	u.must(platform, u.curTools, u.url, "terraform apply -input=false -auto-approve")
	if got, want := strings.Fields(ownerRows(t, u.url, "env_ipv4/blog")["env_ipv4/blog"]), strings.Fields(cooling["env_ipv4/blog"]); len(got) < 2 || got[0] != want[0] || got[1] != "active" {
		t.Fatalf("blog declared again got %v, want its address %s back", got, want[0])
	}
	u.emptyPlan(platform, u.curTools, u.url)

	// 10. The rollback: the backup restored into a new database. The edge
	// configuration, unchanged since the backup, plans no changes there with
	// the previous release; the team's plans again what it made after the
	// backup; the new ipamctl migrates the restored database.
	restoredName := name + "_restored"
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	// The guide's owner role is the test server's admin here.
	adminCfg, err := pgx.ParseConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	createDB := replaced(t, pageBlock(t, upgradeGuide, "restore-db"), guideRestoredName, restoredName,
		"OWNER ipam_owner", "OWNER "+pgx.Identifier{adminCfg.User}.Sanitize())
	_, err = c.Exec(ctx, createDB)
	c.Close(ctx)
	if err != nil {
		t.Fatalf("%s: %v", strings.TrimSpace(createDB), err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{restoredName}.Sanitize()+" WITH (FORCE)")
			c.Close(ctx)
		}
	})
	restored := withDatabase(t, admin, restoredName)
	u.guide("restore", platform, u.prevTools, u.url, "IPAM_RESTORE_URL="+restored)
	if out, err := u.sh(edge, u.prevTools, restored, "terraform plan -input=false -detailed-exitcode"); err != nil {
		t.Fatalf("the edge configuration against the restored database: %v\n%s", err, out)
	}
	out, err = u.sh(team, u.prevTools, restored, "terraform plan -input=false -detailed-exitcode")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(out, "Plan: 3 to add, 1 to change, 0 to destroy.") {
		t.Fatalf("the team's plan against the restored database (the backup predates its last apply): %v\n%s", err, out)
	}
	out = u.guide("migrate", platform, u.curTools, restored)[0]
	if want := fmt.Sprintf("to %d", latest); !strings.Contains(out, want) {
		t.Fatalf("ipamctl migrate up of the restored database did not say %q:\n%s", want, out)
	}
	u.must(platform, u.curTools, restored, "ipamctl check")

	// 11. The team and the edge upgrade too: both plan no changes, and the
	// team's refresh makes its pool managed.
	for _, dir := range []string{team, edge} {
		hcl := edgeConfig
		if dir == team {
			hcl = teamGated
		}
		u.configure(dir, currentVersion, providerBlock, hcl)
		u.initAt(dir, u.curTools, currentVersion, true)
		out := u.guide("plan", dir, u.curTools, u.url)[0]
		if !strings.Contains(out, "No changes.") {
			t.Fatalf("%s: the plan after the upgrade is not empty:\n%s", dir, out)
		}
	}
	if !managed("prod/team-v4") {
		t.Errorf("the team's pool does not count as managed after its configuration's refresh with the new release")
	}
	u.must(platform, u.curTools, u.url, "ipamctl check")
	t.Logf("the upgrade took %s after the previous release's build", time.Since(start).Round(time.Second))
}

// emptyPlan fails unless terraform plan in dir finds nothing to do.
func (u *upgrade) emptyPlan(dir, tools, url string) {
	u.t.Helper()
	out, err := u.sh(dir, tools, url, "terraform plan -input=false -detailed-exitcode")
	if err != nil {
		u.t.Fatalf("%s: the plan is not empty (or failed): %v\n%s", dir, err, out)
	}
}
