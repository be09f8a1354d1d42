package engine_test

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
)

// hangBound is how long a test waits for something that normally takes
// milliseconds (a session to start waiting for a lock, callers to gather)
// before it calls it a hang. A bound on hangs, generous for a busy machine
// (make test runs every package at once on few cores), never a performance
// target: speed is make bench's business.
const hangBound = 5 * time.Minute

// minParallel is how many parallel tests run at once unless -parallel says
// otherwise (go test's default is GOMAXPROCS). The package's tests spend
// most of their time waiting: for the PostgreSQL server, a process of its
// own, and in the lock-bound and first-contact tests for a bound to pass.
// With two at a time on a 2-core machine those waits left the cores idle:
// go test -short ./ipam took 41 s with 2 and 26 to 29 s with 4 (load 8).
const minParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(max(minParallel, runtime.GOMAXPROCS(0)))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	testdb.Main(m, "ipam/internal/engine", nil)
}
