package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// suffix makes role and database names unique on the shared test server.
func suffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%d_%s", os.Getpid(), hex.EncodeToString(b))
}

// sqlExec runs statements on the database at u.
func sqlExec(t *testing.T, u string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// withUser returns u with other credentials.
func withUser(t *testing.T, u, user, password string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.User = url.UserPassword(user, password)
	return pu.String()
}

// run is w.run with extra environment variables (the last value of a variable wins).
func (w *workdir) runEnv(env []string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := w.command(ctx, append(args, "-no-color")...)
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// The database password never shows: not in a TF_LOG=trace log of the
// provider and terraform, not in the state, not in the audit trail or the
// failure records, not in any error text, whether the password comes from the
// provider block (a sensitive variable) or IPAM_DATABASE_URL, and whether the
// connection string is a URL or keyword/value. The password is made to be
// findable in every encoding: it carries a sentinel of letters and digits,
// and characters that URLs percent-encode.
func TestSecretNeverLogged(t *testing.T) {
	const sentinel = "Zq8sentinel"
	password := sentinel + "-p@ss:w/rd%'x"
	role := "ipam_secret_" + suffix()
	dbURL := testdb.New(t)
	seed(t, dbURL)
	sqlExec(t, dbURL,
		"CREATE ROLE "+role+" LOGIN PASSWORD "+quoteLiteral(password),
		"GRANT USAGE ON SCHEMA public TO "+role,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "+role,
		"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO "+role)
	t.Cleanup(func() {
		sqlExec(t, dbURL, "REASSIGN OWNED BY "+role+" TO CURRENT_USER", "DROP OWNED BY "+role)
		sqlExec(t, testdb.AdminURL(t), "DROP ROLE IF EXISTS "+role)
	})
	ctx := context.Background()
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	// A pool of two addresses, so that the third allocation is refused and recorded.
	if _, err := st.CreatePool(ctx, ipam.Pool{ClusterID: "c1", Name: "tiny", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/30")}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	secretURL := withUser(t, dbURL, role, password)
	pu, _ := url.Parse(secretURL)
	keyValue := fmt.Sprintf("host=%s port=%s dbname=%s user=%s password=%s sslmode=disable",
		pu.Hostname(), pu.Port(), strings.TrimPrefix(pu.Path, "/"), role, quoteLiteral(password))

	const providerBlock = "  database_url = var.db\n  auto_migrate = false\n  failover_timeout = \"1s\""
	hcl := "variable \"db\" {\n  type      = string\n  sensitive = true\n}\n\n" + mixed("sec", 6)
	tiny := ""
	for i := 0; i < 3; i++ {
		tiny += fmt.Sprintf("resource \"ipam_env_ipv4\" \"tiny%d\" {\n  pool_id = \"c1/tiny\"\n  org_id = \"acme\"\n  env_id = \"tiny-%d\"\n}\n", i, i)
	}
	w := newWorkdirWith(t, "", providerBlock, hcl)
	logs := t.TempDir()
	var texts []string
	runs := 0
	step := func(name string, wantOK bool, dbValue string, args ...string) {
		t.Helper()
		runs++
		env := []string{"TF_LOG=trace", "TF_LOG_PATH=" + filepath.Join(logs, name+".log"), "TF_VAR_db=" + dbValue}
		out, err := w.runEnv(env, args...)
		if (err == nil) != wantOK {
			t.Fatalf("%s: terraform %s: err = %v, want success %v\n%s", name, strings.Join(args, " "), err, wantOK, out)
		}
		texts = append(texts, string(out))
	}
	// 1. A successful apply with the password in the provider block (a sensitive variable).
	step("apply", true, secretURL, "apply", "-input=false", "-auto-approve")
	// 2. An apply that fails with ipam_exhausted, which is recorded in ipam_allocation_failures.
	w.setHCL(providerBlock, hcl+tiny)
	step("exhausted", false, secretURL, "apply", "-input=false", "-auto-approve", "-parallelism=1")
	w.setHCL(providerBlock, hcl)
	// 3. Unreachable (nothing listens on port 1), URL and keyword/value forms.
	step("unreachable-url", false, withPort(t, secretURL, "1"), "plan", "-input=false")
	step("unreachable-kv", false, strings.Replace(keyValue, "port="+pu.Port(), "port=1", 1), "plan", "-input=false")
	// 4. A connection string that cannot be parsed.
	step("malformed", false, strings.Replace(secretURL, ":"+pu.Port()+"/", ":notaport/", 1), "plan", "-input=false")
	// 4b. The same in keyword/value form, with the space after '=' that libpq allows.
	step("malformed-kv", false, strings.Replace(keyValue, "password=", "password= ", 1)+" sslmode=bogus", "plan", "-input=false")
	// 5. The right password, the wrong database.
	step("no-such-db", false, withDatabase(t, secretURL, "no_such_db"), "plan", "-input=false")
	// 6. The password from IPAM_DATABASE_URL instead of the provider block.
	w.setHCL("  auto_migrate = false", mixed("sec", 6))
	w.url = secretURL
	step("env", true, "", "apply", "-input=false", "-auto-approve")

	for _, text := range texts {
		if !strings.Contains(text, "Error:") && !strings.Contains(text, "Apply complete") {
			t.Errorf("unexpected terraform output:\n%s", text)
		}
	}
	joined := strings.Join(texts, "\n")
	for _, want := range []string{"ipam_exhausted", "ipam_unavailable", "database_url", "no_such_db"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no run's output mentions %q; the failure cases did not run as intended:\n%s", want, joined)
		}
	}
	// ipamctl with the password in a URL that fails.
	if out, code := runIpamctl(t, withPort(t, secretURL, "1"), "check"); code == 0 {
		t.Errorf("ipamctl check against port 1 succeeded:\n%s", out)
	} else {
		texts = append(texts, out)
	}

	leaks, scanned := 0, 0
	scan := func(what, text string) {
		scanned += len(text)
		for _, needle := range []string{sentinel, url.QueryEscape(password), url.PathEscape(password)} {
			if i := strings.Index(text, needle); i >= 0 {
				leaks++
				lo, hi := max(0, i-120), min(len(text), i+40)
				t.Errorf("the password shows in %s: ...%s...", what, strings.ReplaceAll(text[lo:hi], sentinel, "<SENTINEL>"))
				return
			}
		}
	}
	for i, text := range texts {
		scan(fmt.Sprintf("the output of run %d", i+1), text)
	}
	files, _ := filepath.Glob(filepath.Join(logs, "*.log"))
	files = append(files, filepath.Join(w.dir, "terraform.tfstate"), filepath.Join(w.dir, "terraform.tfstate.backup"))
	traceLines := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if strings.HasSuffix(f, ".log") {
			traceLines += bytes.Count(b, []byte("[TRACE]"))
		}
		scan(f, string(b))
	}
	if traceLines == 0 {
		t.Errorf("the TF_LOG=trace logs hold no trace lines; the scan proves nothing")
	}
	rows := 0
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, table := range []string{"ipam_events", "ipam_allocation_failures", "ipam_allocations", "ipam_clusters", "ipam_pools"} {
		r, err := c.Query(ctx, "SELECT t::text FROM "+table+" t")
		if err != nil {
			t.Fatal(err)
		}
		all, err := pgx.CollectRows(r, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		rows += len(all)
		scan(table, strings.Join(all, "\n"))
	}
	if n := countRows(t, dbURL, `SELECT count(*) FROM ipam_allocation_failures WHERE reason = 'ipam_exhausted'`); n == 0 {
		t.Errorf("the exhausted allocation was not recorded; the failure table scan proves less than it should")
	}
	t.Logf("secret scan: %d terraform runs (TF_LOG=trace, %d trace lines) and 1 ipamctl run; %d log, state and output bytes and %d database rows scanned; %d leaks",
		runs, traceLines, scanned, rows, leaks)
}

func withPort(t *testing.T, u, port string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = pu.Hostname() + ":" + port
	return pu.String()
}

// TLS: a server with a certificate from a CA this test makes
// (startTLSServer) and no plain TCP. The core and terraform work with
// sslmode=verify-full; a wrong CA, a certificate for another host name and a
// client without TLS are refused, each with an error that says why.
func TestTLSVerifyFull(t *testing.T) {
	srv, tlsAdmin := startTLSServer(t)
	u := createDatabase(t, tlsAdmin, "ipam")
	seed(t, u)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	var ssl bool
	var version string
	if err := c.QueryRow(ctx, `SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl, &version); err != nil || !ssl {
		t.Fatalf("the session is not encrypted: ssl=%v %v", ssl, err)
	}
	c.Close(ctx)

	w := newWorkdir(t, u, mixed("tls", 6))
	w.run("apply", "-input=false", "-auto-approve")
	if got := stateMatchesDB(t, u, w); got != 6 {
		t.Fatalf("%d resources applied over TLS, want 6", got)
	}

	where := "127.0.0.1:" + srv.port()
	refused := func(name, u, want string) {
		t.Helper()
		st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: u, ConnectTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		err = st.Ping(ctx)
		if err == nil {
			t.Fatalf("%s: the connection was accepted", name)
		}
		msg := err.Error()
		// Refused for good: said at once, without riding out the failover bound.
		if ipam.Code(err) != ipam.CodeRefused || !strings.Contains(msg, where) || !strings.Contains(msg, want) {
			t.Errorf("%s: error %q; want ipam_refused naming %s and saying %q", name, msg, where, want)
		}
		if strings.Contains(msg, srv.password()) {
			t.Errorf("%s: the error contains the password", name)
		}
		t.Logf("%s: %s", name, msg)
	}
	wrongCA := strings.Replace(u, "/tls/ca.crt", "/tls/wrong-ca.crt", 1)
	refused("wrong CA", wrongCA, "certificate signed by unknown authority")
	// terraform says the same.
	bad := newWorkdir(t, wrongCA, mixed("tls", 1))
	out, err := bad.try("plan", "-input=false")
	if err == nil || !bytes.Contains(out, []byte("certificate signed by unknown authority")) || !bytes.Contains(out, []byte(where)) {
		t.Errorf("terraform plan with the wrong CA: %v\n%s", err, out)
	}
	plain := strings.Split(u, "?")[0] + "?sslmode=disable"
	refused("no TLS", plain, "no encryption")

	// The server now presents a certificate from the right CA, for db.example.net only.
	conf := fmt.Sprintf("ssl = on\nssl_cert_file = '%s'\nssl_key_file = '%s'\n",
		filepath.Join(srv.dir, "tls", "wrongname.crt"), filepath.Join(srv.dir, "tls", "wrongname.key"))
	data := filepath.Join(srv.dir, "data")
	if err := os.WriteFile(filepath.Join(data, "pgsh_tls.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.pgCtl("reload")
	deadline := time.Now().Add(waitBound)
	for {
		st, _ := ipam.Open(ctx, ipam.Config{DatabaseURL: u, ConnectTimeout: time.Minute})
		err := st.Ping(ctx)
		st.Close()
		if err != nil && strings.Contains(err.Error(), "IP SANs") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not switch to the wrong-name certificate: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Go's verifier, for an IP address: "cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs".
	refused("wrong host name", u, "cannot validate certificate for 127.0.0.1")
}

// guideStatements reads the SQL of the database setup guide
// (templates/guides/database-setup.md): every statement of its sql blocks,
// in order, with comments removed.
func guideStatements(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "templates", "guides", "database-setup.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stmts []string
	var cur strings.Builder
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sql"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in:
			if i := strings.Index(line, "--"); i >= 0 {
				line = line[:i]
			}
			cur.WriteString(line + " ")
			for {
				s := cur.String()
				i := strings.IndexByte(s, ';')
				if i < 0 {
					break
				}
				if st := strings.Join(strings.Fields(s[:i]), " "); st != "" {
					stmts = append(stmts, st)
				}
				cur.Reset()
				cur.WriteString(s[i+1:])
			}
		}
	}
	return stmts
}

// Least privilege, with the roles and grants of the database setup guide,
// read from the guide itself: the owner role migrates the schema (a plan with
// auto_migrate = true); the runtime role, with only the guide's grants and
// auto_migrate = false, plans, applies, imports nothing it should not, reads
// with ipamctl and destroys, and never changes the schema (it may not); a
// role that may only read can still plan (addresses known after apply, with a
// warning that says why), and its apply fails with permission_denied,
// writing nothing; a role without even SELECT is told permission_denied,
// not read_only, on its reads too.
func TestLeastPrivilegeRoles(t *testing.T) {
	admin := testdb.AdminURL(t)
	sfx := suffix()
	owner, runtime, reader, db := "ipam_owner_"+sfx, "ipam_runtime_"+sfx, "ipam_reader_"+sfx, "ipam_lp_"+sfx
	pw := map[string]string{}
	for _, r := range []string{owner, runtime, reader} {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		pw[r] = hex.EncodeToString(b)
	}
	rename := strings.NewReplacer("ipam_owner", owner, "ipam_runtime", runtime,
		"'change-me-owner'", quoteLiteral(pw[owner]), "'change-me-runtime'", quoteLiteral(pw[runtime]))
	dbName := regexp.MustCompile(`\bDATABASE ipam\b`)
	var asAdmin, asAdminInDB, asOwner, skipped []string
	for _, s := range guideStatements(t) {
		s = dbName.ReplaceAllString(rename.Replace(s), "DATABASE "+db)
		up := strings.ToUpper(s)
		switch {
		case strings.HasPrefix(up, "CREATE ROLE"), strings.HasPrefix(up, "CREATE DATABASE"),
			strings.HasPrefix(up, "REVOKE ALL ON DATABASE"), strings.HasPrefix(up, "GRANT CONNECT ON DATABASE"):
			asAdmin = append(asAdmin, s)
		case strings.Contains(up, "ON SCHEMA PUBLIC"), strings.HasPrefix(up, "ALTER SCHEMA"):
			asAdminInDB = append(asAdminInDB, s)
		case strings.HasPrefix(up, "GRANT") && strings.Contains(s, "ipam_"):
			asOwner = append(asOwner, s)
		default:
			// ALTER DEFAULT PRIVILEGES: the guide's alternative to repeating the grants.
			skipped = append(skipped, s)
		}
	}
	if len(asAdmin) < 4 || len(asAdminInDB) < 1 || len(asOwner) < 3 {
		t.Fatalf("the guide's SQL changed shape; statements found: admin %q, in the database %q, owner %q", asAdmin, asAdminInDB, asOwner)
	}
	t.Cleanup(func() {
		sqlExec(t, admin, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		for _, r := range []string{reader, runtime, owner} {
			sqlExec(t, admin, "DROP ROLE IF EXISTS "+r)
		}
	})
	sqlExec(t, admin, append(asAdmin, "CREATE ROLE "+reader+" LOGIN PASSWORD "+quoteLiteral(pw[reader]),
		"GRANT CONNECT ON DATABASE "+db+" TO "+reader)...)
	adminDB := withDatabase(t, admin, db)
	sqlExec(t, adminDB, append(asAdminInDB, "GRANT USAGE ON SCHEMA public TO "+reader)...)
	ownerURL, runtimeURL, readerURL := withUser(t, adminDB, owner, pw[owner]), withUser(t, adminDB, runtime, pw[runtime]), withUser(t, adminDB, reader, pw[reader])

	cluster := "resource \"ipam_cluster\" \"c\" {\n  name = \"c1\"\n  prefix = \"2001:db8::/48\"\n  force_destroy = true\n}\n"
	// The runtime role, with auto_migrate on, may not create the schema:
	// the schema is named missing, and who may migrate it, not the
	// database read-only.
	early := newWorkdirWith(t, runtimeURL, "  auto_migrate = true", cluster)
	if out, err := early.try("plan", "-input=false"); err == nil || !bytes.Contains(out, []byte("schema_mismatch")) ||
		!bytes.Contains(out, []byte("may not migrate it")) || !bytes.Contains(out, []byte("ipamctl migrate up")) || bytes.Contains(out, []byte("read_only")) {
		t.Errorf("a plan as the runtime role with auto_migrate on, before the owner migrated: %v, want schema_mismatch saying who may migrate:\n%s", err, out)
	}

	// The owner migrates, as the guide says: one plan with auto_migrate = true.
	o := newWorkdirWith(t, ownerURL, "  auto_migrate = true", cluster)
	o.run("plan", "-input=false")
	if n := countRows(t, adminDB, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tableowner = $1`, owner); n < 7 {
		t.Fatalf("the owner's plan created %d tables, want the whole schema", n)
	}
	sqlExec(t, ownerURL, asOwner...)
	schema := func() string {
		var s string
		c, err := pgx.Connect(context.Background(), adminDB)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		if err := c.QueryRow(context.Background(), `SELECT string_agg(c.relname || ':' || c.relkind::text || ':' || pg_get_userbyid(c.relowner), ',' ORDER BY c.relname)
			|| ';' || (SELECT string_agg(version::text, ',') FROM ipam_schema_version)
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := schema()

	// The runtime role: everything a day-to-day run does.
	full := cluster + `resource "ipam_pool" "v4" {
  cluster_id = ipam_cluster.c.id
  name       = "v4"
  cidrs      = ["198.51.100.0/24"]
  force_destroy = true
}
resource "ipam_node_address" "n" {
  cluster_id = ipam_cluster.c.id
  node_id    = "node-a"
}
resource "ipam_instance_address" "i" {
  cluster_id  = ipam_cluster.c.id
  instance_id = "web-1"
  org_id      = "acme"
  env_id      = "prod"
}
resource "ipam_env_ipv4" "e" {
  pool_id = ipam_pool.v4.id
  org_id  = "acme"
  env_id  = "prod"
}
data "ipam_cluster" "c" {
  name = ipam_cluster.c.name
}
`
	r := newWorkdirWith(t, runtimeURL, "  auto_migrate = false", full)
	r.run("apply", "-input=false", "-auto-approve")
	if out := r.run("plan", "-input=false", "-detailed-exitcode"); !bytes.Contains(out, []byte("No changes")) {
		t.Errorf("second plan as the runtime role is not empty:\n%s", out)
	}
	for _, args := range [][]string{{"check"}, {"usage"}, {"list"}, {"lookup", "2001:db8::1"}, {"events", "--since", "1h"}} {
		if out, code := runIpamctl(t, runtimeURL, args...); code != 0 {
			t.Errorf("ipamctl %s as the runtime role exited %d:\n%s", strings.Join(args, " "), code, out)
		}
	}

	// The read-only role plans a new address: known after apply, and it says why.
	counts := func() string {
		return fmt.Sprintf("allocations %d, events %d, failures %d",
			countRows(t, adminDB, `SELECT count(*) FROM ipam_allocations`), countRows(t, adminDB, `SELECT count(*) FROM ipam_events`),
			countRows(t, adminDB, `SELECT count(*) FROM ipam_allocation_failures`))
	}
	// Without even SELECT, a read is refused for the grant, not as a write.
	if out, code := runIpamctl(t, readerURL, "usage"); code == 0 || !strings.Contains(out, "permission_denied") || strings.Contains(out, "read_only") {
		t.Errorf("ipamctl usage as a role without SELECT exited %d, want permission_denied:\n%s", code, out)
	}
	sqlExec(t, ownerURL, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO "+reader)
	more := full + "resource \"ipam_node_address\" \"n2\" {\n  cluster_id = ipam_cluster.c.id\n  node_id    = \"node-b\"\n}\n"
	r.setHCL("  auto_migrate = false", more)
	r.url = readerURL
	rowsBefore := counts()
	out := string(r.run("plan", "-input=false"))
	if !strings.Contains(out, "Addresses Known After Apply") || !strings.Contains(out, "permission_denied") ||
		!regexp.MustCompile(`(?s)ipam_node_address\.n2 will be created.*address\s+= \(known after apply\)`).MatchString(out) {
		t.Errorf("the read-only role's plan does not show the new address as known after apply with a permission_denied warning:\n%s", out)
	}
	applyOut, err := r.try("apply", "-input=false", "-auto-approve")
	if err == nil || !bytes.Contains(applyOut, []byte("permission_denied")) || !bytes.Contains(applyOut, []byte("Role Lacks a Grant")) {
		t.Errorf("apply as the read-only role: %v, want a permission_denied error:\n%s", err, applyOut)
	}
	if after := counts(); after != rowsBefore {
		t.Errorf("the read-only role changed rows: before %s, after %s", rowsBefore, after)
	}

	// Back to the runtime role: destroy everything.
	r.setHCL("  auto_migrate = false", full)
	r.url = runtimeURL
	r.run("destroy", "-input=false", "-auto-approve")
	if after := schema(); after != before {
		t.Errorf("the schema changed while the runtime role ran:\nbefore %s\nafter  %s", before, after)
	}
	// It could not have changed it: no DDL right, and DDL is refused.
	if n := countRows(t, adminDB, `SELECT count(*) FROM (SELECT 1 WHERE has_schema_privilege($1, 'public', 'CREATE')
		UNION ALL SELECT 1 FROM pg_class WHERE relowner = (SELECT oid FROM pg_roles WHERE rolname = $1)) x`, runtime); n != 0 {
		t.Errorf("the runtime role may create objects in public or owns some")
	}
	c, err := pgx.Connect(context.Background(), runtimeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(context.Background(), `CREATE TABLE ipam_probe (x int)`); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("DDL as the runtime role: %v, want permission denied", err)
	}
	// The runtime role with auto_migrate left on (the default) is told what to do.
	d := newWorkdirWith(t, runtimeURL, "", cluster)
	migOut, err := d.try("plan", "-input=false")
	if err == nil {
		t.Logf("a plan as the runtime role with auto_migrate = true works (the schema is current)")
	} else if !bytes.Contains(migOut, []byte("database setup guide")) && !bytes.Contains(migOut, []byte("auto_migrate")) {
		t.Errorf("the runtime role with auto_migrate = true fails without saying what to do:\n%s", migOut)
	}
	t.Logf("least privilege: guide statements run: %d as superuser, %d in the database, %d as the owner (skipped: %q); "+
		"runtime role: apply, plan, ipamctl check/usage/list/lookup/events and destroy with an unchanged schema; read-only role: plan with a warning, apply refused, rows unchanged (%s)",
		len(asAdmin), len(asAdminInDB), len(asOwner), skipped, rowsBefore)
}
