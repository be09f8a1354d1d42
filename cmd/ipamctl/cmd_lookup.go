package main

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

func (a *app) lookupCmd() *cobra.Command {
	var cluster string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "lookup ADDRESS",
		Short: "Reverse lookup: which cluster, pool and owner an address belongs to",
		Long: `Finds an address in the pools and tells its state (active, reserved, cooling, free or
excluded) and its owner: org, env, instance or node. For a cooling address the owner is its
last holder, with when it was released and when it becomes reusable. An address that a
destroyed pool left cooling is shown as "cooling(pool-destroyed)", with that pool and its last
holder, until its cooldown passes or a pool created over it inherits it.

Private IPv4 blocks may be reused by several clusters: then every match is shown, unless
--cluster picks one.`,
		Example: `  ipamctl lookup 2001:db8:0:1::2a
  ipamctl lookup 10.0.0.7 --cluster prod-eu1 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := ipam.ParseAddr(args[0])
			if err != nil {
				return &usageError{err}
			}
			if err := checkIDFlags("cluster", cluster); err != nil {
				return err
			}
			st, err := a.open(cmd.Context(), true)
			if err != nil {
				return err
			}
			infos, err := operator.New(st).LookupAddress(cmd.Context(), addr, cluster)
			if errors.Is(err, ipam.ErrNotFound) {
				return err
			}
			if err != nil {
				return flagError(err)
			}
			if asJSON {
				out := make([]allocationJSON, len(infos))
				for i, in := range infos {
					out[i] = toJSON(in.Allocation, in.Category, in.Status, in.LastSeenAt)
					out[i].Tombstone = in.Tombstone
				}
				return a.writeJSON(out)
			}
			for i, in := range infos {
				if i > 0 {
					fmt.Fprintln(a.out)
				}
				w := a.table()
				if in.Tombstone {
					in.Status = tombstoneState
					in.Category = "-"
				}
				owner := "-"
				if in.Owner.Kind != "" {
					owner = in.Owner.Kind + " " + in.Owner.ID
					if in.Status != ipam.StateActive && in.Status != ipam.StateReserved {
						owner += " (last holder)"
					}
				}
				for _, kv := range [][2]string{
					{"address", in.Address.String()}, {"cluster", in.ClusterID}, {"pool", in.PoolID},
					{"category", in.Category}, {"block", prefixOrDash(in.Block)}, {"state", in.Status}, {"owner", owner},
					{"org", dash(in.Owner.OrgID)}, {"env", dash(in.Owner.EnvID)}, {"node", dash(in.Owner.NodeID)},
					{"instance", dash(in.Owner.InstanceID)}, {"actor", dash(in.Actor)},
					{"generation", fmt.Sprint(in.Generation)}, {"allocated at", ts(in.AllocatedAt)},
					{"released at", ts(in.ReleasedAt)}, {"reusable at", ts(in.ReusableAt)}, {"last seen", ts(in.LastSeenAt)},
				} {
					fmt.Fprintf(w, "%s:\t%s\n", kv[0], kv[1])
				}
				if err := w.Flush(); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "look only in this cluster")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (a list: one entry per cluster holding the address)")
	return cmd
}

// prefixOrDash is a prefix, or "-" for none (an address whose pool is gone).
func prefixOrDash(p netip.Prefix) string {
	if !p.IsValid() {
		return "-"
	}
	return p.String()
}
