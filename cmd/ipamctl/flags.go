package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// Every flag is judged before anything is looked up, by the core's own rules
// (the same the Go API and the provider apply), and a refusal names the flag.

// checkIDFlags checks identifier flags given as flag name, value pairs; an
// empty value is a flag left unset.
func checkIDFlags(flagValues ...string) error {
	for i := 0; i+1 < len(flagValues); i += 2 {
		name, v := flagValues[i], flagValues[i+1]
		if v == "" {
			continue
		}
		if err := ipam.ValidateID(name, v); err != nil {
			return badUsage("--%s: %w", name, err)
		}
	}
	return nil
}

// checkGlobalFlags checks the flags every command shares: the actor, and
// the bounds on waits, which are positive or 0 (no bound, or for
// --connect-timeout the default).
func (a *app) checkGlobalFlags(cmd *cobra.Command, _ []string) error {
	if err := ipam.ValidateID("actor", a.actor); err != nil {
		return badUsage("--actor: %w", err)
	}
	if f := cmd.Flag("failover-timeout"); f != nil {
		a.failoverSet = f.Changed
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"connect-timeout", a.connectTimeout}, {"lock-timeout", a.lockTimeout},
		{"statement-timeout", a.statementTimeout}, {"failover-timeout", a.failoverTimeout}} {
		if f.d < 0 {
			return badUsage("--%s: %s is negative: give a positive duration such as 30s, or 0 (%s)", f.name, f.d, cmd.Flag(f.name).Usage)
		}
	}
	return nil
}
