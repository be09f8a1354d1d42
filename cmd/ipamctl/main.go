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
	ctx, stop := signalContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// interrupted is the cause of ipamctl's context when a signal ended it, so
// that the error printed says the command was interrupted, and by what,
// rather than blame a bound that did not expire.
type interrupted struct{ sig os.Signal }

func (e interrupted) Error() string { return "interrupted by " + signalName(e.sig) }

// signalName names a signal as an operator sends it: SIGTERM, SIGINT.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		switch s {
		case syscall.SIGINT:
			return "SIGINT"
		case syscall.SIGTERM:
			return "SIGTERM"
		case syscall.SIGHUP:
			return "SIGHUP"
		case syscall.SIGQUIT:
			return "SIGQUIT"
		}
	}
	return "signal " + sig.String()
}

// signalContext is signal.NotifyContext whose context, once one of sigs
// arrives, is canceled with the cause interrupted{sig}.
func signalContext(parent context.Context, sigs ...os.Signal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case sig := <-ch:
			cancel(interrupted{sig})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}
