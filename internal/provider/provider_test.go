package provider

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/jackc/pgx/v5"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
)

// testAccProtoV6ProviderFactories serve the provider in-process to the real
// terraform binary.
var testAccProtoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"ipam": NewServer("test"),
}

// TestMain refuses to let CI pass by skipping acceptance tests, and pins the
// terraform binary so that terraform-plugin-testing never tries to download one.
func TestMain(m *testing.M) {
	if os.Getenv("TF_ACC") == "" {
		if os.Getenv("CI") != "" {
			fmt.Fprintln(os.Stderr, "TF_ACC is not set in CI: acceptance tests must run (use `make test`)")
			os.Exit(1)
		}
	} else if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		p, err := exec.LookPath("terraform")
		if err != nil {
			fmt.Fprintln(os.Stderr, "no terraform binary on PATH and TF_ACC_TERRAFORM_PATH unset: run `make test`, which provides one")
			os.Exit(1)
		}
		os.Setenv("TF_ACC_TERRAFORM_PATH", p)
	}
	os.Setenv("CHECKPOINT_DISABLE", "1")
	os.Exit(m.Run())
}

// accDB is one test's database: its URL for the provider block and a plain
// connection for checks that look at the rows themselves.
type accDB struct {
	t   *testing.T
	URL string
}

func newAccDB(t *testing.T) *accDB {
	t.Helper()
	return &accDB{t: t, URL: testdb.New(t)}
}

// config prefixes HCL with a provider block pointing at this database.
func (d *accDB) config(hcl string) string { return d.configWith("", hcl) }

// configWith adds provider options to the provider block.
func (d *accDB) configWith(options, hcl string) string {
	return fmt.Sprintf("provider \"ipam\" {\n  database_url = %q\n%s\n}\n\n%s", d.URL, options, hcl)
}

func (d *accDB) exec(sql string, args ...any) {
	d.t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, d.URL)
	if err != nil {
		d.t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		d.t.Fatal(err)
	}
}

func (d *accDB) count(sql string, args ...any) int {
	d.t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, d.URL)
	if err != nil {
		d.t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		d.t.Fatal(err)
	}
	return n
}

// expectRows is a check that the database holds n rows for a query.
func (d *accDB) expectRows(n int, sql string, args ...any) func() error {
	return func() error {
		if got := d.count(sql, args...); got != n {
			return fmt.Errorf("%s: %d rows, want %d", sql, got, n)
		}
		return nil
	}
}

// nothingWritten checks that bad input left no row behind.
func (d *accDB) nothingWritten() error {
	for _, table := range []string{"ipam_clusters", "ipam_allocations", "ipam_events"} {
		if n := d.count("SELECT count(*) FROM " + table); n != 0 {
			return fmt.Errorf("%s has %d rows after bad input", table, n)
		}
	}
	return nil
}
