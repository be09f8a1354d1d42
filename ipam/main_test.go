package ipam_test

import (
	"fmt"
	"os"
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

// exampleURL is a database of its own for the examples (they take no
// testing.T to make one).
var exampleURL string

func TestMain(m *testing.M) {
	admin := os.Getenv(testdb.EnvURL)
	if admin == "" {
		if os.Getenv("CI") != "" {
			fmt.Fprintf(os.Stderr, "%s is not set: run the tests with `make test`, which starts PostgreSQL\n", testdb.EnvURL)
			os.Exit(1)
		}
		fmt.Printf("skipping package ipam: %s is not set (run `make test`, which starts a throwaway PostgreSQL)\n", testdb.EnvURL)
		os.Exit(0)
	}
	u, _, drop, err := testdb.Create(admin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exampleURL = u
	code := m.Run()
	if code == 0 {
		drop()
	}
	os.Exit(code)
}
