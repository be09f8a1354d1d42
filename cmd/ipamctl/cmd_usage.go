package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// usageAlertFilter is the jq filter of usage's example: the pools that
// alert. Alerts are per pool: a category sums its pools, so a full pool
// beside a large empty one leaves its category's alert unset.
const usageAlertFilter = `.[].pools[] | select(.alert) | .pool_id`

func (a *app) usageCmd() *cobra.Command {
	var cluster string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Pool usage per category and pool, with utilization bars",
		Long: `Shows, per cluster, for each category (node, instance, ipv4, and ipv6 when present) and each
pool: size, active, reserved (live plan-time holds), cooling (inside their cooldown), free,
utilization ((active + reserved + cooling) / size), the cooldown queue (when its next address
becomes reusable), the allocation failures of the last 24 hours by reason, and ALERT at or
above 80 %. A category's row sums its pools: a full pool beside a large empty one alerts on its
own row only, so look for alerts among the pools (as the example's filter does).`,
		Example: `  ipamctl usage
  ipamctl usage --cluster prod-eu1
  ipamctl usage --json | jq -r '` + usageAlertFilter + `'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkIDFlags("cluster", cluster); err != nil {
				return err
			}
			st, err := a.open(cmd.Context(), true)
			if err != nil {
				return err
			}
			var all []operator.ClusterUsage
			if cluster != "" {
				u, err := operator.New(st).PoolUsage(cmd.Context(), cluster)
				if err != nil {
					return flagError(err)
				}
				all = []operator.ClusterUsage{u}
			} else if all, err = operator.New(st).AllUsage(cmd.Context()); err != nil {
				return err
			}
			if asJSON {
				if all == nil {
					all = []operator.ClusterUsage{}
				}
				return a.writeJSON(all)
			}
			if len(all) == 0 {
				fmt.Fprintln(a.errOut, "no cluster yet")
				return nil
			}
			for i, u := range all {
				if i > 0 {
					fmt.Fprintln(a.out)
				}
				if err := a.printUsage(u); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "only this cluster")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) printUsage(u operator.ClusterUsage) error {
	fmt.Fprintf(a.out, "cluster %s (at %s)\n", u.ClusterID, ts(u.At))
	w := a.table()
	fmt.Fprintln(w, "CATEGORY\tPOOL\tSIZE\tACTIVE\tRESERVED\tCOOLING\tFREE\tUTILIZATION\t\tNEXT REUSABLE\tFAILURES 24H\t")
	row := func(category, pool string, c operator.UsageCounts) {
		alert := ""
		if c.Alert {
			alert = "ALERT"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", category, pool, count(c.Size), count(c.Active),
			count(c.Reserved), count(c.Cooling), count(c.Free), bar(c.Utilization, 20), percent(c.Utilization),
			tsp(c.CooldownQueue.NextReusableAt), failures(c.Failures), alert)
	}
	for _, c := range u.Categories {
		pools := fmt.Sprintf("(%d pools)", c.Pools)
		if c.Pools == 1 {
			pools = "(1 pool)"
		}
		row(c.Category, pools, c.UsageCounts)
		for _, p := range u.Pools {
			if p.Category == c.Category {
				row("", p.PoolID, p.UsageCounts)
			}
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if t := u.Tombstones; t.Count > 0 {
		fmt.Fprintf(a.out, "%d address(es) of destroyed pools still cooling (first reusable at %s); a pool created over them inherits them: ipamctl list --cluster %s --state cooling\n",
			t.Count, tsp(t.NextReusableAt), u.ClusterID)
	}
	return nil
}

// count prints a count; IPv6 pools hold up to 2^62 addresses, shown as 4.6e18.
func count(n int64) string {
	if n < 10_000_000 {
		return strconv.FormatInt(n, 10)
	}
	return strings.Replace(strconv.FormatFloat(float64(n), 'g', 2, 64), "e+", "e", 1)
}

func percent(u float64) string {
	switch {
	case u == 0:
		return "0%"
	case u < 0.001:
		return "<0.1%"
	}
	return strconv.FormatFloat(u*100, 'f', 1, 64) + "%"
}

// bar draws utilization as [#####...............]; any use at all shows one mark.
func bar(u float64, width int) string {
	n := int(math.Round(u * float64(width)))
	if u > 0 && n == 0 {
		n = 1
	}
	n = min(n, width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func failures(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ",")
}
