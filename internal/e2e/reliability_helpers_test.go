package e2e

// Helpers of the reliability and security tests (reliability_*_test.go):
// servers of their own (scripts/pg.sh; TLS and replicas in servers_test.go), the
// invariant checks run after every storm and fault, and the comparison of
// Terraform states with the database.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// soak reports whether the long versions run (make soak sets IPAM_SOAK=1).
func soak() bool { return os.Getenv("IPAM_SOAK") == "1" }

// pick returns the normal or the soak figure.
func pick(normal, long int) int {
	if soak() {
		return long
	}
	return normal
}

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// server is a PostgreSQL server of the test's own, in dir (a scripts/pg.sh
// directory), so that the test may stop, crash, restart or promote it.
type server struct {
	t   *testing.T
	dir string
}

// script runs one of the repository's scripts and fails the test on error.
func script(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(repoRoot(t), "scripts", name)}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("scripts/%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
}

// scriptQuiet runs a script and ignores its outcome (for cleanups).
func scriptQuiet(t *testing.T, name string, args ...string) {
	_ = exec.Command("bash", append([]string{filepath.Join(repoRoot(t), "scripts", name)}, args...)...).Run()
}

// serverDir makes a short directory for a server (unix socket paths are
// limited to ~100 bytes) and removes it at the end of the test.
func serverDir(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ipam-rel-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startServer starts a throwaway server with scripts/pg.sh, stopped at the
// end of the test.
func startServer(t *testing.T) *server {
	t.Helper()
	s := &server{t: t, dir: serverDir(t, "pg")}
	script(t, "pg.sh", "start", s.dir)
	t.Cleanup(func() { scriptQuiet(t, "pg.sh", "stop", s.dir) })
	return s
}

func (s *server) read(name string) string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// url is the superuser URL for database db.
func (s *server) url(db string) string { return withDatabase(s.t, s.read("url"), db) }
func (s *server) port() string         { return s.read("port") }
func (s *server) password() string     { return s.read("pwfile") }

// pgCtl runs pg_ctl on the server's data directory as the user owning it.
func (s *server) pgCtl(args ...string) {
	s.t.Helper()
	cmd := s.command("pg_ctl", append([]string{"-D", filepath.Join(s.dir, "data")}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("pg_ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// stop shuts the server down (fast mode: sessions are terminated).
func (s *server) stop() { s.pgCtl("-m", "fast", "-w", "-t", "300", "stop") }

// restart starts a stopped server again on the same port.
func (s *server) restart() {
	s.pgCtl("-l", filepath.Join(s.dir, "log"), "-w", "-t", "300", "start")
}

func withDatabase(t testing.TB, u, db string) string {
	t.Helper()
	i := strings.Index(u, "://")
	j := strings.IndexByte(u[i+3:], '/')
	if i < 0 || j < 0 {
		t.Fatalf("unexpected URL shape")
	}
	rest := u[i+3+j+1:]
	q := ""
	if k := strings.IndexByte(rest, '?'); k >= 0 {
		q = rest[k:]
	}
	return u[:i+3+j+1] + db + q
}

// createEmptyDatabase creates db, with no schema, on the server behind admin
// (a superuser URL), dropped at the end of the test; it returns its URL.
func createEmptyDatabase(t *testing.T, admin, db string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(ctx, admin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
			c.Close(ctx)
		}
	})
	return withDatabase(t, admin, db)
}

// createDatabase creates db on the server behind admin and migrates it.
func createDatabase(t *testing.T, admin, db string) string {
	t.Helper()
	ctx := context.Background()
	url := createEmptyDatabase(t, admin, db)
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, MaxConnections: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return url
}

// seed creates what setup() creates (cluster c1 with pool c1/v4) in the
// database at url.
func seed(t *testing.T, url string) {
	t.Helper()
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
}

// newWorkdirWith is newWorkdir with a provider block of the test's choosing.
func newWorkdirWith(t *testing.T, url, providerBody, hcl string) *workdir {
	t.Helper()
	w := newWorkdir(t, url, hcl)
	w.setHCL(providerBody, hcl)
	return w
}

// setHCL replaces the configuration of a working directory: a provider
// block with providerBody inside, then hcl.
func (w *workdir) setHCL(providerBody, hcl string) {
	w.t.Helper()
	main := "terraform {\n  required_providers {\n    ipam = { source = \"overlayipam/ipam\" }\n  }\n}\n\nprovider \"ipam\" {\n" +
		providerBody + "\n}\n\n" + hcl
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(main), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

// owned is one address resource of a state: who holds what.
type owned struct {
	Resource string
	Owner    string // kind/id, as activeAddresses names owners
	Address  string
}

// ownedResources reads the address resources of the working directory's state.
func (w *workdir) ownedResources() []owned {
	w.t.Helper()
	var doc struct {
		Values *struct {
			RootModule struct {
				Resources []struct {
					Address string         `json:"address"`
					Type    string         `json:"type"`
					Values  map[string]any `json:"values"`
				} `json:"resources"`
			} `json:"root_module"`
		} `json:"values"`
	}
	if err := json.Unmarshal(w.run("show", "-json"), &doc); err != nil {
		w.t.Fatal(err)
	}
	if doc.Values == nil {
		return nil
	}
	var out []owned
	for _, r := range doc.Values.RootModule.Resources {
		var kind, key string
		switch r.Type {
		case "ipam_node_address":
			kind, key = ipam.OwnerNode, "node_id"
		case "ipam_instance_address":
			kind, key = ipam.OwnerInstance, "instance_id"
		case "ipam_env_ipv4":
			kind, key = ipam.OwnerEnvIPv4, "env_id"
		default:
			continue
		}
		id, _ := r.Values[key].(string)
		addr, _ := r.Values["address"].(string)
		out = append(out, owned{Resource: r.Address, Owner: kind + "/" + id, Address: addr})
	}
	return out
}

// activeByOwner maps owner (kind/id) to its active address.
func activeByOwner(t *testing.T, url string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for addr, owner := range activeAddresses(t, url) {
		out[owner] = addr
	}
	return out
}

// stateMatchesDB checks that every address resource of the states is active
// in the database for its owner, with the same address, and that no address
// is in two states. It returns how many resources it compared.
func stateMatchesDB(t *testing.T, url string, ws ...*workdir) int {
	t.Helper()
	db := activeByOwner(t, url)
	seen := map[string]string{}
	n := 0
	for _, w := range ws {
		for _, o := range w.ownedResources() {
			n++
			if got, ok := db[o.Owner]; !ok {
				t.Errorf("%s %s (%s) is in the state but %s holds no active address", w.dir, o.Resource, o.Address, o.Owner)
			} else if canon(got) != canon(o.Address) {
				t.Errorf("%s %s: state says %s, the database says %s", w.dir, o.Resource, o.Address, got)
			}
			if prev, dup := seen[canon(o.Address)]; dup {
				t.Errorf("%s is in two states: %s and %s", o.Address, prev, w.dir+":"+o.Resource)
			}
			seen[canon(o.Address)] = w.dir + ":" + o.Resource
		}
	}
	return n
}

func canon(a string) string {
	if p, err := netip.ParseAddr(a); err == nil {
		return p.String()
	}
	return a
}

// countRows counts rows with a query on the database at url.
func countRows(t *testing.T, url, sql string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int64
	if err := c.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// invariantQueries are a second opinion on ipam.Check, in plain SQL
// written independently of it: each returns the rows that break a promise.
var invariantQueries = []struct{ name, sql string }{
	{"no address active or reserved twice in a cluster", `
		SELECT cluster_id || ' ' || host(address) FROM ipam_allocations
		WHERE state IN ('active', 'reserved') GROUP BY cluster_id, address HAVING count(*) > 1`},
	{"no address outside its pool", `
		SELECT a.id::text || ' ' || host(a.address) FROM ipam_allocations a JOIN ipam_pools p ON p.id = a.pool_id
		WHERE NOT (a.address <<= ANY (p.cidrs)) OR a.address <<= ANY (p.exclude) OR a.cluster_id <> p.cluster_id`},
	{"at most one active IPv4 per environment", `
		SELECT a.cluster_id || ' ' || coalesce(a.env_id, '') FROM ipam_allocations a JOIN ipam_pools p ON p.id = a.pool_id
		WHERE p.family = 4 AND a.state IN ('active', 'reserved') AND a.owner_kind = 'env_ipv4'
		GROUP BY a.cluster_id, a.env_id HAVING count(*) > 1`},
	// Every hand-out of an address (allocation or plan-time hold) is judged
	// against the latest release of that address before it, not merely the
	// event just before it: a hold of the releasing owner in between must not
	// reset the cooldown.
	{"no hand-out to another owner inside the cooldown of the address's latest release (event history)", `
		WITH rel AS (
			SELECT e.cluster_id, e.address, e.at, e.id, e.owner_kind, e.owner_id, (e.data->>'reusable_at')::timestamptz AS reusable
			FROM ipam_events e
			WHERE e.address IS NOT NULL AND e.data ? 'reusable_at'
				AND (e.type LIKE '%.released' OR e.type LIKE '%_disabled' OR e.type = 'allocation.reclaimed'))
		SELECT h.cluster_id || ' ' || host(h.address) || ' ' || h.type || ' to ' || h.owner_kind || '/' || h.owner_id ||
			' at ' || h.at::text || ', released by ' || r.owner_kind || '/' || r.owner_id || ' cooling until ' || r.reusable::text
		FROM ipam_events h
		CROSS JOIN LATERAL (
			SELECT * FROM rel WHERE rel.cluster_id = h.cluster_id AND rel.address = h.address AND (rel.at, rel.id) < (h.at, h.id)
			ORDER BY rel.at DESC, rel.id DESC LIMIT 1) r
		WHERE h.address IS NOT NULL
			AND (h.type LIKE '%.enrolled' OR h.type LIKE '%.allocated' OR h.type LIKE '%_enabled' OR h.type = 'allocation.reserved')
			AND (h.owner_kind, h.owner_id) IS DISTINCT FROM (r.owner_kind, r.owner_id)
			AND h.at < r.reusable`},
	{"no allocation without the event of its last change (no partial write)", `
		SELECT a.id::text || ' generation ' || a.generation FROM ipam_allocations a
		WHERE a.generation > 0 AND NOT EXISTS (
			SELECT 1 FROM ipam_events e WHERE e.allocation_id = a.id AND e.generation = a.generation)`},
	{"no event of an allocation that does not exist", `
		SELECT e.id::text || ' ' || e.type FROM ipam_events e
		WHERE e.allocation_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ipam_allocations a WHERE a.id = e.allocation_id)`},
	{"no counter pool without its stripes", `
		SELECT p.id FROM ipam_pools p WHERE p.kind = 'counter'
			AND (SELECT count(*) FROM ipam_pool_stripes s WHERE s.pool_id = p.id) <> p.stripes`},
	{"no table pool with a missing or extra row", `
		SELECT p.id FROM ipam_pools p WHERE p.kind = 'table'
			AND (SELECT count(*) FROM ipam_allocations a WHERE a.pool_id = p.id) <> p.size`},
}

// invariantViolations runs ipam.Check (what `ipamctl check` runs) and
// the independent SQL above. It returns Check's violations, the SQL's broken
// promises by name, and the number of allocation rows Check read.
func invariantViolations(t *testing.T, url string) ([]operator.Violation, map[string][]string, int64) {
	t.Helper()
	ctx := context.Background()
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, MaxConnections: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := operator.New(st).Check(ctx, "")
	if err != nil {
		t.Fatalf("ipam.Check: %v", err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	broken := map[string][]string{}
	for _, q := range invariantQueries {
		rows, err := c.Query(ctx, q.sql)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		bad, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		if len(bad) > 0 {
			broken[q.name] = bad
		}
	}
	return rep.Violations, broken, rep.Rows
}

// checkInvariants fails the test on any violation found by
// invariantViolations and returns the number of allocation rows checked.
func checkInvariants(t *testing.T, url string) int64 {
	t.Helper()
	violations, broken, rows := invariantViolations(t, url)
	for _, v := range violations {
		t.Errorf("ipam.Check: %s", v)
	}
	for name, bad := range broken {
		for i, b := range bad {
			if i == 20 {
				t.Errorf("%s: %d more", name, len(bad)-20)
				break
			}
			t.Errorf("invariant broken: %s: %s", name, b)
		}
	}
	return rows
}

var (
	ipamctlOnce sync.Once
	ipamctlPath string
	ipamctlErr  error
)

// ipamctl returns the operator CLI, built once from cmd/ipamctl.
func ipamctl(t *testing.T) string {
	t.Helper()
	ipamctlOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(repoRoot(t), "cmd", "ipamctl")); err != nil {
			ipamctlErr = errors.New("cmd/ipamctl does not exist")
			return
		}
		// Next to the provider TestMain built, in the directory it removes at the end.
		dir := filepath.Dir(cliConfig)
		p := filepath.Join(dir, "ipamctl")
		out, err := exec.Command("go", "build", "-o", p, filepath.Join(repoRoot(t), "cmd", "ipamctl")).CombinedOutput()
		if err != nil {
			ipamctlErr = fmt.Errorf("go build ./cmd/ipamctl: %v\n%s", err, out)
			return
		}
		ipamctlPath = p
	})
	if ipamctlErr != nil {
		t.Fatalf("ipamctl: %v", ipamctlErr)
	}
	return ipamctlPath
}

// runIpamctl runs ipamctl against url and returns its combined output and exit code.
func runIpamctl(t *testing.T, url string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, ipamctl(t), args...)
	cmd.Env = append(os.Environ(), "IPAM_DATABASE_URL="+url)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("ipamctl %s: %v", strings.Join(args, " "), err)
	return "", -1
}

// errorBlocks splits terraform's (-no-color) output into its error diagnostics.
func errorBlocks(out string) []string {
	parts := strings.Split(out, "Error: ")
	if len(parts) < 2 {
		return nil
	}
	return parts[1:]
}

func fileOwner(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	u, err := user.LookupId(strconv.Itoa(int(st.Uid)))
	if err != nil {
		return ""
	}
	return u.Username
}

func currentUser() string {
	u, err := user.Current()
	if err != nil {
		return ""
	}
	return u.Username
}
