package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// allocationJSON is an allocation as ipamctl prints it in JSON.
type allocationJSON struct {
	ID          string     `json:"id,omitempty"`
	ClusterID   string     `json:"cluster_id"`
	PoolID      string     `json:"pool_id"`
	Category    string     `json:"category"`
	Address     string     `json:"address"`
	State       string     `json:"state"`
	Generation  int64      `json:"generation"`
	OwnerKind   string     `json:"owner_kind,omitempty"`
	OwnerID     string     `json:"owner_id,omitempty"`
	OrgID       string     `json:"org_id,omitempty"`
	EnvID       string     `json:"env_id,omitempty"`
	NodeID      string     `json:"node_id,omitempty"`
	InstanceID  string     `json:"instance_id,omitempty"`
	Actor       string     `json:"actor,omitempty"`
	AllocatedAt *time.Time `json:"allocated_at,omitempty"`
	ReleasedAt  *time.Time `json:"released_at,omitempty"`
	ReusableAt  *time.Time `json:"reusable_at,omitempty"`
	LastSeenAt  *time.Time `json:"last_seen_at,omitempty"`
	// Tombstone: cooling after its pool or cluster was destroyed.
	Tombstone bool `json:"tombstone,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func toJSON(a ipam.Allocation, category, state string, lastSeen time.Time) allocationJSON {
	j := allocationJSON{ClusterID: a.ClusterID, PoolID: a.PoolID, Category: category, Address: a.Address.String(),
		State: state, Generation: a.Generation, OwnerKind: a.Owner.Kind, OwnerID: a.Owner.ID, OrgID: a.Owner.OrgID,
		EnvID: a.Owner.EnvID, NodeID: a.Owner.NodeID, InstanceID: a.Owner.InstanceID, Actor: a.Actor,
		AllocatedAt: timePtr(a.AllocatedAt), ReleasedAt: timePtr(a.ReleasedAt), ReusableAt: timePtr(a.ReusableAt),
		LastSeenAt: timePtr(lastSeen)}
	if a.ID != [16]byte{} {
		j.ID = a.ID.String()
	}
	return j
}

func (a *app) listCmd() *cobra.Command {
	var f operator.ListFilter
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List allocations by cluster, category, pool, owner, org, env, node, instance or state",
		Long: `Lists the allocations that hold an address: active, reserved (a plan-time hold that has not
expired) and cooling (released, inside its cooldown). Filters combine; without --state all three
are listed. Addresses whose cooldown has passed are free and not listed. An address still cooling
after its pool or cluster was destroyed is listed as "cooling(pool-destroyed)" with the pool it
left: a pool created over it inherits it. --owner needs --kind (an owner is a kind and an id) and
lists that owner's address and the ones it left cooling.

Each row of the table is one field per column, without spaces ("-" for none), so that it can be
split on whitespace; --json prints every field by name.`,
		Example: `  ipamctl list --cluster prod-eu1 --org acme
  ipamctl list --env acme-prod --state cooling
  ipamctl list --kind instance --owner i-42
  ipamctl list --node node-17 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.Validate(); err != nil {
				return flagError(err)
			}
			st, err := a.open(cmd.Context(), true)
			if err != nil {
				return err
			}
			// One row past --limit tells whether the list was cut short.
			limit := f.Limit
			q := f
			if limit > 0 && limit < math.MaxInt {
				q.Limit = limit + 1
			}
			views, err := operator.New(st).ListAllocations(cmd.Context(), q)
			if err != nil {
				return flagError(err)
			}
			more := limit > 0 && len(views) > limit
			if more {
				views = views[:limit]
			}
			if len(views) == 0 {
				// Nothing matches: a cluster that does not exist is said so
				// (a typo), as usage says it. A destroyed cluster's cooling
				// addresses are still listed under it above.
				if err := clusterExists(cmd.Context(), st, f.ClusterID); err != nil {
					return err
				}
			}
			if asJSON {
				out := make([]allocationJSON, len(views))
				for i, v := range views {
					out[i] = toJSON(v.Allocation, v.Category, v.State, v.LastSeenAt)
					out[i].Tombstone = v.Tombstone
				}
				if err := a.writeJSON(out); err != nil {
					return err
				}
				if more {
					// On stderr: the JSON stays the array it always was.
					fmt.Fprintln(a.errOut, cutShort(limit))
				}
				return nil
			}
			if len(views) == 0 {
				fmt.Fprintln(a.errOut, "no allocation matches")
				return nil
			}
			w := a.table()
			fmt.Fprintln(w, "ADDRESS\tSTATE\tCLUSTER\tPOOL\tKIND\tOWNER\tORG\tENV\tNODE\tINSTANCE\tACTOR\tALLOCATED\tREUSABLE")
			for _, v := range views {
				if v.Tombstone {
					v.State = tombstoneState
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Address, v.State, v.ClusterID, v.PoolID,
					dash(v.Owner.Kind), dash(v.Owner.ID), dash(v.Owner.OrgID), dash(v.Owner.EnvID), dash(v.Owner.NodeID), dash(v.Owner.InstanceID),
					dash(v.Actor), ts(v.AllocatedAt), ts(v.ReusableAt))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if more {
				fmt.Fprintln(a.errOut, cutShort(limit))
			} else {
				fmt.Fprintf(a.errOut, "%d allocation(s)\n", len(views))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.ClusterID, "cluster", "", "only this cluster")
	fl.StringVar(&f.Category, "category", "", "only this pool category: "+strings.Join(operator.Categories, ", "))
	fl.StringVar(&f.PoolID, "pool", "", "only this pool (<cluster>/<name>)")
	fl.StringVar(&f.OwnerKind, "kind", "", "only this owner kind: node, instance, env_ipv4 or set")
	fl.StringVar(&f.OwnerID, "owner", "", "only this owner id, of --kind (an address set member's is <set owner id>#<key>; an address inherited from another cluster's destroyed pool is listed as owned by <former cluster>/<owner id>)")
	fl.StringVar(&f.OrgID, "org", "", "only this org_id")
	fl.StringVar(&f.EnvID, "env", "", "only this env_id")
	fl.StringVar(&f.NodeID, "node", "", "only this node_id")
	fl.StringVar(&f.InstanceID, "instance", "", "only this instance_id")
	fl.StringVar(&f.State, "state", "", "only this state: active, reserved or cooling")
	fl.IntVar(&f.Limit, "limit", 0, "list at most this many (0: all); stderr says when more match")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// tombstoneState is the state list and lookup show for an address that a
// destroyed pool left cooling (one word: list's table splits on spaces).
const tombstoneState = "cooling(pool-destroyed)"

// cutShort says that list printed the first limit allocations of more.
func cutShort(limit int) string {
	return fmt.Sprintf("the first %d allocation(s) of more that match: the list was cut short by --limit %d; raise it, or give 0 for all", limit, limit)
}

// flagError names the flag behind an invalid_input error of the core.
func flagError(err error) error {
	ie, ok := err.(*ipam.InvalidError)
	if !ok {
		return err
	}
	flag := map[string]string{"cluster_id": "cluster", "pool_id": "pool", "owner_kind": "kind", "owner_id": "owner", "org_id": "org",
		"env_id": "env", "node_id": "node", "instance_id": "instance", "stale_days": "stale-days"}[ie.Field]
	if flag == "" {
		flag = strings.ReplaceAll(ie.Field, "_", "-")
	}
	return badUsage("--%s: %s", flag, ie.Msg)
}
