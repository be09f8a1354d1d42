package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// world is one test's database with a cluster c1 (2001:db8::/48) and an IPv4
// pool c1/v4 (198.51.100.0/29, six addresses), a store acting as Terraform
// would, and a raw connection for checks and corruption.
type world struct {
	t   *testing.T
	ctx context.Context
	url string
	st  *ipam.Client
	raw *pgx.Conn
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, ctx: context.Background(), url: testdb.New(t)}
	var err error
	if w.st, err = ipam.Open(w.ctx, ipam.Config{DatabaseURL: w.url, Actor: "terraform"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.st.Close)
	if w.raw, err = pgx.Connect(w.ctx, w.url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.raw.Close(context.Background()) })
	if _, err := w.st.CreateCluster(w.ctx, ipam.Cluster{ID: "c1", Prefix: netip.MustParsePrefix("2001:db8::/48"),
		NodeCooldown: ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.CreatePool(w.ctx, ipam.Pool{ClusterID: "c1", Name: "v4", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/29")}}); err != nil {
		t.Fatal(err)
	}
	return w
}

func instance(id, org, env string) ipam.Owner {
	return ipam.Owner{Kind: ipam.OwnerInstance, ID: id, InstanceID: id, OrgID: org, EnvID: env}
}

func (w *world) alloc(pool string, o ipam.Owner) ipam.Allocation {
	w.t.Helper()
	r, err := w.st.Allocate(w.ctx, ipam.AllocateRequest{Pool: testdb.Pool(pool), Owner: o})
	if err != nil {
		w.t.Fatal(err)
	}
	return r.Allocation
}

func (w *world) release(o ipam.Owner) {
	w.t.Helper()
	if ok, err := w.st.Release(w.ctx, "c1", o, 0); err != nil || !ok {
		w.t.Fatalf("release %s: %v %v", o.ID, ok, err)
	}
}

func (w *world) exec(sql string, args ...any) {
	w.t.Helper()
	if _, err := w.raw.Exec(w.ctx, sql, args...); err != nil {
		w.t.Fatalf("%s: %v", sql, err)
	}
}

func (w *world) query(sql string) string {
	w.t.Helper()
	rows, err := w.raw.Query(w.ctx, sql)
	if err != nil {
		w.t.Fatal(err)
	}
	vals, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		w.t.Fatal(err)
	}
	return strings.Join(vals, ",")
}

// result is what one ipamctl run printed and returned.
type result struct {
	out, err string
	code     int
}

// ipamctl runs the CLI in-process against this world's database.
func (w *world) ipamctl(stdin string, args ...string) result {
	w.t.Helper()
	return runCLI(w.ctx, stdin, append([]string{"--database-url", w.url}, args...)...)
}

func runCLI(ctx context.Context, stdin string, args ...string) result {
	var out, errb bytes.Buffer
	code := run(ctx, args, strings.NewReader(stdin), &out, &errb)
	return result{out.String(), errb.String(), code}
}

func (r result) must(t *testing.T, code int, contains ...string) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.out, r.err)
	}
	for _, c := range contains {
		if !strings.Contains(r.out+r.err, c) {
			t.Fatalf("output lacks %q\nstdout:\n%s\nstderr:\n%s", c, r.out, r.err)
		}
	}
	return r
}

func TestHelpOfEveryCommandHasAnExample(t *testing.T) {
	var paths [][]string
	root := (&app{}).rootCmd()
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			continue
		}
		paths = append(paths, []string{c.Name()})
		for _, sub := range c.Commands() {
			paths = append(paths, []string{c.Name(), sub.Name()})
		}
	}
	paths = append(paths, nil)
	if len(paths) < 12 {
		t.Fatalf("only %d commands", len(paths))
	}
	for _, p := range paths {
		r := runCLI(context.Background(), "", append(p, "--help")...)
		// The Examples section is there and not empty: its first line is a command.
		_, examples, _ := strings.Cut(r.out, "Examples:\n")
		if first, _, _ := strings.Cut(examples, "\n"); r.code != 0 || strings.TrimSpace(first) == "" || !strings.Contains(examples, "ipamctl ") {
			t.Errorf("ipamctl %s --help: exit %d, output:\n%s%s", strings.Join(p, " "), r.code, r.out, r.err)
		}
	}
}

func TestBadCommandLines(t *testing.T) {
	ctx := context.Background()
	runCLI(ctx, "", "nope").must(t, exitUsage, `unknown command "nope"`)
	runCLI(ctx, "", "list", "--bogus").must(t, exitUsage, "unknown flag: --bogus")
	runCLI(ctx, "", "lookup").must(t, exitUsage, "accepts 1 arg(s), received 0")
	runCLI(ctx, "", "migrate").must(t, exitUsage, "migrate needs a subcommand")
	runCLI(ctx, "", "lookup", "2001:db8::1/64").must(t, exitUsage, "prefix lengths")
	runCLI(ctx, "", "list", "--state", "free").must(t, exitUsage, "--state: \"free\" is not a state to list")
	runCLI(ctx, "", "metrics").must(t, exitUsage, "--listen ADDR is required")
	runCLI(ctx, "", "reclaim").must(t, exitUsage, "--from-report FILE is required")
	runCLI(ctx, "", "leaks").must(t, exitUsage, "exactly one of --inventory FILE and --stale-days N")
	runCLI(ctx, "", "--actor", "bad actor", "list").must(t, exitUsage, "--actor: actor")
}

func TestVersion(t *testing.T) {
	runCLI(context.Background(), "", "version").must(t, 0, "ipamctl dev\n")
	old := version
	version = "v1.2.3"
	defer func() { version = old }()
	runCLI(context.Background(), "", "version").must(t, 0, "ipamctl v1.2.3\n")
}

// The database is unreachable: the error names host and port, never the password.
func TestUnreachableDatabase(t *testing.T) {
	r := runCLI(context.Background(), "", "--failover-timeout", "1s", "--database-url", "postgres://ipam:s3cretPassw0rd@127.0.0.1:1/ipam?connect_timeout=2", "usage")
	r.must(t, exitError, "ipam_unavailable", "127.0.0.1:1")
	if strings.Contains(r.out+r.err, "s3cretPassw0rd") {
		t.Fatalf("the password leaked: %s", r.err)
	}
	t.Setenv(EnvDatabaseURL, "postgres://ipam:s3cretPassw0rd@127.0.0.1:1/ipam?connect_timeout=2")
	r = runCLI(context.Background(), "", "--failover-timeout", "1s", "check")
	r.must(t, exitError, "ipam_unavailable", "127.0.0.1:1", "refused the connection", "failover_timeout is 1s")
	if strings.Contains(r.out+r.err, "s3cretPassw0rd") {
		t.Fatalf("the password leaked: %s", r.err)
	}
}

// No database given at all (no flag, no IPAM_DATABASE_URL, no PG*
// variable): ipamctl says so, tries PostgreSQL's default (the local socket),
// and a socket directory without its socket is nothing there, so it gives up
// after the first contact's wait. Here PGHOST names an empty directory for
// the default's socket directory, so the note is checked on its own first.
func TestNoDatabaseGiven(t *testing.T) {
	t.Setenv(EnvDatabaseURL, "")
	for _, v := range []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGSERVICE", "PGSERVICEFILE"} {
		t.Setenv(v, "")
	}
	var out, errb bytes.Buffer
	a := &app{out: &out, errOut: &errb}
	if _, err := a.open(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	a.store.Close()
	if !strings.Contains(errb.String(), "no database given (--database-url, IPAM_DATABASE_URL or the PG* variables)") {
		t.Fatalf("stderr: %q", errb.String())
	}
	t.Setenv("PGHOST", t.TempDir())
	r := runCLI(context.Background(), "", "usage")
	r.must(t, exitError, "ipam_unavailable", "has no socket file", "a first contact waits 5s")
	if strings.Contains(r.err, "no database given") {
		t.Fatalf("PGHOST names the database's directory, yet ipamctl says none was given:\n%s", r.err)
	}
}

// A connection string that the PG* variables alone make, and that cannot
// be parsed, is named as theirs (which are set, never their values), not
// as IPAM_DATABASE_URL, which is not set.
func TestBadPGVariablesAreNamed(t *testing.T) {
	t.Setenv(EnvDatabaseURL, "")
	t.Setenv("PGHOST", "127.0.0.1")
	t.Setenv("PGPORT", "abc")
	t.Setenv("PGPASSWORD", "s3cretPassw0rd")
	r := runCLI(context.Background(), "", "usage")
	r.must(t, exitError, "invalid_input: the PG* variables (", "PGPORT", "invalid port")
	if strings.Contains(r.err, EnvDatabaseURL) || strings.Contains(r.err, "s3cretPassw0rd") {
		t.Fatalf("the error names %s, or shows the password:\n%s", EnvDatabaseURL, r.err)
	}
}

// A wait for the database says what it waits for on stderr, unless --quiet,
// and the error that ends it says what to do about that class of failure.
func TestWaitIsReportedAndErrorsAdvise(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		r := runCLI(context.Background(), "", "--failover-timeout", "6s", "--database-url", "postgres://ipam:s3cretPassw0rd@127.0.0.1:1/ipam", "usage")
		// The report comes with the pause that crosses 5 s, which may end
		// anywhere up to the 6 s bound: "5 s of 6 s" or "6 s of 6 s".
		r.must(t, exitError, "ipamctl: waiting for the database at 127.0.0.1:1, ", " s of 6 s", "refused the connection",
			"IPAM Database Unreachable", "Check that host and port", "waited 6s")
		if strings.Contains(r.out, "waiting") || strings.Contains(r.out+r.err, "s3cretPassw0rd") {
			t.Fatalf("progress on stdout, or the password shown:\nstdout: %s\nstderr: %s", r.out, r.err)
		}
	})
	t.Run("first contact", func(t *testing.T) {
		t.Parallel()
		// No --failover-timeout: nothing listens and no server has answered
		// yet, so the call gives up after the first contact's wait and says so.
		r := runCLI(context.Background(), "", "--database-url", "postgres://ipam@127.0.0.1:1/ipam", "usage")
		r.must(t, exitError, "ipam_unavailable", "refused the connection (nothing listens there)",
			"a first contact waits 5s, not failover_timeout's 30s", "wrong host or port", "--failover-timeout (ipamctl) explicitly")
	})
	t.Run("quiet", func(t *testing.T) {
		t.Parallel()
		r := runCLI(context.Background(), "", "--quiet", "--failover-timeout", "6s", "--database-url", "postgres://ipam@127.0.0.1:1/ipam", "usage")
		r.must(t, exitError, "ipam_unavailable")
		if strings.Contains(r.err, "waiting for the database") {
			t.Fatalf("--quiet still reports the wait:\n%s", r.err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		u, err := url.Parse(testdb.AdminURL(t))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword("no_such_role_ipamctl", "Wr0ngPassw0rd")
		r := runCLI(context.Background(), "", "--database-url", u.String(), "usage")
		r.must(t, exitError, "ipam_refused", "IPAM Database Refused the Connection", "credentials", "database name", "TLS")
		if strings.Contains(r.err, "running and reachable") || strings.Contains(r.err, "Wr0ngPassw0rd") {
			t.Fatalf("refused: wrong advice, or the password shown:\n%s", r.err)
		}
	})
}

func TestMigrate(t *testing.T) {
	admin := testdb.AdminURL(t)
	ctx := context.Background()
	name := fmt.Sprintf("ipamctl_migrate_%d", time.Now().UnixNano()%1e9)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	url := testdb.WithDatabase(admin, name)
	latest, err := ipam.LatestSchemaVersion()
	if err != nil {
		t.Fatal(err)
	}
	// Migrations pending: a status of its own (exit 4), so that a script can tell.
	runCLI(ctx, "", "--database-url", url, "migrate", "status").must(t, exitPending,
		fmt.Sprintf("schema version 0; this ipamctl needs version %d", latest), fmt.Sprintf("%d migration(s) pending", latest))
	runCLI(ctx, "", "--database-url", url, "migrate", "status", "--json").must(t, exitPending, fmt.Sprintf(`"pending":%d`, latest))
	runCLI(ctx, "", "--database-url", url, "list").must(t, exitError, "schema_mismatch", "ipamctl migrate up")
	runCLI(ctx, "", "--database-url", url, "migrate", "up").must(t, 0, fmt.Sprintf("schema migrated from version 0 to %d", latest))
	runCLI(ctx, "", "--database-url", url, "migrate", "up").must(t, 0, "schema is up to date")
	runCLI(ctx, "", "--database-url", url, "migrate", "status").must(t, 0, "up to date")
	var js struct {
		Database                 string
		Current, Latest, Pending int64
	}
	if r := runCLI(ctx, "", "--database-url", url, "migrate", "status", "--json").must(t, 0); json.Unmarshal([]byte(r.out), &js) != nil ||
		js.Current != int64(latest) || js.Latest != int64(latest) || js.Pending != 0 || js.Database == "" {
		t.Fatalf("migrate status --json: %+v\n%s", js, r.out)
	}
	r := runCLI(ctx, "", "--database-url", url, "migrate", "status")
	if strings.Contains(r.out, "postgres://") {
		t.Fatalf("status prints the URL: %s", r.out)
	}
}

func TestListUsageLookup(t *testing.T) {
	w := newWorld(t)
	i1 := w.alloc("c1/instance", instance("i1", "acme", "prod"))
	w.alloc("c1/instance", instance("i2", "acme", "dev"))
	w.alloc("c1/instance", instance("i3", "umbrella", "prod"))
	w.release(instance("i3", "", ""))
	n1 := w.alloc("c1/node", ipam.Owner{Kind: ipam.OwnerNode, ID: "n1", NodeID: "n1"})
	for _, e := range []string{"e1", "e2", "e3", "e4", "e5"} {
		w.alloc("c1/v4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: e, EnvID: e, OrgID: "acme"})
	}

	// usage: a table with bars, the IPv4 pool at 5/6 flagged.
	r := w.ipamctl("", "usage", "--cluster", "c1").must(t, 0, "cluster c1", "CATEGORY", "ipv4", "c1/v4", "83.3%", "ALERT",
		"[#################...]", "<0.1%", "4.6e18")
	t.Logf("ipamctl usage:\n%s", r.out)
	r = w.ipamctl("", "usage", "--json").must(t, 0)
	var usage []operator.ClusterUsage
	if err := json.Unmarshal([]byte(r.out), &usage); err != nil || len(usage) != 1 {
		t.Fatalf("usage --json: %v\n%s", err, r.out)
	}
	if c := usage[0].Categories[1]; c.Category != "instance" || c.Active != 2 || c.Cooling != 1 || c.CooldownQueue.NextReusableAt == nil {
		t.Fatalf("instance usage %+v", c)
	}
	if !strings.Contains(r.out, `"allocation_failures": {}`) || !strings.Contains(r.out, `"cooldown_queue": {`) {
		t.Fatalf("usage --json keys:\n%s", r.out)
	}
	w.ipamctl("", "usage", "--cluster", "nope").must(t, exitError, "not_found", `cluster "nope" does not exist`)

	// list, with filters.
	r = w.ipamctl("", "list", "--org", "acme", "--category", "instance").must(t, 0, "ADDRESS", i1.Address.String())
	if got := listOwners(t, r.out); got != "instance/i1 instance/i2" {
		t.Fatalf("list --org acme --category instance: owners %s\n%s", got, r.out)
	}
	// One owner (its active address and the ones it left cooling): --owner needs --kind.
	r = w.ipamctl("", "list", "--kind", "instance", "--owner", "i3").must(t, 0, "2001:db8:0:1::3")
	if got := listOwners(t, r.out); got != "instance/i3" {
		t.Fatalf("list --kind instance --owner i3: owners %s\n%s", got, r.out)
	}
	w.ipamctl("", "list", "--owner", "i3").must(t, exitUsage, "--owner: needs an owner kind")
	w.ipamctl("", "list", "--kind", "set", "--owner", "vm-1").must(t, exitUsage, "--owner:", "<owner_id>#<key>")
	r = w.ipamctl("", "list", "--state", "cooling", "--json").must(t, 0)
	var listed []allocationJSON
	if err := json.Unmarshal([]byte(r.out), &listed); err != nil || len(listed) != 1 || listed[0].OwnerID != "i3" ||
		listed[0].OrgID != "umbrella" || listed[0].ReusableAt == nil || listed[0].State != "cooling" {
		t.Fatalf("list --state cooling: %v %+v", err, listed)
	}
	w.ipamctl("", "list", "--env", "nope").must(t, 0, "no allocation matches")
	// A cluster that does not exist is a typo, not an empty answer (as usage says).
	w.ipamctl("", "list", "--cluster", "nope").must(t, exitError, "not_found", `cluster "nope" does not exist`)
	w.ipamctl("", "list", "--cluster", "c1", "--env", "nope").must(t, 0, "no allocation matches")
	// --limit: a list cut short says so (one row past the limit tells);
	// a limit at or past the matches lists them all, plainly.
	r = w.ipamctl("", "list", "--pool", "c1/v4", "--limit", "2").must(t, 0,
		"the first 2 allocation(s) of more that match: the list was cut short by --limit 2; raise it, or give 0 for all")
	if got := listOwners(t, r.out); got != "env_ipv4/e1 env_ipv4/e2" {
		t.Fatalf("list --limit 2 printed %s:\n%s", got, r.out)
	}
	for _, limit := range []string{"5", "6", "0"} {
		r = w.ipamctl("", "list", "--pool", "c1/v4", "--limit", limit).must(t, 0)
		if r.err != "5 allocation(s)\n" || strings.Count(listOwners(t, r.out), "env_ipv4/e") != 5 {
			t.Fatalf("list --limit %s:\n%s%s", limit, r.out, r.err)
		}
	}
	r = w.ipamctl("", "list", "--pool", "c1/v4", "--limit", "2", "--json").must(t, 0, "cut short by --limit 2")
	if err := json.Unmarshal([]byte(r.out), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("list --limit 2 --json: %v\n%s", err, r.out)
	}
	if r = w.ipamctl("", "list", "--pool", "c1/v4", "--limit", "5", "--json").must(t, 0); r.err != "" {
		t.Fatalf("list --limit 5 --json, nothing cut, says on stderr:\n%s", r.err)
	}

	// lookup: active, cooling (last holder), never used, nowhere.
	w.ipamctl("", "lookup", i1.Address.String()).must(t, 0, "cluster:", "c1/instance", "state:", "active", "org:", "acme", "env:", "prod", "instance i1")
	w.ipamctl("", "lookup", "2001:db8:0:1::3").must(t, 0, "cooling", "instance i3 (last holder)", "umbrella", "reusable at:")
	r = w.ipamctl("", "lookup", n1.Address.String(), "--json").must(t, 0)
	var found []allocationJSON
	if err := json.Unmarshal([]byte(r.out), &found); err != nil || len(found) != 1 || found[0].NodeID != "n1" || found[0].Category != "node" {
		t.Fatalf("lookup --json: %v %s", err, r.out)
	}
	w.ipamctl("", "lookup", "2001:db8::ff").must(t, 0, "free")
	w.ipamctl("", "lookup", "2001:db9::1").must(t, exitError, "not_found: 2001:db9::1 is in no pool of any cluster")
}

// syncBuffer is a buffer a running command writes to while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls until cond holds. Its bound (5 minutes) is on hangs,
// generous for a busy machine, never a performance target.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// background starts ipamctl in a goroutine; stop cancels it and returns its exit code.
func (w *world) background(args ...string) (out, errb *syncBuffer, stop func() int) {
	ctx, cancel := context.WithCancel(w.ctx)
	out, errb = &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"--database-url", w.url}, args...), strings.NewReader(""), out, errb)
	}()
	stopped := false
	var code int
	stop = func() int {
		if !stopped {
			cancel()
			code = <-done
			stopped = true
		}
		return code
	}
	w.t.Cleanup(func() { stop() })
	return out, errb, stop
}

func TestEvents(t *testing.T) {
	w := newWorld(t)
	w.alloc("c1/instance", instance("i1", "acme", "prod"))
	w.release(instance("i1", "", ""))
	w.ipamctl("", "events", "--since", "1h").must(t, 0, "cluster.created", "pool.created", "instance.allocated", "instance=i1", "org=acme")
	r := w.ipamctl("", "events", "--type", "instance.*", "--json").must(t, 0)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 2 {
		t.Fatalf("events --type instance.*:\n%s", r.out)
	}
	var e eventJSON
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil || e.Type != "instance.released" || e.Data["reusable_at"] == nil || e.Address == "" {
		t.Fatalf("event %v %+v", err, e)
	}
	// A misspelt type is refused, not answered with nothing.
	w.ipamctl("", "events", "--type", "env.ipv4_addon_allocation_failure").must(t, exitUsage,
		`--type: "env.ipv4_addon_allocation_failure" matches no event type`, "env.ipv4_addon_allocation_failed")
	w.ipamctl("", "events", "--type", "instanc.*").must(t, exitUsage, `--type: "instanc.*" matches no event type`)
	w.ipamctl("", "events", "--type", "env.ipv4_addon.allocation_failed", "--type", "allocation.*").must(t, 0)
	w.exec(`INSERT INTO ipam_events (id, type, actor, data) VALUES (gen_random_uuid(), 'future.thing', 'newer', '{}')`)
	w.ipamctl("", "events", "--type", "future.thing").must(t, 0, "future.thing") // written by a newer binary
	w.exec(`DELETE FROM ipam_events WHERE type = 'future.thing'`)
	w.ipamctl("", "events", "--since", "soon").must(t, exitUsage, "--since \"soon\"")
	w.ipamctl("", "events", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)).must(t, 0)
	if r := w.ipamctl("", "events", "--limit", "1"); !strings.Contains(r.out, "instance.released") || strings.Count(r.out, "\n") != 1 {
		t.Fatalf("events --limit 1:\n%s", r.out)
	}

	// One family, env.*: the add-on's events under the names written now and
	// under those older versions wrote (accepted as aliases).
	e1 := ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: "e1", EnvID: "e1"}
	w.alloc("c1/v4", e1)
	e1.OrgID = "acme" // an org where there was none: the same tenant, relabelled in place
	if _, err := w.st.UpdateLabels(w.ctx, "c1", e1); err != nil {
		t.Fatal(err)
	}
	w.exec(`INSERT INTO ipam_events (id, type, cluster_id, owner_kind, owner_id, actor, data)
		VALUES (gen_random_uuid(), 'env_ipv4.relabeled', 'c1', 'env_ipv4', 'e0', 'older', '{}')`)
	r = w.ipamctl("", "events", "--type", "env.*").must(t, 0, "env.ipv4_addon_enabled", "env.ipv4_addon_relabeled", "env_ipv4.relabeled")
	if strings.Count(strings.TrimSpace(r.out), "\n") != 2 {
		t.Fatalf("events --type 'env.*':\n%s", r.out)
	}
	r = w.ipamctl("", "events", "--type", "env_ipv4.relabeled").must(t, 0, "env.ipv4_addon_relabeled", "env_ipv4.relabeled")
	if strings.Contains(r.out, "env.ipv4_addon_enabled") {
		t.Fatalf("events --type env_ipv4.relabeled:\n%s", r.out)
	}

	// Follow: events written after the start show up, once each.
	out, _, stop := w.background("events", "--follow", "--interval", "50ms", "--type", "node.*")
	w.alloc("c1/node", ipam.Owner{Kind: ipam.OwnerNode, ID: "n1", NodeID: "n1"})
	waitFor(t, "node.enrolled n1", func() bool { return strings.Contains(out.String(), "node=n1") })
	w.alloc("c1/node", ipam.Owner{Kind: ipam.OwnerNode, ID: "n2", NodeID: "n2"})
	waitFor(t, "node.enrolled n2", func() bool { return strings.Contains(out.String(), "node=n2") })
	time.Sleep(200 * time.Millisecond) // a few more polls: nothing is printed twice
	if code := stop(); code != 0 {
		t.Fatalf("follow exited %d", code)
	}
	if got := out.String(); strings.Count(got, "node.enrolled") != 2 || strings.Contains(got, "instance.") {
		t.Fatalf("follow printed:\n%s", got)
	}
	// Follow with --limit: the newest event, then only newer ones, never the
	// older ones the limit left out.
	out, _, stop = w.background("events", "--follow", "--limit", "1", "--interval", "50ms", "--type", "node.*")
	waitFor(t, "the newest event", func() bool { return strings.Contains(out.String(), "node=n2") })
	w.alloc("c1/node", ipam.Owner{Kind: ipam.OwnerNode, ID: "n3", NodeID: "n3"})
	waitFor(t, "node.enrolled n3", func() bool { return strings.Contains(out.String(), "node=n3") })
	time.Sleep(200 * time.Millisecond)
	if code := stop(); code != 0 {
		t.Fatalf("follow --limit exited %d", code)
	}
	if got := out.String(); strings.Contains(got, "node=n1") || strings.Count(got, "node.enrolled") != 2 {
		t.Fatalf("follow --limit 1 printed:\n%s", got)
	}
	// Follow from --since: the polls never print what came before it, though
	// they look back a while for late commits.
	since, err := operator.New(w.st).DatabaseNow(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, _, stop = w.background("events", "--follow", "--since", since.Format(time.RFC3339Nano), "--interval", "50ms", "--type", "node.*")
	time.Sleep(200 * time.Millisecond) // a few polls
	w.alloc("c1/node", ipam.Owner{Kind: ipam.OwnerNode, ID: "n4", NodeID: "n4"})
	waitFor(t, "node.enrolled n4", func() bool { return strings.Contains(out.String(), "node=n4") })
	time.Sleep(200 * time.Millisecond)
	if code := stop(); code != 0 {
		t.Fatalf("follow --since exited %d", code)
	}
	if got := out.String(); strings.Count(got, "node.enrolled") != 1 {
		t.Fatalf("follow --since (the events before it were n1 to n3) printed:\n%s", got)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readReport(t *testing.T, path string) operator.LeakReport {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := operator.ReadLeakReport(f)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// A leak report is advice: reclaim checks every allocation again, with the
// current inventory, right before releasing it, and refuses the live ones.
func TestLeaksAndReclaim(t *testing.T) {
	w := newWorld(t)
	for _, i := range []string{"i1", "i2", "i3", "i4", "i5"} {
		w.alloc("c1/instance", instance(i, "acme", "prod"))
	}
	w.alloc("c1/node", ipam.Owner{Kind: ipam.OwnerNode, ID: "n1", NodeID: "n1"})
	report := filepath.Join(t.TempDir(), "leaks.json")
	w.ipamctl("", "leaks", "--inventory", writeFile(t, "inv.txt", "i1\ni2\n"), "--kind", "instance", "-o", report).
		must(t, 0, "3 suspected leak(s) in the inventory report")
	rep := readReport(t, report)
	var owners []string
	for _, l := range rep.Leaks {
		owners = append(owners, l.OwnerID)
	}
	if strings.Join(owners, ",") != "i3,i4,i5" || rep.ClusterID != "" {
		t.Fatalf("report: %v", owners)
	}
	// The JSON object form on standard input gives the same leaks.
	r := w.ipamctl(`{"instance": ["i1", "i2"]}`, "leaks", "--inventory", "-").must(t, 0)
	if !strings.Contains(r.out, `"owner_id": "i3"`) || strings.Contains(r.out, `"owner_id": "n1"`) {
		t.Fatalf("leaks from stdin:\n%s", r.out)
	}

	// Since the report: i3 came back into the inventory (it exists after
	// all) and i4 was released and handed out again.
	w.release(instance("i4", "", ""))
	w.alloc("c1/instance", instance("i4", "acme", "prod"))

	before := w.query(`SELECT owner_id || ':' || state FROM ipam_allocations WHERE owner_kind = 'instance' ORDER BY owner_id`)
	r = w.ipamctl("", "reclaim", "--from-report", report).must(t, 0, "dry run: nothing was released", "would_reclaim", "i3", "i5")
	if after := w.query(`SELECT owner_id || ':' || state FROM ipam_allocations WHERE owner_kind = 'instance' ORDER BY owner_id`); after != before {
		t.Fatalf("the dry run changed %s into %s", before, after)
	}
	w.ipamctl("", "reclaim", "--from-report", report, "--apply").must(t, exitUsage, "--inventory is required to apply")

	r = w.ipamctl("i1\ni2\ni3\n", "reclaim", "--from-report", report, "--apply", "--inventory", "-", "--kind", "instance", "--json").
		must(t, exitRefused, "reclaimed 1, refused 2 of 3", "2 of the report's 3 allocation(s) refused")
	var res []operator.ReclaimResult
	if err := json.Unmarshal([]byte(r.out), &res); err != nil || len(res) != 3 {
		t.Fatalf("reclaim --json: %v\n%s", err, r.out)
	}
	for i, want := range []struct{ owner, outcome, reason string }{
		{"i3", "refused", `"i3" is in the current inventory: it is live`},
		{"i4", "refused", "handed out again since the report"},
		{"i5", "reclaimed", ""},
	} {
		if res[i].Leak.OwnerID != want.owner || res[i].Outcome != want.outcome || !strings.Contains(res[i].Reason, want.reason) {
			t.Errorf("outcome %d: %+v, want %+v", i, res[i], want)
		}
	}
	if got := w.query(`SELECT owner_id || ':' || state FROM ipam_allocations WHERE owner_kind = 'instance' ORDER BY owner_id`); got != "i1:active,i2:active,i3:active,i4:active,i5:cooling" {
		t.Fatalf("after reclaim: %s", got)
	}
	if got := w.query(`SELECT owner_id || ' ' || actor FROM ipam_events WHERE type = 'allocation.reclaimed'`); got != "i5 ipamctl" {
		t.Fatalf("reclaimed events: %s", got)
	}
	// Applied again, everything is refused (i5 is cooling now): there are
	// no others to have been reclaimed, and the message does not say so.
	r = w.ipamctl("i3\ni4\n", "reclaim", "--from-report", report, "--apply", "--inventory", "-", "--kind", "instance").
		must(t, exitRefused, "reclaimed 0, refused 3 of 3", "all 3 of the report's allocations were refused (see REASON); none was reclaimed")
	if strings.Contains(r.err, "the other") {
		t.Fatalf("all refused, yet the others were reclaimed:\n%s", r.err)
	}

	// Stale: n1, which a Terraform refresh read, has not been seen for 40
	// days. i1, made as long ago by a caller that does not refresh (the
	// scheduler), is not stale: age alone proves nothing of it.
	w.exec(`UPDATE ipam_allocations SET allocated_at = now() - interval '60 days', last_seen_at = now() - interval '40 days',
		confirmed_at = now() - interval '59 days' WHERE owner_id = 'n1'`)
	w.exec(`UPDATE ipam_allocations SET allocated_at = now() - interval '60 days', last_seen_at = now() - interval '60 days' WHERE owner_id = 'i1'`)
	stale := filepath.Join(t.TempDir(), "stale.json")
	w.ipamctl("", "leaks", "--stale-days", "30", "-o", stale).must(t, 0, "1 suspected leak(s) in the stale report")
	w.ipamctl("", "reclaim", "--from-report", stale, "--apply").must(t, 0, "reclaimed 1, refused 0 of 1", "reclaimed", "node n1")
	if got := w.query(`SELECT state FROM ipam_allocations WHERE owner_id = 'n1'`); got != "cooling" {
		t.Fatalf("n1 is %s", got)
	}

	// Bad input says what is wrong.
	// A plain list without --kind is a bad command line (exit 2, as a
	// missing flag is), naming the flag and its kinds; for reclaim too.
	for _, args := range [][]string{{"leaks", "--inventory", "-"}, {"reclaim", "--from-report", report, "--inventory", "-", "--apply"}} {
		r = w.ipamctl("web-1\n", args...).must(t, exitUsage, "--kind: --inventory - is a plain list of ids",
			"node, instance, env_ipv4, set", "Run 'ipamctl "+args[0]+" --help' for usage")
		if strings.Contains(r.err, "invalid_input") {
			t.Fatalf("%s: the missing flag told as bad input:\n%s", args[0], r.err)
		}
	}
	w.ipamctl("web-1\n", "leaks", "--inventory", "-", "--kind", "robot").must(t, exitUsage, `--kind: "robot" is not an owner kind: expected node, instance`)
	// An empty inventory is refused, naming the flag that accepts it.
	empty := writeFile(t, "empty.txt", "")
	w.ipamctl("", "leaks", "--inventory", empty, "--kind", "instance").must(t, exitError, "lists no instance at all", "give --allow-empty")
	w.ipamctl(`{"node": []}`, "leaks", "--inventory", "-").must(t, exitError, "lists no node at all", "give --allow-empty")
	w.ipamctl("", "leaks", "--inventory", empty, "--kind", "instance", "--allow-empty").must(t, 0, "suspected leak(s) in the inventory report")
	w.ipamctl("", "leaks", "--inventory", "/nonexistent/inv.txt", "--kind", "node").must(t, exitError, "--inventory: open /nonexistent/inv.txt")
	w.ipamctl("", "leaks", "--stale-days", "-3").must(t, exitUsage, "--stale-days: must be at least 1")
	w.ipamctl("", "leaks", "--stale-days", "0").must(t, exitUsage, "--stale-days: must be at least 1")
	w.ipamctl("", "reclaim", "--from-report", writeFile(t, "bad.json", `{"leaks": []}`)).must(t, exitError, "has format version 0; this ipamctl reads version 1")
}

func TestCheck(t *testing.T) {
	w := newWorld(t)
	w.alloc("c1/instance", instance("i1", "acme", "prod"))
	w.alloc("c1/instance", instance("i2", "acme", "prod"))
	w.alloc("c1/v4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: "e1", EnvID: "e1"})
	w.alloc("c1/v4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: "e2", EnvID: "e2"})
	w.ipamctl("", "check").must(t, 0, "ok: 9 invariants hold over 8 allocation rows")
	w.ipamctl("", "check", "--cluster", "nope").must(t, exitError, "not_found", `cluster "nope" does not exist`)

	// Usage counters that drifted: check names them, --recount-usage
	// repairs them, and a second recount finds nothing to correct.
	w.exec(`UPDATE ipam_pool_counters SET active = active + 3 WHERE pool_id = 'c1/instance' AND slot = 5`)
	w.ipamctl("", "check").must(t, exitViolations,
		"VIOLATION usage_counters: cluster c1, pool c1/instance: the counters say 5 active addresses, the pool holds 2",
		"1 violation(s) of usage_counters")
	w.ipamctl("", "check", "--recount-usage").must(t, 0, "ok: 9 invariants hold",
		"recounted c1/instance: the usage counters said 5 active, a real count found 2")
	r := w.ipamctl("", "check", "--recount-usage").must(t, 0, "ok: 9 invariants hold")
	if strings.Contains(r.err, "recounted") {
		t.Fatalf("a second recount corrected something:\n%s", r.err)
	}
	// --json of a check that passes: every invariant counted, at 0.
	r = w.ipamctl("", "check", "--json").must(t, 0)
	var ok operator.CheckReport
	if err := json.Unmarshal([]byte(r.out), &ok); err != nil || !ok.OK() || len(ok.Counts) != len(operator.Invariants) || ok.Total() != 0 ||
		!strings.Contains(r.out, `"`+operator.InvariantUsageCounts+`": 0`) {
		t.Fatalf("check --json of a database that holds every invariant: %v\n%s", err, r.out)
	}

	// Corrupt rows behind the allocator's back (and past the row trigger
	// that refuses an address outside its pool).
	w.exec(`ALTER TABLE ipam_allocations DISABLE TRIGGER ipam_allocations_in_pool_update`)
	w.exec(`UPDATE ipam_allocations SET address = '2001:db8:0:9::1' WHERE owner_id = 'i2'`)
	w.exec(`UPDATE ipam_allocations SET env_id = 'e1' WHERE owner_id = 'e2'`)
	r = w.ipamctl("", "check").must(t, exitViolations,
		"VIOLATION address_in_pool: cluster c1, pool c1/instance, address 2001:db8:0:9::1",
		"VIOLATION one_ipv4_per_environment: cluster c1: environment \"e1\" holds 2 active IPv4 addresses",
		"violation(s) of address_in_pool, one_ipv4_per_environment")
	t.Logf("ipamctl check:\n%s%s", r.out, r.err)
	r = w.ipamctl("", "check", "--json").must(t, exitViolations)
	var rep operator.CheckReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || rep.OK() || len(rep.Violations) != 3 ||
		rep.Counts[operator.InvariantInPool] != 1 || rep.Counts[operator.InvariantUsageCounts] != 0 {
		t.Fatalf("check --json: %v %+v", err, rep)
	}

}

func TestMetrics(t *testing.T) {
	w := newWorld(t)
	for _, e := range []string{"e1", "e2", "e3", "e4", "e5", "e6"} {
		w.alloc("c1/v4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: e, EnvID: e})
	}
	if _, err := w.st.Allocate(w.ctx, ipam.AllocateRequest{Pool: ipam.OperatorPool("c1", "v4"), Owner: ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: "e7"}}); ipam.Code(err) != ipam.CodeExhausted {
		t.Fatalf("e7: %v", err)
	}
	w.alloc("c1/instance", instance("i1", "acme", "prod"))
	w.release(instance("i1", "", ""))

	_, errb, stop := w.background("metrics", "--listen", "127.0.0.1:0")
	addr := regexp.MustCompile(`http://(\S+)/metrics`)
	waitFor(t, "the exporter to listen", func() bool { return addr.MatchString(errb.String()) })
	url := "http://" + addr.FindStringSubmatch(errb.String())[1] + "/metrics"
	body := scrape(t, url)
	for _, want := range []string{
		"ipam_database_up 1",
		`ipam_pool_utilization{category="ipv4",cluster="c1",pool="c1/v4"} 1`,
		`ipam_pool_alert{category="ipv4",cluster="c1",pool="c1/v4"} 1`,
		`ipam_pool_size{category="ipv4",cluster="c1",pool="c1/v4"} 6`,
		`ipam_pool_active{category="ipv4",cluster="c1",pool="c1/v4"} 6`,
		`ipam_allocation_failures_total{category="ipv4",cluster="c1",pool="c1/v4",reason="ipam_exhausted"} 1`,
		`ipam_allocation_failures_total{category="node",cluster="c1",pool="c1/node",reason="ipam_exhausted"} 0`,
		`ipam_cooldown_queue_size{category="instance",cluster="c1",pool="c1/instance"} 1`,
		`ipam_cooldown_next_reusable_timestamp_seconds{category="instance",cluster="c1",pool="c1/instance"}`,
		`ipam_category_utilization{category="ipv4",cluster="c1"} 1`,
		`ipam_exporter_build_info{version="dev"} 1`,
		"# TYPE ipam_allocation_failures_total counter",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", body)
	}
	// Every metric the alert rules and the dashboard use is exported.
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(body, -1) {
		exported[m[1]] = true
	}
	for _, file := range []string{"../../deploy/prometheus/ipam-alerts.yml", "../../deploy/grafana/ipam-dashboard.json"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		used := map[string]bool{}
		for _, m := range regexp.MustCompile(`\bipam_[a-z_]+`).FindAllString(string(b), -1) {
			// Error codes (reasons, in annotations) and file names are not metrics.
			if m == ipam.CodeExhausted || m == ipam.CodeUnavailable || strings.HasPrefix(m, "ipam_alerts") || m == "ipam_dashboard" {
				continue
			}
			used[m] = true
		}
		var missing []string
		for m := range used {
			if !exported[m] {
				missing = append(missing, m)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 || len(used) == 0 {
			t.Errorf("%s uses metrics ipamctl does not export: %v (uses %d)", file, missing, len(used))
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("metrics exited %d: %s", code, errb.String())
	}

	// A database that cannot be reached is reported, not fatal.
	ctx, cancel := context.WithCancel(context.Background())
	errb2 := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--database-url", "postgres://ipam:pw@127.0.0.1:1/ipam?connect_timeout=1", "--failover-timeout", "0", "metrics",
			"--listen", "127.0.0.1:0", "--scrape-timeout", "2s"}, strings.NewReader(""), io.Discard, errb2)
	}()
	waitFor(t, "the second exporter to listen", func() bool { return addr.MatchString(errb2.String()) })
	body = scrape(t, "http://"+addr.FindStringSubmatch(errb2.String())[1]+"/metrics")
	cancel()
	if code := <-done; code != 0 || !strings.Contains(body, "ipam_database_up 0") || strings.Contains(body, "ipam_pool_size") {
		t.Fatalf("unreachable database: exit %d, metrics:\n%s", code, body)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// listOwners splits list's table on whitespace, as a script would, and
// returns each row's KIND/OWNER, joined by spaces; every row must have one
// field per column of the header.
func listOwners(t *testing.T, out string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	header := strings.Fields(lines[0])
	kind, owner := slices.Index(header, "KIND"), slices.Index(header, "OWNER")
	if kind < 0 || owner < 0 {
		t.Fatalf("list's header %q has no KIND and OWNER:\n%s", lines[0], out)
	}
	var owners []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(header) {
			t.Fatalf("list's row %q splits into %d fields on whitespace, its header into %d:\n%s", l, len(f), len(header), out)
		}
		owners = append(owners, f[kind]+"/"+f[owner])
	}
	return strings.Join(owners, " ")
}

func TestScale(t *testing.T) {
	w := newWorld(t)
	// Nothing to scale is said, not silent (text); --json prints no object.
	w.ipamctl("", "scale").must(t, 0, "no node of any cluster has instance blocks: nothing to scale")
	w.ipamctl("", "scale", "--cluster", "c1").must(t, 0, `no node of cluster "c1" has instance blocks: nothing to scale`)
	if r := w.ipamctl("", "scale", "--json").must(t, 0); r.out != "" {
		t.Fatalf("scale --json with no node to scale printed %q", r.out)
	}
	demand := int64(25)
	if _, err := w.st.ScaleNodeBlocks(w.ctx, "c1", "n1", ipam.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 8, Demand: &demand}); err != nil {
		t.Fatal(err)
	}
	w.ipamctl("", "scale", "--cluster", "c1", "--node", "n1").must(t, 0, "c1/n1: 0 used, 3 blocks (48 addresses), target 3: no change")
	// Out of band, demand goes up: the next scaling adds the missing blocks in one step.
	w.exec(`UPDATE ipam_node_block_settings SET demand = 100 WHERE node_id = 'n1'`)
	// A second node with blocks: --json prints one object per node, per line.
	if _, err := w.st.ScaleNodeBlocks(w.ctx, "c1", "n2", ipam.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 8}); err != nil {
		t.Fatal(err)
	}
	r := w.ipamctl("", "scale", "--json").must(t, 0)
	lines := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
	byNode := map[string]scaleResult{}
	for _, l := range lines {
		var res scaleResult
		if err := json.Unmarshal([]byte(l), &res); err != nil {
			t.Fatalf("scale --json: line %q: %v", l, err)
		}
		byNode[res.Node] = res
	}
	if res := byNode["n1"]; len(lines) != 2 || len(res.Added) != 4 || len(res.Blocks) != 7 || res.TargetBlocks != 7 || len(byNode["n2"].Blocks) != 1 {
		t.Fatalf("scale --json: %q", r.out)
	}
	w.ipamctl("", "scale", "--cluster", "c1", "--node", "nope").must(t, 1, "has no instance blocks")
	w.ipamctl("", "scale", "--cluster", "nope").must(t, exitError, "not_found", `cluster "nope" does not exist`)
	w.ipamctl("", "scale", "--node", "n1").must(t, exitUsage, "--node needs --cluster")
}

// release frees one allocation into its cooldown, by address or by owner,
// with its event and reason; what a Terraform state confirmed is refused,
// naming the owner, unless --force, which warns.
func TestRelease(t *testing.T) {
	w := newWorld(t)
	i1 := w.alloc("c1/instance", instance("i1", "acme", "prod"))
	e1 := w.alloc("c1/v4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: "e1", EnvID: "e1", OrgID: "acme"})
	if _, err := w.st.GetActive(w.ctx, "c1", ipam.OwnerEnvIPv4, "e1"); err != nil { // a Terraform refresh confirms it
		t.Fatal(err)
	}

	w.ipamctl("", "release", i1.Address.String()).must(t, exitUsage, "--reason is required")
	w.ipamctl("", "release", i1.Address.String(), "--reason", "   ").must(t, exitUsage, "--reason is required")
	w.ipamctl("", "release", "--kind", "instance", "--reason", "x").must(t, exitUsage, "give an address, or --kind and --owner")
	w.ipamctl("", "release", "--kind", "instance", "--owner", "i1", "--reason", "x").must(t, exitUsage, "--cluster")
	w.ipamctl("", "release", i1.Address.String(), "--reason", "instance i1 deleted by hand").
		must(t, 0, "released "+i1.Address.String(), `instance "i1"`, "cooldown until")
	w.ipamctl("", "lookup", i1.Address.String()).must(t, 0, "cooling")
	r := w.ipamctl("", "events", "--type", "instance.released", "--json").must(t, 0, "instance i1 deleted by hand", `"released_by":"operator"`)
	if !strings.Contains(r.out, `"actor":"ipamctl"`) {
		t.Fatalf("the event does not name the operator's actor:\n%s", r.out)
	}
	// Again, by address or by owner: already released, nothing done, exit 0
	// (as the Go API's Release of a released owner is a no-op), no second event.
	w.ipamctl("", "release", i1.Address.String(), "--reason", "again").
		must(t, 0, "already released: "+i1.Address.String(), `instance "i1"`, "is cooling until", "nothing to do")
	r = w.ipamctl("", "release", "--cluster", "c1", "--kind", "instance", "--owner", "i1", "--reason", "again", "--json").must(t, 0)
	var again releaseJSON
	if err := json.Unmarshal([]byte(r.out), &again); err != nil || !again.AlreadyReleased || again.Allocation.OwnerID != "i1" || again.Allocation.Category != "instance" {
		t.Fatalf("release again --json: %v\n%s", err, r.out)
	}
	if r := w.ipamctl("", "events", "--type", "instance.released"); strings.Count(r.out, "instance.released") != 1 {
		t.Fatalf("a repeated release wrote an event:\n%s", r.out)
	}
	// Once its cooldown is over, a repeated release says it is free, as lookup does.
	w.exec(`UPDATE ipam_allocations SET released_at = released_at - interval '25 hours', reusable_at = reusable_at - interval '25 hours', cooling_until = cooling_until - interval '25 hours' WHERE owner_id = 'i1'`)
	w.ipamctl("", "lookup", i1.Address.String()).must(t, 0, "free")
	w.ipamctl("", "release", i1.Address.String(), "--reason", "again").must(t, 0, "finished its cooldown at", "is free; nothing to do")
	r = w.ipamctl("", "release", i1.Address.String(), "--reason", "again", "--json").must(t, 0)
	if err := json.Unmarshal([]byte(r.out), &again); err != nil || again.Allocation.State != ipam.StateFree {
		t.Fatalf("release again --json after the cooldown: %v\n%s", err, r.out)
	}
	// Never allocated: still an error.
	w.ipamctl("", "release", "2001:db8:0:1::ffff", "--reason", "typo").must(t, exitError, "not_found", "no active allocation of 2001:db8:0:1::ffff")
	w.ipamctl("", "release", "--cluster", "c1", "--kind", "instance", "--owner", "i-typo", "--reason", "typo").must(t, exitError, "not_found")

	// Confirmed by a Terraform state: refused, naming the owner; nothing changes.
	args := []string{"release", "--cluster", "c1", "--kind", "env_ipv4", "--owner", "e1", "--reason", "env e1 retired"}
	w.ipamctl("", args...).must(t, exitError, "conflict:", `env_ipv4 "e1"`, "a Terraform state confirmed it", "with force",
		"Held by a Terraform State. Nothing was released")
	w.ipamctl("", "list", "--cluster", "c1", "--kind", "env_ipv4").must(t, 0, "e1", "active")
	r = w.ipamctl("", append(args, "--force", "--json")...).must(t, 0, "WARNING: --force released", `env_ipv4 "e1" still uses it`,
		"allocates for that owner again, which gets "+e1.Address.String()+" back", "remove the owner from it")
	if strings.Contains(r.err, "a new address") {
		t.Fatalf("the warning promises a new address:\n%s", r.err)
	}
	var got releaseJSON
	if err := json.Unmarshal([]byte(r.out), &got); err != nil || !got.Forced || got.Allocation.OwnerID != "e1" || got.Allocation.State != ipam.StateCooling {
		t.Fatalf("release --force --json: %v\n%s", err, r.out)
	}
	// What the warning says: the configuration's next apply gets the same address back.
	if again := w.alloc("c1/v4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: "e1", EnvID: "e1", OrgID: "acme"}); again.Address != e1.Address {
		t.Fatalf("the owner's next allocation after --force got %s, want its own %s back", again.Address, e1.Address)
	}
	w.ipamctl("", "events", "--type", "env.ipv4_addon_disabled", "--json").must(t, 0, `"forced":true`, "env e1 retired")
	w.ipamctl("", "check").must(t, 0)
}

// expire-hold ends a plan's hold now, by address or by owner, with its
// event and reason: another configuration may then declare the owner.
// Again, it says so and exits 0; what holds no hold is an error, and an
// active allocation is named with the command that releases it.
func TestExpireHold(t *testing.T) {
	w := newWorld(t)
	ci, err := ipam.Open(w.ctx, ipam.Config{DatabaseURL: w.url, Actor: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	defer ci.Close()
	h, err := ci.Reserve(w.ctx, ipam.AllocateRequest{Pool: testdb.Pool("c1/instance"), Owner: instance("i1", "acme", "prod")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Allocate(w.ctx, ipam.AllocateRequest{Pool: testdb.Pool("c1/instance"), Owner: instance("i1", "acme", "prod")}); !errors.Is(err, ipam.ErrOwnerConflict) {
		t.Fatalf("declaring i1 while another actor's plan holds it: %v, want owner_conflict", err)
	}
	w.ipamctl("", "expire-hold", h.Address.String()).must(t, exitUsage, "--reason is required")
	w.ipamctl("", "expire-hold", "--kind", "instance", "--owner", "i1", "--reason", "x").must(t, exitUsage, "--cluster")
	w.ipamctl("", "expire-hold", "--kind", "instance", "--reason", "x").must(t, exitUsage, "give an address, or --kind and --owner")
	w.ipamctl("", "expire-hold", h.Address.String(), "--kind", "instance", "--owner", "i1", "--reason", "x").must(t, exitUsage, "not both")
	w.ipamctl("", "expire-hold", "not-an-address", "--reason", "x").must(t, exitUsage, "not-an-address")
	w.ipamctl("", "expire-hold", h.Address.String()+"/64", "--reason", "x").must(t, exitUsage)
	w.ipamctl("", "release", "not-an-address", "--reason", "x").must(t, exitUsage, "not-an-address")
	w.ipamctl("", "lookup", h.Address.String()).must(t, 0, "reserved")
	w.ipamctl("", "expire-hold", h.Address.String(), "--reason", "CI plan abandoned").
		must(t, 0, "expired the hold on "+h.Address.String(), `instance "i1"`, `planned by actor "ci"`, "free for any owner now")
	w.ipamctl("", "lookup", h.Address.String()).must(t, 0, "free")
	r := w.ipamctl("", "events", "--type", "allocation.hold_expired", "--json").
		must(t, 0, "CI plan abandoned", `"expired_by":"operator"`, `"holder_actor":"ci"`, `"actor":"ipamctl"`)
	if strings.Count(r.out, "\n") != 1 {
		t.Fatalf("want one event:\n%s", r.out)
	}
	r = w.ipamctl("", "expire-hold", "--cluster", "c1", "--kind", "instance", "--owner", "i1", "--reason", "again", "--json").must(t, 0)
	var got expireHoldJSON
	if err := json.Unmarshal([]byte(r.out), &got); err != nil || !got.AlreadyExpired || got.Allocation.OwnerID != "i1" ||
		got.Allocation.State != ipam.StateFree || got.Allocation.Category != "instance" || got.HeldUntil.IsZero() || got.Reason != "" {
		t.Fatalf("expire-hold again --json: %v\n%s", err, r.out)
	}
	w.ipamctl("", "expire-hold", h.Address.String()+"/128", "--reason", "again").must(t, 0, "already expired", "nothing to do")
	// The other configuration may now declare the owner.
	a := w.alloc("c1/instance", instance("i1", "acme", "prod"))
	w.ipamctl("", "expire-hold", a.Address.String(), "--reason", "x").
		must(t, exitError, "not_found", "no plan-time hold of "+a.Address.String(), `active allocation of instance "i1"`, "ipamctl release")
	w.ipamctl("", "expire-hold", "--cluster", "c1", "--kind", "node", "--owner", "n-typo", "--reason", "typo").must(t, exitError, "not_found")
	w.ipamctl("", "expire-hold", h.Address.String(), "--cluster", "c-typo", "--reason", "typo").must(t, exitError, `cluster "c-typo" does not exist`)
	w.ipamctl("", "release", h.Address.String(), "--cluster", "c-typo", "--reason", "typo").must(t, exitError, `cluster "c-typo" does not exist`)
	w.ipamctl("", "check").must(t, 0)
}

// A scrape waits for the database no longer than the flag says, and ends
// inside the scrape timeout Prometheus sends, so that ipam_database_up 0
// reaches it.
func TestScrapeTimeout(t *testing.T) {
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"", 8 * time.Second},
		{"not a number", 8 * time.Second},
		{"10", 8 * time.Second},
		{"5", 4500 * time.Millisecond},
		{"0.5", 450 * time.Millisecond},
	} {
		h := http.Header{}
		if c.header != "" {
			h.Set("X-Prometheus-Scrape-Timeout-Seconds", c.header)
		}
		if got := scrapeTimeout(8*time.Second, h); got != c.want {
			t.Errorf("header %q: %v, want %v", c.header, got, c.want)
		}
	}
}

// migrate up says what this run applied: runs at once take turns,
// migration by migration, and each says so rather than claiming the whole
// migration (found by a trial as a new team: three runs on an empty database
// said "from version 0", "from 1" and "from 4 to 36").
func TestMigrateOutcomeSaysWhatThisRunApplied(t *testing.T) {
	for _, c := range []struct {
		st   ipam.SchemaStatus
		want string
	}{
		{ipam.SchemaStatus{Found: 36, Current: 36}, "schema is up to date at version 36 (db:5432)"},
		{ipam.SchemaStatus{Found: 0, Current: 36, Applied: 36}, "schema migrated from version 0 to 36 (db:5432)"},
		{ipam.SchemaStatus{Found: 0, Current: 36, Applied: 12},
			"schema migrated from version 0 to 36 (db:5432): this run applied 12 of the 36 migrations, another process at the same time the others"},
		{ipam.SchemaStatus{Found: 30, Current: 36}, "schema is at version 36 (db:5432): another process migrated it from version 30 meanwhile; this run applied none"},
	} {
		if got := migrateOutcome(c.st, "db:5432"); got != c.want {
			t.Errorf("%+v: %q, want %q", c.st, got, c.want)
		}
	}
}
