package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

func (a *app) checkCmd() *cobra.Command {
	var cluster string
	var asJSON, recount bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Verify the IPAM's invariants on the live database",
		Long: `Verifies, in one read-only snapshot:

  ` + operator.InvariantUniqueAddress + `     no address is active twice (in a cluster; IPv6 and public IPv4 across clusters)
  ` + operator.InvariantInPool + `           every address lies in its pool, is not an excluded one, and has its ordinal
  ` + operator.InvariantCooldown + `  no address went to another owner inside a cooldown, by the event history
  ` + operator.InvariantIPv4PerEnv + `  at most one active IPv4 per environment
  ` + operator.InvariantCounters + `           the striped counters are complete, in their residue class, and behind every
                            ordinal they handed out
  ` + operator.InvariantUsageCounts + `            every pool has its usage counter slots, and they add up to its active
                            addresses, and its cooling counts to its cooling ones
                            (what usage reports without counting them)
  ` + operator.InvariantSettings + `    the pools of a cluster's node and instance addresses carry its cooldowns
                            and gateway
  ` + operator.InvariantNodeBlocks + `               a node block pool's rows lie in that node's active blocks, parked rows in a
                            cooling block, and no other row in a block
  ` + operator.InvariantTombstones + `     an address a destroyed pool or cluster left cooling (a tombstone) has
                            no row where it binds: a pool created over it inherited it

Prints each violation and exits 3 when any invariant is broken (1 when the check cannot run).

--recount-usage first sets every pool's usage counters to a real count of its active and cooling addresses
(one short transaction per pool, then one for every pool's cooling counts; allocations keep
running), prints each pool it corrected, and then checks: the repair for a usage_counters violation.`,
		Example: `  ipamctl check
  ipamctl check --cluster prod-eu1 --json
  ipamctl check --recount-usage`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkIDFlags("cluster", cluster); err != nil {
				return err
			}
			st, err := a.open(cmd.Context(), true)
			if err != nil {
				return err
			}
			if recount {
				fixed, err := operator.New(st).RecountUsage(cmd.Context(), cluster)
				if err != nil {
					return flagError(err)
				}
				for _, f := range fixed {
					if f.Was != f.Active {
						fmt.Fprintf(a.errOut, "recounted %s: the usage counters said %d active, a real count found %d\n", f.PoolID, f.Was, f.Active)
					}
					if f.CoolingWas != f.Cooling {
						fmt.Fprintf(a.errOut, "recounted %s: the cooling counts said %d cooling, a real count found %d\n", f.PoolID, f.CoolingWas, f.Cooling)
					}
				}
			}
			rep, err := operator.New(st).Check(cmd.Context(), cluster)
			if err != nil {
				return flagError(err)
			}
			if asJSON {
				if err := a.writeJSON(rep); err != nil {
					return err
				}
			} else {
				for _, v := range rep.Violations {
					fmt.Fprintf(a.out, "VIOLATION %s\n", v)
				}
			}
			if !rep.OK() {
				seen := map[string]bool{}
				var broken []string
				for _, v := range rep.Violations {
					if !seen[v.Invariant] {
						seen[v.Invariant] = true
						broken = append(broken, v.Invariant)
					}
				}
				return &codedError{code: exitViolations, err: fmt.Errorf("%d violation(s) of %s", rep.Total(), strings.Join(broken, ", "))}
			}
			if !asJSON {
				fmt.Fprintf(a.out, "ok: %d invariants hold over %d allocation rows\n", len(rep.Invariants), rep.Rows)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "only this cluster")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&recount, "recount-usage", false, "first set every pool's usage counters to a real count of its active and cooling addresses")
	return cmd
}
