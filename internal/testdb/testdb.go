// Package testdb gives each test its own migrated PostgreSQL database, cloned
// in milliseconds from a template database that is migrated once per schema
// (the template's name carries a hash of the migrations), as pgtestdb does.
//
// The server comes from IPAM_TEST_DATABASE_URL, which `make test` sets after
// starting a throwaway server (scripts/with-postgres.sh). Without it the test
// is skipped locally and fails in CI, so CI can never pass by skipping.
package testdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/migrations"
)

// EnvURL names the variable holding the admin URL of the test server.
const EnvURL = "IPAM_TEST_DATABASE_URL"

// AdminURL returns the test server's URL, skipping (or, in CI, failing) the
// test when there is none.
func AdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: run the tests with `make test`, which starts PostgreSQL", EnvURL)
		}
		t.Skipf("%s is not set: run `make test`, which starts a throwaway PostgreSQL", EnvURL)
	}
	return u
}

var counter atomic.Int64

// New creates a fresh, migrated database for the test and returns its URL.
// The database is dropped when the test passes and kept (its name logged)
// when it fails, for debugging.
func New(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	u, name, drop, err := Create(admin)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testdb: keeping database %s for debugging", name)
			return
		}
		drop()
	})
	return u
}

// Main is the TestMain of a package whose tests need the server: without
// one it skips the package locally and fails in CI, as AdminURL does a test.
// With url set it also makes a fresh, migrated database for the package's
// examples (an example takes no testing.T to make one), sets *url to it and
// drops it when everything passed. It runs the package and exits.
func Main(m *testing.M, pkg string, url *string) {
	admin := os.Getenv(EnvURL)
	if admin == "" {
		if os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "%s is not set: run the tests with `make test`, which starts PostgreSQL\n", EnvURL)
			os.Exit(1)
		}
		fmt.Printf("skipping package %s: %s is not set (run `make test`, which starts a throwaway PostgreSQL)\n", pkg, EnvURL)
		os.Exit(0)
	}
	if url == nil {
		os.Exit(m.Run())
	}
	u, _, drop, err := Create(admin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*url = u
	code := m.Run()
	if code == 0 {
		drop()
	}
	os.Exit(code)
}

// Create makes a fresh, migrated database on the server at admin, for code
// that has no testing.TB (a TestMain for examples): its URL, its name, and
// a function that drops it.
func Create(admin string) (u, name string, drop func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tpl, err := ensureTemplate(ctx, admin)
	if err != nil {
		return "", "", nil, fmt.Errorf("template: %w", err)
	}
	name = fmt.Sprintf("ipam_test_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, counter.Add(1))
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", "", nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tpl)); err != nil {
		return "", "", nil, fmt.Errorf("create %s: %w", name, err)
	}
	// No JIT compilation in a test's database (a database's settings are
	// not copied from its template, so each clone gets it). The core turns
	// sequential scans off in its transactions, which puts any statement
	// with no index to use (a pool's overlap check, a test's bulk insert)
	// over jit_above_cost, and the server then compiled it at every run:
	// half of the server's CPU in go test ./ipam (25 of 56 s) went to JIT.
	// JIT changes no result, only speed, which is make bench's business
	// (its server keeps the default).
	if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s SET jit = off", name)); err != nil {
		return "", "", nil, fmt.Errorf("settings of %s: %w", name, err)
	}
	drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	}
	return WithDatabase(admin, name), name, drop, nil
}

// WithDatabase returns the URL u pointing at another database.
func WithDatabase(u, db string) string {
	pu, err := url.Parse(u)
	if err != nil {
		panic(err)
	}
	pu.Path = "/" + db
	return pu.String()
}

func migrationsHash() (string, error) {
	h := sha256.New()
	// Every file: the numbered migrations and the function definitions.
	var names []string
	err := fs.WalkDir(migrations.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			return "", err
		}
		h.Write([]byte(n))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// ensureTemplate creates the migrated template once per schema hash. Test
// binaries of several packages run at once, so creation is serialized with an
// advisory lock on the admin database.
func ensureTemplate(ctx context.Context, admin string) (string, error) {
	hash, err := migrationsHash()
	if err != nil {
		return "", err
	}
	tpl := "ipam_tpl_" + hash
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7290001)"); err != nil {
		return "", err
	}
	defer func() { _, _ = conn.Exec(context.Background(), "SELECT pg_advisory_unlock(7290001)") }()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", tpl).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return tpl, nil
	}
	building := tpl + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", err
	}
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: WithDatabase(admin, building), MaxConnections: 1})
	if err != nil {
		return "", err
	}
	_, err = st.Migrate(ctx)
	st.Close()
	if err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+tpl); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+tpl+" IS_TEMPLATE true"); err != nil && !strings.Contains(err.Error(), "exist") {
		return "", err
	}
	return tpl, nil
}

// ModelSeed is the seed of a randomized model test: IPAM_MODEL_SEED when set
// (to replay a run), else the clock.
func ModelSeed(t testing.TB) uint64 {
	t.Helper()
	s := os.Getenv("IPAM_MODEL_SEED")
	if s == "" {
		return uint64(time.Now().UnixNano())
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("IPAM_MODEL_SEED: %v", err)
	}
	return v
}

// Pool is a test's pool id ("c1/node", "c1/v4") as the core's typed
// reference; a malformed id is a bug in the test.
func Pool(id string) ipam.PoolRef {
	r, err := ipam.ParsePoolRef("pool", id)
	if err != nil {
		panic(err)
	}
	return r
}
