// Command ipamctl is the operator CLI of the IPAM: schema migrations, listing
// and reverse lookup, usage, the event trail, leak detection and safe reclaim,
// invariant checks and a Prometheus exporter. It runs the same core as the
// Terraform provider, against the same database.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// version and commit are set by the build: -ldflags "-X main.version=...
// -X main.commit=..." (make build, make release).
var (
	version = "dev"
	commit  = ""
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
