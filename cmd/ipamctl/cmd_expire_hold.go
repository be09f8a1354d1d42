package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

func (a *app) expireHoldCmd() *cobra.Command {
	var cluster, kind, owner, reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "expire-hold [ADDRESS]",
		Short: "End a plan's hold on an address now, as if its reservation_ttl had passed",
		Long: `Expires one plan-time hold now: the hold a plan took on an address for an owner it is about to
create (lookup shows it reserved). It is then an expired hold, as it would be once the
provider's reservation_ttl had passed, and records an allocation.hold_expired event with
--reason, the actor (--actor) and "expired_by": "operator".

Use it when a plan that will never be applied (an abandoned CI run, a plan made in the wrong
directory) blocks an owner or an address. Once expired, another configuration may declare the
owner, and another owner may take the address, unless the hold kept a cooldown (its owner's own
address, released before and taken back by the plan), which still runs. When either happens, the
plan that took the hold is told that it lost it: its apply fails with owner_conflict, or
"Planned Address No Longer Available", and never applies another address. Until then, that plan's
apply still confirms its hold, as after any expiry.

Expiring a hold that has expired already does nothing, says so and exits 0. An address or owner
with no hold is an error (exit 1); an active allocation is released with ipamctl release instead.

Give the address, or --kind and --owner with --cluster. --cluster is needed with an address
only when several clusters reuse it (a private IPv4 block).`,
		Example: `  ipamctl expire-hold 198.51.100.7 --cluster prod-eu1 --reason "CI plan abandoned"
  ipamctl expire-hold --cluster prod-eu1 --kind instance --owner i-42 --reason "plan made in the wrong directory"`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := operator.HoldRequest{ClusterID: cluster, OwnerKind: kind, OwnerID: owner, Reason: reason}
			var err error
			if req.Address, err = targetArgs(args, kind, owner, reason, "the hold is expired"); err != nil {
				return err
			}
			st, err := a.open(cmd.Context(), true)
			if err != nil {
				return err
			}
			r, err := operator.New(st).ExpireHold(cmd.Context(), req)
			if err != nil {
				return releaseFlagError(err)
			}
			if asJSON {
				// The address's state now, as lookup says it.
				state := ipam.StateFree
				if !r.Reusable {
					state = ipam.StateCooling
				}
				j := expireHoldJSON{Allocation: toJSON(r.Allocation, r.Category, state, time.Time{}), HolderOrigin: r.Origin,
					HeldUntil: r.Until.UTC(), AlreadyExpired: r.AlreadyExpired}
				if !r.AlreadyExpired {
					j.Reason = reason // recorded with the event
				}
				return a.writeJSON(j)
			}
			what := fmt.Sprintf("%s (%s %q, cluster %s, pool %s, planned by actor %q", r.Address, r.Owner.Kind, r.Owner.ID,
				r.ClusterID, r.PoolID, r.Actor)
			if r.Origin != "" {
				what += fmt.Sprintf(" in %q", r.Origin)
			}
			what += ")"
			reusable := "it is free for any owner now"
			if !r.Reusable {
				reusable = fmt.Sprintf("the cooldown it kept runs until %s: only %s %q may take it before then",
					r.ReusableAt.UTC().Format(time.RFC3339), r.Owner.Kind, r.Owner.ID)
			}
			if r.AlreadyExpired {
				fmt.Fprintf(a.out, "already expired: the hold on %s expired at %s; %s; nothing to do\n", what,
					r.Until.UTC().Format(time.RFC3339), reusable)
				return nil
			}
			fmt.Fprintf(a.out, "expired the hold on %s, which held it until %s; %s\n", what,
				r.Until.UTC().Format(time.RFC3339), reusable)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cluster, "cluster", "", "the hold's cluster (required with --kind/--owner)")
	f.StringVar(&kind, "kind", "", "owner kind: node, instance, env_ipv4 or set")
	f.StringVar(&owner, "owner", "", "owner id (an address set member's is <set owner id>#<key>)")
	f.StringVar(&reason, "reason", "", "why the hold is expired, recorded with the event (required)")
	f.BoolVar(&asJSON, "json", false, "print the expired hold as JSON")
	return cmd
}

type expireHoldJSON struct {
	Allocation allocationJSON `json:"allocation"`
	// HolderOrigin is the configuration whose plan took the hold (empty:
	// none recorded).
	HolderOrigin string `json:"holder_origin"`
	// Reason is the reason recorded with the event; empty when nothing was
	// done.
	Reason string `json:"reason,omitempty"`
	// HeldUntil is when the hold would have expired (its reservation_ttl),
	// or, already expired, when it did.
	HeldUntil time.Time `json:"held_until"`
	// AlreadyExpired: it had expired before; nothing was done.
	AlreadyExpired bool `json:"already_expired"`
}
