package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// startPgBouncer starts a PgBouncer (scripts/pgbouncer.sh, default settings
// but for the script's options in more) in front of the server of upstream
// (a superuser URL), in the given pool mode, stopped at the end of the test.
// It returns its URL for database db.
func startPgBouncer(t *testing.T, upstream, mode, db string, more ...string) string {
	t.Helper()
	url, _ := startPgBouncerIn(t, upstream, mode, db, more...)
	return url
}

// startPgBouncerIn is startPgBouncer, and the directory of its files (its
// log in DIR/log).
func startPgBouncerIn(t *testing.T, upstream, mode, db string, more ...string) (string, string) {
	t.Helper()
	dir := serverDir(t, "pgbouncer")
	script(t, "pgbouncer.sh", append([]string{"start", dir, "--upstream", upstream, "--mode", mode}, more...)...)
	t.Cleanup(func() { scriptQuiet(t, "pgbouncer.sh", "stop", dir) })
	b, err := os.ReadFile(filepath.Join(dir, "url"))
	if err != nil {
		t.Fatal(err)
	}
	return withDatabase(t, strings.TrimSpace(string(b)), db), dir
}

// The provider, ipamctl's core and the Go API through PgBouncer with its
// default settings (no ignore_startup_parameters), in transaction and in
// session pooling: several processes migrating an empty database at once,
// create, an empty re-plan, import, 8 concurrent applies of 25 resources
// each, a placement in the caller's transaction, destroy; and a startup
// parameter PgBouncer rejects is named as a refusal, not as a network fault.
// In session pooling a client connection keeps its server connection until
// it closes, so the pool is sized as the production database guide says:
// max_connections and 1 for each provider process, and each Go client's
// pool and 1 (with PgBouncer's default of 20, the applies beyond it wait for
// others to end; see TestPgBouncerWithoutAServerConnectionFree).
func TestPgBouncer(t *testing.T) {
	const users, each = 8, 25
	for _, mode := range []string{"transaction", "session"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			db := fmt.Sprintf("pgbouncer_%s_%d", mode, os.Getpid())
			direct := createEmptyDatabase(t, testdb.AdminURL(t), db) // what the checks read, bypassing the pooler
			var sizing []string
			if mode == "session" {
				// The applies, the two probe clients and the placement's
				// client and connection, all open at once.
				sizing = []string{"--pool-size", fmt.Sprint(users*(ipam.DefaultMaxConnections+1) + 2*2 + (ipam.DefaultMaxConnections + 1) + 1)}
			}
			url, pgbouncerDir := startPgBouncerIn(t, testdb.AdminURL(t), mode, db, sizing...)
			ctx := context.Background()

			// Several processes start at once on an empty database: one
			// migrates, the others wait for it and find nothing to do.
			var wg sync.WaitGroup
			errs := make([]error, 6)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, MaxConnections: 2})
					if err != nil {
						errs[i] = err
						return
					}
					defer st.Close()
					_, errs[i] = st.Migrate(ctx)
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("migration %d through PgBouncer (%s pooling): %v", i, mode, err)
				}
			}
			seed(t, url)

			// Two clients in turn read the same allocation: through
			// transaction pooling the second lands on the server connection
			// where the first prepared its statements, and its own named
			// statement collides; it switches to unnamed statements and the
			// read succeeds. Through session pooling, and directly, named
			// statements stay.
			wantMode := map[string]string{"transaction": "cache_describe", "session": "cache_statement"}[mode]
			var last *ipam.Client
			for i := 0; i < 2; i++ {
				st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, MaxConnections: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				probe := ipam.Owner{Kind: ipam.OwnerNode, ID: fmt.Sprintf("probe-%d", i), NodeID: fmt.Sprintf("probe-%d", i)}
				if _, err := st.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: probe}); err != nil {
					t.Fatalf("client %d through PgBouncer (%s pooling): %v", i, mode, err)
				}
				if _, err := st.GetActive(ctx, "c1", ipam.OwnerNode, probe.ID); err != nil {
					t.Fatalf("client %d through PgBouncer (%s pooling): %v", i, mode, err)
				}
				if _, err := st.Release(ctx, "c1", probe, 0); err != nil {
					t.Fatal(err)
				}
				last = st
			}
			if got := last.StatementMode(); got != wantMode {
				t.Errorf("through %s pooling the second client sends statements as %s, want %s", mode, got, wantMode)
			}
			if mode == "transaction" {
				fixedModeThroughPooler(t, url)
			}
			directSt, err := ipam.Open(ctx, ipam.Config{DatabaseURL: direct, MaxConnections: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer directSt.Close()
			if _, err := operator.New(directSt).PoolUsage(ctx, "c1"); err != nil || directSt.StatementMode() != "cache_statement" {
				t.Errorf("a direct connection: %v, statements as %s, want cache_statement", err, directSt.StatementMode())
			}

			// One user: create, re-plan, import, destroy.
			w := newWorkdir(t, url, mixed("solo", 6))
			w.run("apply", "-input=false", "-auto-approve")
			if out, err := w.try("plan", "-input=false", "-detailed-exitcode"); err != nil {
				t.Fatalf("re-plan after create is not empty: %v\n%s", err, out)
			}
			before := w.addresses("")
			for res, id := range map[string]string{
				"ipam_node_address.rsolo-0":     "c1/solo-0",
				"ipam_instance_address.rsolo-1": "c1/solo-1",
				"ipam_env_ipv4.rsolo-2":         "c1/v4/solo-2",
			} {
				w.run("state", "rm", res)
				w.run("import", "-input=false", res, id)
			}
			if out, err := w.try("plan", "-input=false", "-detailed-exitcode"); err != nil {
				t.Fatalf("re-plan after import is not empty: %v\n%s", err, out)
			}
			for res, addr := range w.addresses("") {
				if before[res] != addr {
					t.Errorf("%s: %s before the import, %s after", res, before[res], addr)
				}
			}
			// Every provider process of those commands closed its
			// connections as it ended: PgBouncer logged no dropped client.
			if log, err := os.ReadFile(filepath.Join(pgbouncerDir, "log")); err != nil {
				t.Fatal(err)
			} else if n := strings.Count(string(log), "client unexpected eof"); n != 0 {
				t.Errorf("PgBouncer (%s pooling) logged %d client connections dropped without a goodbye", mode, n)
			}

			// Eight users apply 25 resources each at once.
			ws := make([]*workdir, users)
			for u := range ws {
				ws[u] = newWorkdir(t, url, mixed(fmt.Sprintf("u%d", u), each))
			}
			for _, uw := range ws {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if out, err := uw.try("apply", "-input=false", "-auto-approve"); err != nil {
						t.Errorf("concurrent apply through PgBouncer (%s pooling): %v\n%s", mode, err, out)
					}
				}()
			}
			wg.Wait()
			if n := stateMatchesDB(t, direct, append(ws, w)...); n != users*each+6 {
				t.Errorf("%d resources in the states, want %d", n, users*each+6)
			}

			// The scheduler's placement: its own row and the address in one
			// transaction through the pooler.
			client, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, Actor: "scheduler"})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			conn, err := pgx.Connect(ctx, url+"&default_query_exec_mode=cache_describe")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
			if err != nil {
				t.Fatal(err)
			}
			got, err := client.AllocateInstance(ctx, tx, ipam.InstanceRequest{ClusterID: "c1", InstanceID: "sched-1", OrgID: "acme", EnvID: "prod"})
			if err != nil {
				t.Fatalf("AllocateInstance through PgBouncer (%s pooling): %v", mode, err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if owner := activeAddresses(t, direct)[got.Address.String()]; owner != ipam.OwnerInstance+"/sched-1" {
				t.Errorf("the placement's address %s is held by %q after commit", got.Address, owner)
			}
			checkInvariants(t, direct)

			for _, uw := range append(ws, w) {
				uw.run("destroy", "-input=false", "-auto-approve")
			}
			if n := countRows(t, direct, `SELECT count(*) FROM ipam_allocations WHERE state = 'active' AND owner_kind <> 'instance'`); n != 0 {
				t.Errorf("%d addresses still active after every destroy", n)
			}
			checkInvariants(t, direct)

			// A startup parameter PgBouncer does not know is refused: the
			// error names the refusal and PgBouncer's words.
			st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url + "&search_path=public"})
			if err != nil {
				t.Fatal(err)
			}
			err = st.Ping(ctx)
			st.Close()
			if ipam.Code(err) != ipam.CodeRefused || !regexp.MustCompile(`unsupported startup parameter`).MatchString(err.Error()) {
				t.Errorf("a startup parameter PgBouncer rejects: got %v, want %s with PgBouncer's message", err, ipam.CodeRefused)
			}
		})
	}
}

// fixedModeThroughPooler: named prepared statements fixed in the connection
// string (default_query_exec_mode=cache_statement) cannot work through
// transaction pooling, and the IPAM may not switch them. Two clients in turn
// meet each other's statements on the one server connection: the second is
// refused (ipam_refused) naming the setting and what to do, not told that
// the schema is wrong ("prepared statement already exists" is SQLSTATE
// class 42, which otherwise reads as a missing table or column).
func fixedModeThroughPooler(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	fixed := url + sep + "default_query_exec_mode=cache_statement"
	var err error
	for i := 0; i < 2 && err == nil; i++ {
		var st *ipam.Client
		if st, err = ipam.Open(ctx, ipam.Config{DatabaseURL: fixed, MaxConnections: 1}); err != nil {
			t.Fatal(err)
		}
		_, err = st.GetCluster(ctx, "c1")
		st.Close()
	}
	said := strings.Join(strings.Fields(fmt.Sprint(err)), " ")
	if ipam.Code(err) != ipam.CodeRefused || !strings.Contains(said, "default_query_exec_mode=cache_statement") ||
		!strings.Contains(said, "leave the setting out") || strings.Contains(said, "migrat") {
		t.Errorf("named statements fixed through transaction pooling: %v, want ipam_refused naming the setting", err)
	}
	// A pool of the caller's, given to New with pgx's default mode: the
	// client cannot switch it, and the refusal says to configure that pool.
	err = nil
	for i := 0; i < 2 && err == nil; i++ {
		pool, perr := pgxpool.New(ctx, url)
		if perr != nil {
			t.Fatal(perr)
		}
		st, nerr := ipam.New(pool, ipam.Config{Actor: "scheduler"})
		if nerr != nil {
			t.Fatal(nerr)
		}
		_, err = st.GetCluster(ctx, "c1")
		pool.Close()
	}
	said = strings.Join(strings.Fields(fmt.Sprint(err)), " ")
	if ipam.Code(err) != ipam.CodeRefused || !strings.Contains(said, "configure that pool with default_query_exec_mode=cache_describe") ||
		strings.Contains(said, "leave the setting out") {
		t.Errorf("a pool given to New with named statements through transaction pooling: %v, want ipam_refused saying to configure that pool", err)
	}
}

// A PgBouncer in session pooling whose pool has no server connection free
// (one, kept by another client) makes an allocation wait in its queue: the
// call ends within its own bound (lock_timeout and 2 s, then a look's) as
// ipam_timeout, naming the pooler's queue and how to size the pool, not as
// a lock another session held, and nothing is written.
func TestPgBouncerWithoutAServerConnectionFree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := fmt.Sprintf("pgbouncer_full_%d", os.Getpid())
	direct := createEmptyDatabase(t, testdb.AdminURL(t), db)
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: direct})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	seed(t, direct)
	url := startPgBouncer(t, testdb.AdminURL(t), "session", db, "--pool-size", "1")

	holder, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, MaxConnections: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := operator.New(holder).PoolUsage(ctx, "c1"); err != nil { // its connection now keeps the server's
		t.Fatal(err)
	}
	waiter, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, MaxConnections: 1, LockTimeout: time.Second, StatementTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	_, err = waiter.Allocate(ctx, ipam.AllocateRequest{Pool: ipam.NodePool("c1"), Owner: ipam.Owner{Kind: ipam.OwnerNode, ID: "queued", NodeID: "queued"}})
	var te *ipam.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, ipam.ErrTimeout) {
		t.Fatalf("an allocation queued in PgBouncer: %v, want ipam_timeout", err)
	}
	for _, want := range []string{"no server connection free", "default_pool_size must cover every client connection", "nothing was written"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "gone when the call looked") {
		t.Errorf("the error blames a lock that was never looked at:\n%v", err)
	}
	if n := countRows(t, direct, `SELECT count(*) FROM ipam_allocations WHERE owner_id = 'queued'`); n != 0 {
		t.Errorf("%d allocations of the queued call", n)
	}
}
