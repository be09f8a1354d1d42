package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs the suite at smoke sizes, so that `go test ./...` (make
// test) keeps the harness from rotting: every section must run without a
// broken measurement. Targets are not asserted: small sizes on a shared test
// server say nothing about them (make bench does). The terraform sections run
// only with TF_ACC set, as the other terraform tests do.
func TestSmoke(t *testing.T) {
	url := os.Getenv("IPAM_TEST_DATABASE_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("IPAM_TEST_DATABASE_URL is not set: run the tests with `make test`, which starts PostgreSQL")
		}
		t.Skip("IPAM_TEST_DATABASE_URL is not set: run `make test` (or `make bench-smoke`)")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	sz := SmokeSizes()
	// Lighter still than make bench-smoke: the test server is shared with
	// every other package's tests.
	sz.Clients = []int{1, 16}
	sz.CellDuration = 250 * time.Millisecond
	sz.GrowthSamples, sz.ReuseSamples, sz.RoundTripOps = 30, 30, 10
	cfg := Config{AdminURL: url, Smoke: true, Sizes: &sz, Log: testWriter{t}}
	if os.Getenv("TF_ACC") == "" {
		cfg.Sections = []string{SecThroughput, SecGrowth, SecReuse, SecReads}
	}
	ctx, cancel := context.WithDeadline(context.Background(), hangDeadline(t))
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", rep.Table())
	for _, w := range rep.Warnings {
		t.Log("warning:", w)
	}
	for _, f := range rep.Failures {
		t.Error(f)
	}
	if len(rep.Rows) == 0 {
		t.Fatal("no results")
	}
	md := rep.Markdown("")
	for _, want := range []string{"## Results", "## Machine", AnalysisBegin, AnalysisEnd} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if ExtractAnalysis(strings.Replace(md, "_No analysis written yet._", "kept", 1)) == "" {
		t.Error("the analysis block is not found again")
	}
}

// hangDeadline is when the smoke run is taken to hang: a minute before go
// test's own -timeout (so that the run still drops its databases and says
// which step it was in), or 30 minutes from now without one. It is a bound on
// hangs, never a performance target: on a busy machine (make test runs every
// package at once) a terraform apply of the smoke sizes takes minutes. Speed
// is make bench's business, not a test's.
func hangDeadline(t *testing.T) time.Time {
	d := time.Now().Add(30 * time.Minute)
	if td, ok := t.Deadline(); ok && td.Add(-time.Minute).Before(d) {
		d = td.Add(-time.Minute)
	}
	return d
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
