package main

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

func (a *app) releaseCmd() *cobra.Command {
	var cluster, kind, owner, reason string
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "release [ADDRESS]",
		Short: "Release one allocation into its cooldown: by address, or by owner kind and id",
		Long: `Releases one active allocation into its pool's cooldown, as a destroy would, and records
the owner kind's release event (instance.released, node.released, ...) with --reason, the
actor (--actor) and "released_by": "operator". Nothing else may take the address before its
cooldown ends.

An allocation that a Terraform state holds (a configuration created it, or a refresh or an
import read it) belongs to that configuration, which still uses it: it is refused (exit 1), naming the owner. Remove the
owner from that configuration and apply instead. --force releases it anyway, with a warning
on stderr and "forced": true in the event; that configuration's next refresh drops the
resource and its next apply allocates for the owner again, which gets the same address back
(an owner's own cooling address comes first).

Releasing what is already released (the address, or the owner's allocation, is cooling and no
one has taken it since) does nothing: it says so and exits 0, so that a release can be run
again. An address or owner with neither is an error (exit 1).

Give the address, or --kind and --owner with --cluster. --cluster is needed with an address
only when several clusters reuse it (a private IPv4 block).`,
		Example: `  ipamctl release 2001:db8:0:1::2a --reason "instance i-42 deleted outside Terraform"
  ipamctl release --cluster prod-eu1 --kind instance --owner i-42 --reason "ticket OPS-7"
  ipamctl release 198.51.100.7 --cluster prod-eu1 --reason "node gone" --force`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := operator.ReleaseRequest{ClusterID: cluster, OwnerKind: kind, OwnerID: owner, Reason: reason, Force: force}
			var err error
			if req.Address, err = targetArgs(args, kind, owner, reason, "the allocation is released"); err != nil {
				return err
			}
			st, err := a.open(cmd.Context(), true)
			if err != nil {
				return err
			}
			r, err := operator.New(st).ReleaseAllocation(cmd.Context(), req)
			if err != nil {
				return releaseFlagError(err)
			}
			if r.Forced {
				held := "a Terraform configuration created"
				if !r.ConfirmedAt.IsZero() {
					held = "a Terraform state confirmed at " + r.ConfirmedAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(a.errOut, "ipamctl: WARNING: --force released %s, which %s: the "+
					"configuration that declares %s %q still uses it. Its next refresh drops the resource, and its next apply "+
					"allocates for that owner again, which gets %s back (an owner's own cooling address comes first). To take "+
					"the address from that configuration, remove the owner from it and apply.\n",
					r.Address, held, r.Owner.Kind, r.Owner.ID, r.Address)
			}
			state := r.State
			if r.AlreadyReleased && r.Reusable {
				state = ipam.StateFree // its cooldown is over, as lookup says
			}
			if asJSON {
				return a.writeJSON(releaseJSON{Allocation: toJSON(r.Allocation, r.Category, state, time.Time{}), Reason: reason,
					Forced: r.Forced, AlreadyReleased: r.AlreadyReleased})
			}
			switch {
			case r.AlreadyReleased && r.Reusable:
				fmt.Fprintf(a.out, "already released: %s (%s %q, cluster %s, pool %s) finished its cooldown at %s and is free; nothing to do\n",
					r.Address, r.Owner.Kind, r.Owner.ID, r.ClusterID, r.PoolID, r.ReusableAt.UTC().Format(time.RFC3339))
				return nil
			case r.AlreadyReleased:
				fmt.Fprintf(a.out, "already released: %s (%s %q, cluster %s, pool %s) is cooling until %s; nothing to do\n",
					r.Address, r.Owner.Kind, r.Owner.ID, r.ClusterID, r.PoolID, r.ReusableAt.UTC().Format(time.RFC3339))
				return nil
			}
			fmt.Fprintf(a.out, "released %s (%s %q, cluster %s, pool %s) into cooldown until %s\n", r.Address, r.Owner.Kind,
				r.Owner.ID, r.ClusterID, r.PoolID, r.ReusableAt.UTC().Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cluster, "cluster", "", "the allocation's cluster (required with --kind/--owner)")
	f.StringVar(&kind, "kind", "", "owner kind: node, instance, env_ipv4 or set")
	f.StringVar(&owner, "owner", "", "owner id (an address set member's is <set owner id>#<key>)")
	f.StringVar(&reason, "reason", "", "why it is released, recorded with the event (required)")
	f.BoolVar(&force, "force", false, "release even what a Terraform state confirmed (that configuration loses the address)")
	f.BoolVar(&asJSON, "json", false, "print the released allocation as JSON")
	return cmd
}

type releaseJSON struct {
	Allocation allocationJSON `json:"allocation"`
	Reason     string         `json:"reason"`
	Forced     bool           `json:"forced"`
	// AlreadyReleased: it was released before; nothing was done.
	AlreadyReleased bool `json:"already_released"`
}

// targetArgs checks what release and expire-hold name on the command
// line: the ADDRESS argument (returned), or --kind and --owner; and the
// reason, which says why (why: what it says). Each mistake is a usage error
// (exit 2).
func targetArgs(args []string, kind, owner, reason, why string) (netip.Addr, error) {
	var addr netip.Addr
	switch {
	case len(args) == 1 && (kind != "" || owner != ""):
		return addr, badUsage("give an address or --kind and --owner, not both")
	case len(args) == 1:
		a, err := ipam.ParseAddr(args[0])
		if p, perr := netip.ParsePrefix(args[0]); err != nil && perr == nil && p.IsSingleIP() {
			// A host prefix, as a set member's cidr or a listing shows one.
			a, err = p.Addr(), nil
		}
		if err != nil {
			return addr, &usageError{err}
		}
		addr = a
	case kind == "" || owner == "":
		return addr, badUsage("give an address, or --kind and --owner (with --cluster)")
	}
	if strings.TrimSpace(reason) == "" {
		return addr, badUsage("--reason is required: say why %s (it is recorded with the event)", why)
	}
	return addr, nil
}

// releaseFlagError names the flag of a wrong input.
func releaseFlagError(err error) error {
	if ie, ok := err.(*ipam.InvalidError); ok && ie.Field == "owner_id" {
		return badUsage("--owner: %s", ie.Msg)
	}
	return flagError(err)
}
