// Command ipambench runs the IPAM performance suite against a
// PostgreSQL server and prints one table; with -out it writes BENCHMARKS.md.
//
//	make bench         # full suite on a throwaway durable server (scripts/bench.sh)
//	make bench-smoke   # the same at small sizes, quick (CI)
//
// It exits 1 when a check fails (a hot statement's plan has a sequential scan
// or a sort, or a measurement broke), and with -strict also when a target is
// missed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/bench"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		smoke       = flag.Bool("smoke", false, "small sizes: every code path in well under a minute (CI)")
		out         = flag.String("out", "", "write the report as Markdown to this file (e.g. BENCHMARKS.md); its analysis section is kept")
		dbURL       = flag.String("database-url", "", "superuser URL of the server (default: $IPAM_BENCH_DATABASE_URL, then $IPAM_TEST_DATABASE_URL)")
		sections    = flag.String("sections", "", "comma-separated sections to run (default all): "+strings.Join(bench.AllSections, ","))
		keep        = flag.Bool("keep", false, "keep the suite's databases")
		nondurable  = flag.Bool("allow-nondurable", false, "run the full suite even on a server with fsync or synchronous_commit off")
		strict      = flag.Bool("strict", false, "exit 1 when a target is missed, too")
		terraform   = flag.String("terraform", "", "terraform binary (default: $TF_ACC_TERRAFORM_PATH, then PATH)")
		pgbench     = flag.String("pgbench", "", "pgbench binary (default: PATH, then /usr/lib/postgresql/*/bin)")
		timeout     = flag.Duration("timeout", 2*time.Hour, "give up after this long")
		quiet       = flag.Bool("quiet", false, "do not print progress and plans, only the table")
		clientsFlag = flag.String("clients", "", "override the client counts, e.g. 1,4,16")
	)
	flag.Parse()
	url := *dbURL
	for _, env := range []string{"IPAM_BENCH_DATABASE_URL", "IPAM_TEST_DATABASE_URL"} {
		if url == "" {
			url = os.Getenv(env)
		}
	}
	cfg := bench.Config{AdminURL: url, Smoke: *smoke, Keep: *keep, AllowNonDurable: *nondurable,
		TerraformPath: *terraform, PgbenchPath: *pgbench, Log: os.Stderr}
	if *quiet {
		cfg.Log = nil
	}
	if *sections != "" {
		cfg.Sections = strings.Split(*sections, ",")
	}
	if *clientsFlag != "" {
		sz := bench.FullSizes()
		if *smoke {
			sz = bench.SmokeSizes()
		}
		sz.Clients = nil
		for _, c := range strings.Split(*clientsFlag, ",") {
			var n int
			if _, err := fmt.Sscan(c, &n); err != nil || n < 1 {
				fmt.Fprintf(os.Stderr, "ipambench: bad -clients %q\n", *clientsFlag)
				return 2
			}
			sz.Clients = append(sz.Clients, n)
		}
		cfg.Sizes = &sz
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancel2 := context.WithTimeout(ctx, *timeout)
	defer cancel2()

	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ipambench:", err)
		return 1
	}
	fmt.Println()
	fmt.Print(rep.Table())
	for _, w := range rep.Warnings {
		fmt.Println("warning:", w)
	}
	for _, f := range rep.Failures {
		fmt.Println("FAIL:", f)
	}
	if *out != "" {
		prev, err := os.ReadFile(*out)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintln(os.Stderr, "ipambench:", err)
			return 1
		}
		if err := os.WriteFile(*out, []byte(rep.Markdown(bench.ExtractAnalysis(string(prev)))), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "ipambench:", err)
			return 1
		}
		fmt.Println("wrote", *out)
	}
	switch {
	case len(rep.Failures) > 0:
		return 1
	case *strict && len(rep.Missed()) > 0:
		return 1
	}
	return 0
}
