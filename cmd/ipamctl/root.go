package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/internal/advice"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// EnvDatabaseURL is read when --database-url is not given (the provider reads it too).
const EnvDatabaseURL = "IPAM_DATABASE_URL"

// Exit codes.
const (
	exitOK         = 0
	exitError      = 1 // the command failed: bad input, database unreachable, ...
	exitUsage      = 2 // unknown command or flag
	exitViolations = 3 // check found broken invariants
	exitPending    = 4 // migrate status: migrations to apply
	exitRefused    = 5 // reclaim --apply: the checks refused some of the report's allocations
)

// exitError carries a specific exit code through cobra.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// app holds what every command shares: the streams, the global flags and
// the store, opened on first use.
type app struct {
	in          io.Reader
	out, errOut io.Writer

	databaseURL    string
	actor          string
	connectTimeout time.Duration
	lockTimeout    time.Duration
	// statementTimeout bounds each statement.
	statementTimeout time.Duration
	// failoverTimeout bounds how long a call rides out a failover;
	// failoverSet: given on the command line (else the core's default,
	// with its first contact cut: ipam.FirstContactTimeout).
	failoverTimeout time.Duration
	failoverSet     bool
	// quiet keeps the progress of a wait for the database off stderr.
	quiet bool

	store *ipam.Client
}

// run executes ipamctl with args and returns the exit code.
func run(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) int {
	a := &app{in: in, out: out, errOut: errOut}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	cmd, err := root.ExecuteContextC(ctx)
	if a.store != nil {
		a.store.Close()
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(errOut, "ipamctl: %v\n", err)
	var sig interrupted
	if errors.As(context.Cause(ctx), &sig) {
		// A signal ended the command: whatever the error says it waited
		// for, no bound expired, and the advice for one (a larger
		// failover_timeout, lock_timeout) would mislead.
		fmt.Fprintf(errOut, "ipamctl: %s: the command stopped before it finished, not because a timeout expired; "+
			"ipamctl events shows any change it made before.\n", sig)
	} else if ex := advice.For(err); ex.Code != "" && ex.Code != ipam.CodeInvalid {
		fmt.Fprintf(errOut, "ipamctl: %s. %s\n", ex.Title, ex.Advice)
	}
	var ce *codedError
	var ue *usageError
	switch {
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &ue), isUsageError(err):
		path := "ipamctl"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(errOut, "Run '%s --help' for usage.\n", path)
		return exitUsage
	}
	return exitError
}

// usageError is a command line that cannot run as written: a flag's value
// out of range or malformed, a required flag or argument missing. It exits
// with exitUsage, as cobra's own complaints do, so that a script tells a
// typo from a failure (a database away, a refusal).
type usageError struct{ error }

func (e *usageError) Unwrap() error { return e.error }

// badUsage is a usageError with the message given.
func badUsage(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }

// isUsageError recognizes cobra's and pflag's complaints about the command line.
func isUsageError(err error) bool {
	msg := err.Error()
	for _, s := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "accepts ", "requires at least", "requires exactly", "if any flags in the group"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "ipamctl",
		Short: "Operate the IPAM: migrations, usage, lookups, events, leaks, reclaim, release, checks, metrics and block scaling",
		Long: `ipamctl is the operator CLI of the IPAM behind the Terraform provider. It runs the same core
against the same PostgreSQL database, for what Terraform is not made for.

The database comes from --database-url, else the IPAM_DATABASE_URL environment variable,
else the standard PG* variables (PGHOST, PGUSER, ...). Passwords are never printed.

Exit codes: 0 success, 1 failure (the database unreachable or refusing, a conflict, nothing found), 2 bad command line
(an unknown command or flag, a flag's value out of range or malformed, a required flag missing), 3 broken invariants (check), 4 migrations pending (migrate status), 5 some allocations refused
(reclaim --apply: the others, if any, were reclaimed).`,
		Example: `  export IPAM_DATABASE_URL='postgres://ipam@db.example:5432/ipam'
  ipamctl migrate up
  ipamctl usage --cluster prod-eu1
  ipamctl lookup 2001:db8:0:1::2a`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: a.checkGlobalFlags,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&a.databaseURL, "database-url", "", "PostgreSQL connection string (default: $"+EnvDatabaseURL+", then the PG* variables)")
	pf.StringVar(&a.actor, "actor", "ipamctl", "actor recorded with every change and event")
	pf.DurationVar(&a.connectTimeout, "connect-timeout", 10*time.Second, "how long one connection attempt may take")
	pf.DurationVar(&a.lockTimeout, "lock-timeout", ipam.DefaultLockTimeout, "how long one operation may wait for a lock another session holds (0: no bound); past it: ipam_busy")
	pf.DurationVar(&a.statementTimeout, "statement-timeout", ipam.DefaultStatementTimeout, "how long one statement may run (0: no bound); past it: ipam_timeout")
	pf.DurationVar(&a.failoverTimeout, "failover-timeout", ipam.DefaultFailoverTimeout, "how long one operation rides out a database with no usable server (a switchover or failover), retrying (0: fail at once); past it: ipam_unavailable. Unset, a first contact that finds nothing listening (a wrong host or port) gives up after "+ipam.FormatDuration(ipam.FirstContactTimeout))
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "do not report on stderr, every 5 s, a wait for the database")
	root.AddCommand(a.migrateCmd(), a.listCmd(), a.usageCmd(), a.lookupCmd(), a.eventsCmd(), a.leaksCmd(),
		a.reclaimCmd(), a.releaseCmd(), a.expireHoldCmd(), a.checkCmd(), a.metricsCmd(), a.scaleCmd(), a.versionCmd())
	return root
}

// open connects to the database. With checkSchema, the schema must be the
// one this binary was built for (a clear schema_mismatch otherwise); it also
// tells at once when the database cannot be reached.
func (a *app) open(ctx context.Context, checkSchema bool) (*ipam.Client, error) {
	if a.store != nil {
		return a.store, nil
	}
	url := a.databaseURL
	if url == "" {
		url = os.Getenv(EnvDatabaseURL)
	}
	if url == "" && !a.quiet && !pgEnvSet() {
		fmt.Fprintf(a.errOut, "ipamctl: no database given (--database-url, %s or the PG* variables): trying PostgreSQL's default, "+
			"the local socket\n", EnvDatabaseURL)
	}
	failover := time.Duration(0) // the core's default
	if a.failoverSet {
		failover = noBoundIfZero(a.failoverTimeout)
	}
	st, err := ipam.Open(ctx, ipam.Config{DatabaseURL: url, Actor: a.actor, ConnectTimeout: a.connectTimeout,
		LockTimeout: noBoundIfZero(a.lockTimeout), StatementTimeout: noBoundIfZero(a.statementTimeout),
		FailoverTimeout: failover, OnWait: a.reportWait})
	var inv *ipam.InvalidError
	switch {
	case errors.As(err, &inv) && inv.Field == "database_url" && a.databaseURL != "":
		// The flag's value: a usage error, named as the flag.
		return nil, badUsage("--database-url: %s", inv.Msg)
	case errors.As(err, &inv) && inv.Field == "database_url" && url != "":
		return nil, &ipam.InvalidError{Field: EnvDatabaseURL, Msg: inv.Msg, Err: inv.Err}
	case errors.As(err, &inv) && inv.Field == "database_url":
		// Neither the flag nor IPAM_DATABASE_URL: the PG* variables made
		// the connection string.
		return nil, &ipam.InvalidError{Field: "the PG* variables (" + strings.Join(pgEnvNames(), ", ") + ")", Msg: inv.Msg, Err: inv.Err}
	case err != nil:
		return nil, err
	}
	a.store = st
	if checkSchema {
		if err := st.CheckSchema(ctx); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// reportWait says on stderr what a call waits for, unless --quiet: no wait
// for the database is silent.
func (a *app) reportWait(_ context.Context, w ipam.Wait) {
	if !a.quiet {
		fmt.Fprintf(a.errOut, "ipamctl: %s\n", w)
	}
}

func (a *app) table() *tabwriter.Writer {
	return tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
}

func (a *app) writeJSON(v any) error {
	enc := json.NewEncoder(a.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine prints one JSON object on one line: the form of a command
// that prints a stream of results (events --json, scale --json), which a
// reader takes line by line (JSON Lines).
func (a *app) writeJSONLine(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.out, "%s\n", b)
	return err
}

// ts formats a time for tables: RFC 3339 in UTC, "-" when unset.
func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func tsp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return ts(*t)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// openInput opens a file argument; "-" is standard input.
func (a *app) openInput(name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(a.in), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// parseSince reads --since: a duration back from now ("24h", "7d") or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := ipam.ParseDuration(s)
	if err != nil {
		return time.Time{}, badUsage("--since %q is neither a duration (24h, 7d) nor an RFC 3339 time (2026-01-02T15:04:05Z)", s)
	}
	return now.Add(-d), nil
}

// noBoundIfZero maps a flag's 0 ("no bound") to the core's negative.
func noBoundIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// clusterExists is nil for a cluster that exists (or none named), and
// not_found naming it for one that does not: what a command whose filter
// names it finds nothing for, so that a typo is not an empty answer.
func clusterExists(ctx context.Context, st *ipam.Client, clusterID string) error {
	if clusterID == "" {
		return nil
	}
	_, err := st.GetCluster(ctx, clusterID) // not_found names the cluster
	return err
}

// pgEnvSet reports whether a libpq variable names where the database is.
// pgEnvNames are the names of the PG* variables set (never their values).
func pgEnvNames() []string {
	var names []string
	for _, kv := range os.Environ() {
		if name, value, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "PG") && value != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func pgEnvSet() bool {
	for _, v := range []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGSERVICE", "PGSERVICEFILE"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}
