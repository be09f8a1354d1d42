package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

func (a *app) leaksCmd() *cobra.Command {
	var inventory, kind, cluster, output string
	var staleDays int
	var allowEmpty bool
	cmd := &cobra.Command{
		Use:   "leaks",
		Short: "Report allocations whose owner no longer exists, or that Terraform no longer sees",
		Long: `Writes a JSON leak report that 'ipamctl reclaim' reads. Nothing is changed. Two kinds:

  --inventory FILE   the owners that still exist (FILE, or - for standard input): one id per
                     line (with --kind), a JSON array of ids (with --kind), or a JSON object
                     {"instance": [...], "node": [...], "env_ipv4": [...], "set": [...]}
                     (a set inventory lists address set ids). Every active
                     allocation of a kind the inventory speaks for, whose owner is not in it,
                     is reported. An inventory that lists no owner of a kind is refused
                     (it would report them all) unless --allow-empty.
  --stale-days N     active allocations that no Terraform refresh has seen for N days (a
                     refresh records a last-seen time at most once an hour), of --kind if given.
                     Only allocations a Terraform state read or a configuration made: the
                     scheduler's never refresh, so age proves nothing of them (use --inventory).

The report goes to --output (default: standard output); a summary goes to standard error.`,
		Example: `  platform-inventory --instances | ipamctl leaks --inventory - --kind instance -o leaks.json
  ipamctl leaks --inventory owners.json --cluster prod-eu1 -o leaks.json
  ipamctl leaks --stale-days 30 --kind node -o stale.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if inventory != "" && cmd.Flags().Changed("stale-days") || inventory == "" && !cmd.Flags().Changed("stale-days") {
				return badUsage("give exactly one of --inventory FILE and --stale-days N")
			}
			if err := checkIDFlags("cluster", cluster); err != nil {
				return err
			}
			if inventory == "" && (staleDays < 1 || staleDays > ipam.MaxStaleDays) {
				return badUsage("--stale-days: must be at least 1 and at most %d (100 years); got %d", ipam.MaxStaleDays, staleDays)
			}
			if err := checkKindFlag(kind); err != nil {
				return err
			}
			// The inventory is read before the database is opened: a
			// missing --kind is a bad command line, told as such even when
			// the database is away.
			var inv operator.Inventory
			if inventory != "" {
				var err error
				if inv, err = a.readInventory(inventory, kind, allowEmpty); err != nil {
					return err
				}
			}
			st, err := a.open(cmd.Context(), true)
			if err != nil {
				return err
			}
			var rep operator.LeakReport
			if inventory != "" {
				if rep, err = operator.New(st).FindInventoryLeaks(cmd.Context(), cluster, inv); err != nil {
					return flagError(err)
				}
			} else {
				var kinds []string
				if kind != "" {
					kinds = []string{kind}
				}
				if rep, err = operator.New(st).FindStaleLeaks(cmd.Context(), cluster, kinds, staleDays); err != nil {
					return flagError(err)
				}
			}
			b, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				return err
			}
			b = append(b, '\n')
			where := "standard output"
			if output == "" || output == "-" {
				if _, err := a.out.Write(b); err != nil {
					return err
				}
			} else {
				if err := os.WriteFile(output, b, 0o644); err != nil {
					return err
				}
				where = output
			}
			fmt.Fprintf(a.errOut, "%d suspected leak(s) in the %s report (%s); review it, then run 'ipamctl reclaim --from-report' (a dry run unless --apply)\n",
				len(rep.Leaks), rep.Kind, where)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&inventory, "inventory", "", "file of the owners that still exist, or - for standard input")
	fl.StringVar(&kind, "kind", "", "owner kind: node, instance, env_ipv4 or set (the kind of a plain inventory; a filter for --stale-days)")
	fl.IntVar(&staleDays, "stale-days", 0, "report active allocations that Terraform manages and no refresh has seen for this many days")
	fl.StringVar(&cluster, "cluster", "", "only this cluster")
	fl.StringVarP(&output, "output", "o", "", "write the report to this file (default: standard output)")
	fl.BoolVar(&allowEmpty, "allow-empty", false, "accept an inventory that lists no owner of a kind (every allocation of it is then reported)")
	return cmd
}

// checkKindFlag refuses a --kind that names no owner kind, before anything
// is read or looked up.
func checkKindFlag(kind string) error {
	if kind != "" && !slices.Contains(ipam.OwnerKinds, kind) {
		return badUsage("--kind: %q is not an owner kind: expected %s", kind, strings.Join(ipam.OwnerKinds, ", "))
	}
	return nil
}

// readInventory reads --inventory (of --kind, when it is a plain list). A
// plain list without --kind is a bad command line (exit 2), named as the
// flag; an inventory that lists no owner of a kind is refused, naming
// --allow-empty, unless allowEmpty.
func (a *app) readInventory(name, kind string, allowEmpty bool) (operator.Inventory, error) {
	if err := checkKindFlag(kind); err != nil {
		return nil, err
	}
	r, err := a.openInput(name)
	if err != nil {
		return nil, fmt.Errorf("--inventory: %w", err)
	}
	defer r.Close()
	// The core's own refusal of an empty kind does not know the flag that
	// allows it: it is judged here, after the parse.
	inv, err := operator.ParseInventory(r, kind, true)
	var ie *ipam.InvalidError
	switch {
	case errors.As(err, &ie) && ie.Field == "kind" && kind == "":
		return nil, badUsage("--kind: --inventory %s is a plain list of ids (one per line, or a JSON array): give --kind to say "+
			"which owner kind it lists: %s", name, strings.Join(ipam.OwnerKinds, ", "))
	case errors.As(err, &ie) && ie.Field == "kind":
		return nil, badUsage("--kind: %s", ie.Msg)
	case err != nil:
		return nil, fmt.Errorf("--inventory %s: %w", name, err)
	}
	if !allowEmpty {
		for _, k := range inv.Kinds() {
			if len(inv[k]) == 0 {
				return nil, fmt.Errorf("--inventory %s: %w", name, &ipam.InvalidError{Field: "inventory", Msg: fmt.Sprintf(
					"lists no %s at all, which would report every active %s address as leaked (more often a broken export "+
						"than the truth); if no %s exists, give --allow-empty", k, k, k)})
			}
		}
	}
	return inv, nil
}

func (a *app) reclaimCmd() *cobra.Command {
	var from, inventory, kind string
	var apply, asJSON, allowEmpty bool
	cmd := &cobra.Command{
		Use:   "reclaim --from-report FILE",
		Short: "Release the leaked allocations of a leak report into cooling, after checking each again",
		Long: `Reads a report written by 'ipamctl leaks'. Without --apply it is a dry run: it checks each
allocation and says what it would do. With --apply, each allocation is checked again in its own
transaction, with its row locked, right before it is released: it must still be active, at the
reported generation (not released and handed out again since), held by the same owner, not seen
by Terraform since the report, and its owner must still be absent: not in the current inventory
(--inventory, required to apply an inventory report), or still stale. Anything else refuses that
allocation: a report never releases a live allocation. A released allocation cools down with its
pool's cooldown and gets an allocation.reclaimed event. With --apply, the exit code is 5 when any
allocation was refused (the REASON column says why; the others, if any, were reclaimed), 0 when
none was.`,
		Example: `  ipamctl reclaim --from-report leaks.json
  platform-inventory --instances | ipamctl reclaim --from-report leaks.json --inventory - --kind instance --apply
  ipamctl reclaim --from-report stale.json --apply --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return badUsage("--from-report FILE is required")
			}
			if from == "-" && inventory == "-" {
				return badUsage("--from-report and --inventory cannot both be standard input")
			}
			r, err := a.openInput(from)
			if err != nil {
				return fmt.Errorf("--from-report: %w", err)
			}
			rep, err := operator.ReadLeakReport(r)
			r.Close()
			if err != nil {
				return fmt.Errorf("--from-report %s: %w", from, err)
			}
			opt := operator.ReclaimOptions{Apply: apply}
			if inventory != "" {
				if opt.Inventory, err = a.readInventory(inventory, kind, allowEmpty); err != nil {
					return err
				}
			}
			if rep.Kind == operator.LeakInventory && apply && opt.Inventory == nil {
				return badUsage("--inventory is required to apply a report made from an inventory: each owner is checked against the current inventory right before its address is released")
			}
			st, err := a.open(cmd.Context(), true)
			if err != nil {
				return err
			}
			res, err := operator.New(st).Reclaim(cmd.Context(), rep, opt)
			if err != nil {
				return err
			}
			n := map[string]int{}
			for _, x := range res {
				n[x.Outcome]++
			}
			if asJSON {
				if err := a.writeJSON(res); err != nil {
					return err
				}
			} else {
				w := a.table()
				fmt.Fprintln(w, "OUTCOME\tADDRESS\tCLUSTER\tOWNER\tALLOCATION\tREASON")
				for _, x := range res {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s %s\t%s\t%s\n", x.Outcome, x.Leak.Address, x.Leak.ClusterID, x.Leak.OwnerKind,
						x.Leak.OwnerID, x.Leak.AllocationID, dash(x.Reason))
				}
				if err := w.Flush(); err != nil {
					return err
				}
			}
			if apply {
				fmt.Fprintf(a.errOut, "reclaimed %d, refused %d of %d\n", n[operator.OutcomeReclaimed], n[operator.OutcomeRefused], len(res))
				if refused := n[operator.OutcomeRefused]; refused > 0 {
					// A script that applies a report learns that not all of it
					// was released; each refusal's reason is in the table above.
					return &codedError{code: exitRefused, err: refusedError(refused, n[operator.OutcomeReclaimed], len(res))}
				}
			} else {
				fmt.Fprintf(a.errOut, "dry run: nothing was released; %d would be reclaimed, %d refused; run again with --apply\n",
					n[operator.OutcomeWouldReclaim], n[operator.OutcomeRefused])
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from-report", "", "the leak report written by 'ipamctl leaks' (- for standard input)")
	fl.StringVar(&inventory, "inventory", "", "the current inventory of owners (as for 'leaks'; - for standard input)")
	fl.StringVar(&kind, "kind", "", "owner kind of a plain inventory: node, instance, env_ipv4 or set")
	fl.BoolVar(&allowEmpty, "allow-empty", false, "accept an inventory that lists no owner of a kind")
	fl.BoolVar(&apply, "apply", false, "release the allocations that pass every check (default: dry run)")
	fl.BoolVar(&asJSON, "json", false, "print the outcomes as JSON")
	return cmd
}

// refusedError says how much of a report reclaim --apply refused, and what
// became of the rest: "the others were reclaimed" only when there are others.
func refusedError(refused, reclaimed, total int) error {
	switch {
	case refused == total && total == 1:
		return errors.New("the report's 1 allocation was refused (see REASON); none was reclaimed")
	case refused == total:
		return fmt.Errorf("all %d of the report's allocations were refused (see REASON); none was reclaimed", total)
	case reclaimed == 1 && total-refused == 1:
		return fmt.Errorf("%d of the report's %d allocation(s) refused (see REASON); the other one was reclaimed", refused, total)
	case reclaimed == total-refused:
		return fmt.Errorf("%d of the report's %d allocation(s) refused (see REASON); the other %d were reclaimed", refused, total, reclaimed)
	}
	// An outcome neither reclaimed nor refused: the counts as they are.
	return fmt.Errorf("%d of the report's %d allocation(s) refused (see REASON); %d reclaimed", refused, total, reclaimed)
}
