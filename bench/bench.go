// Package bench is the performance suite of the IPAM: allocation
// throughput next to pgbench, latency as pools grow, reuse from a deep cooled
// queue, Terraform overhead next to terraform_data, usage reads, and the
// EXPLAIN of every hot statement of the allocator.
//
// Every comparison is a ratio of two figures measured side by side in one
// run, on one server: absolute times on shared 2-core machines are noisy, the
// ratios much less so. cmd/ipambench runs the suite (`make bench`, `make
// bench-smoke`); smoke_test.go runs the quick mode under `go test`.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Section names, in the order they run.
const (
	SecThroughput = "throughput"
	SecGrowth     = "growth"
	SecReuse      = "reuse"
	SecReads      = "reads"
	SecTerraform  = "terraform"
	SecBulk       = "bulk"
)

// AllSections lists every section in run order.
var AllSections = []string{SecThroughput, SecGrowth, SecReuse, SecReads, SecTerraform, SecBulk}

// Config says where and how big to run.
type Config struct {
	// AdminURL is a superuser URL of the server (any database); the suite
	// creates and drops its own databases there.
	AdminURL string
	// Smoke selects the quick sizes (CI).
	Smoke bool
	// Sections to run; empty runs all.
	Sections []string
	// Log receives progress lines (and the printed plans); nil discards.
	Log io.Writer
	// Keep leaves the suite's databases on the server.
	Keep bool
	// AllowNonDurable lets the full suite run on a server with fsync or
	// synchronous_commit off (figures then mean little).
	AllowNonDurable bool
	// TerraformPath and PgbenchPath override the binaries' lookup.
	TerraformPath string
	PgbenchPath   string
	// RepoRoot is the module's directory (source of the SQL, provider build);
	// found from this file's location or the working directory when empty.
	RepoRoot string
	// Sizes overrides the sizes of the mode when non-nil.
	Sizes *Sizes
}

// Sizes are the knobs of one mode.
type Sizes struct {
	Clients        []int
	CellDuration   time.Duration // one allocator measurement
	PgbenchSeconds int           // pgbench -T
	Rounds         int           // rounds of [pgbench, every allocator cell]; a last pgbench run closes them
	IPv4Block      int           // prefix length of the IPv4 pool of a throughput cell
	GrowthLevels   []int
	GrowthSamples  int
	ReuseCooled    int
	ReuseSamples   int
	ReadSamples    int
	TFResources    int
	TFRounds       int
	// TFLargeResources is the size of the terraform section's one large
	// round (provider memory, refresh scaling); 0 skips it.
	TFLargeResources int
	BulkKeys         int
	RoundTripOps     int
}

// FullSizes are the sizes of `make bench` (the issue's).
func FullSizes() Sizes {
	return Sizes{
		Clients: []int{1, 4, 16}, CellDuration: 4 * time.Second, PgbenchSeconds: 4, Rounds: 3, IPv4Block: 16,
		GrowthLevels: []int{0, 100_000, 1_000_000}, GrowthSamples: 2000,
		ReuseCooled: 1_000_000, ReuseSamples: 2000, ReadSamples: 30,
		TFResources: 500, TFRounds: 3, TFLargeResources: 5000, BulkKeys: 1000, RoundTripOps: 200,
	}
}

// SmokeSizes are the sizes of `make bench-smoke`: every code path, in seconds.
func SmokeSizes() Sizes {
	return Sizes{
		Clients: []int{1, 4, 16}, CellDuration: 400 * time.Millisecond, PgbenchSeconds: 1, Rounds: 1, IPv4Block: 20,
		GrowthLevels: []int{0, 1_000, 10_000}, GrowthSamples: 60,
		ReuseCooled: 10_000, ReuseSamples: 60, ReadSamples: 5,
		TFResources: 5, TFRounds: 1, TFLargeResources: 20, BulkKeys: 10, RoundTripOps: 20,
	}
}

// Row is one line of the result table.
type Row struct {
	Section   string
	Name      string
	Value     string
	Reference string
	Ratio     string
	Target    string
	Status    string // "met", "MISSED", "info", "n/a", "skipped", "FAIL"
}

// Note is a titled block of diagnostics (a small table or text).
type Note struct {
	Title string
	Lines []string
}

// Report is everything one run measured.
type Report struct {
	Mode     string
	Started  time.Time
	Finished time.Time
	Machine  Machine
	Sizes    Sizes
	Rows     []Row
	Notes    []Note
	Plans    []PlanResult
	Commands []string
	// Failures are hard failures (a plan with a sequential scan or a sort,
	// a broken measurement): the run exits non-zero.
	Failures []string
	// Warnings do not fail the run.
	Warnings []string
}

func (r *Report) add(row Row)                   { r.Rows = append(r.Rows, row) }
func (r *Report) note(title string, l []string) { r.Notes = append(r.Notes, Note{title, l}) }
func (r *Report) fail(format string, a ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, a...))
}
func (r *Report) warn(format string, a ...any) {
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, a...))
}

// runner carries the state of one run.
type runner struct {
	cfg    Config
	sz     Sizes
	rep    *Report
	log    io.Writer
	srv    *server
	tag    string   // unique suffix of database names
	dbs    []string // databases to drop at the end
	growth *growthDBs
	reuse  *loadedPool
	tf     *tfEnv
	tfErr  error
	// profile, when set, receives a CPU profile of the next timed phase.
	profile *os.File
	// writeSetErr: the WAL could not be read back for a write set (said once).
	writeSetErr error
}

func (r *runner) logf(format string, a ...any) {
	fmt.Fprintf(r.log, "ipambench: "+format+"\n", a...)
}

// Run runs the suite and returns its report. An error means the suite could
// not run at all; failed checks are in Report.Failures.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.AdminURL == "" {
		return nil, fmt.Errorf("no database: set IPAM_TEST_DATABASE_URL (or run through scripts/bench.sh)")
	}
	sz := FullSizes()
	mode := "full"
	if cfg.Smoke {
		sz, mode = SmokeSizes(), "smoke"
	}
	if cfg.Sizes != nil {
		sz = *cfg.Sizes
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.RepoRoot == "" {
		cfg.RepoRoot = findRepoRoot()
	}
	for _, s := range cfg.Sections {
		if !slices.Contains(AllSections, s) {
			return nil, fmt.Errorf("unknown section %q (have %s)", s, strings.Join(AllSections, ", "))
		}
	}
	rep := &Report{Mode: mode, Started: time.Now(), Sizes: sz}
	r := &runner{cfg: cfg, sz: sz, rep: rep, log: cfg.Log, tag: fmt.Sprintf("%d_%d", os.Getpid(), time.Now().Unix()%100000)}
	srv, err := connectServer(ctx, cfg.AdminURL)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	r.srv = srv
	rep.Machine = r.machine(ctx)
	if !cfg.Smoke && !cfg.AllowNonDurable && !rep.Machine.Durable {
		return nil, fmt.Errorf("the server runs with fsync=%s, synchronous_commit=%s: figures would not be durable commits; "+
			"start it with scripts/pg.sh start DIR --bench (IPAM_PG_BENCH=1 scripts/with-postgres.sh), or pass -allow-nondurable",
			rep.Machine.Settings["fsync"], rep.Machine.Settings["synchronous_commit"])
	}
	defer r.dropDatabases()
	defer func() {
		if r.tf != nil {
			r.tf.close()
		}
	}()
	r.logf("%s mode on %s, %d CPUs; sections: %s", mode, rep.Machine.PGVersionShort, rep.Machine.NProc, strings.Join(r.sections(), ", "))
	steps := map[string]func(context.Context) error{
		SecThroughput: r.throughput,
		SecGrowth:     r.growthSection,
		SecReuse:      r.reuseSection,
		SecReads:      r.readsSection,
		SecTerraform:  r.terraformSection,
		SecBulk:       r.bulkSection,
	}
	for _, s := range r.sections() {
		start := time.Now()
		r.logf("== %s", s)
		if err := steps[s](ctx); err != nil {
			rep.fail("%s: %v", s, err)
			r.logf("%s failed: %v", s, err)
			if ctx.Err() != nil {
				break
			}
		}
		r.logf("== %s done in %s", s, time.Since(start).Round(100*time.Millisecond))
		// The plans are checked on the largest preloaded databases, once
		// growth and reuse have built them.
		if s == SecReuse || (s == SecGrowth && !slices.Contains(r.sections(), SecReuse)) {
			r.logf("== EXPLAIN of the hot statements")
			if err := r.explainSection(ctx); err != nil {
				rep.fail("explain: %v", err)
				r.logf("explain failed: %v", err)
			}
		}
	}
	rep.Machine.LoadEnd = loadAvg()
	rep.Finished = time.Now()
	return rep, nil
}

func (r *runner) sections() []string {
	if len(r.cfg.Sections) == 0 {
		return AllSections
	}
	var out []string
	for _, s := range AllSections {
		if slices.Contains(r.cfg.Sections, s) {
			out = append(out, s)
		}
	}
	return out
}

// findRepoRoot finds the module directory: from this source file (a build in
// place), else upwards from the working directory.
func findRepoRoot() string {
	isRoot := func(d string) bool {
		_, err := os.Stat(filepath.Join(d, "ipam", "api.go"))
		return err == nil
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		if d := filepath.Dir(filepath.Dir(file)); isRoot(d) {
			return d
		}
	}
	d, _ := os.Getwd()
	for d != "" && d != "/" {
		if isRoot(d) {
			return d
		}
		d = filepath.Dir(d)
	}
	return ""
}
