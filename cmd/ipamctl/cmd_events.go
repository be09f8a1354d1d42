package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// followOverlap is how far back each poll of --follow looks again: an event's
// time is its statement's, so a transaction that commits late shows up with
// an earlier time than events already printed. Ids already printed
// are skipped.
const followOverlap = time.Minute

type eventJSON struct {
	ID           string         `json:"id"`
	At           time.Time      `json:"at"`
	Type         string         `json:"type"`
	ClusterID    string         `json:"cluster_id,omitempty"`
	PoolID       string         `json:"pool_id,omitempty"`
	AllocationID string         `json:"allocation_id,omitempty"`
	Generation   int64          `json:"generation,omitempty"`
	Address      string         `json:"address,omitempty"`
	OwnerKind    string         `json:"owner_kind,omitempty"`
	OwnerID      string         `json:"owner_id,omitempty"`
	OrgID        string         `json:"org_id,omitempty"`
	EnvID        string         `json:"env_id,omitempty"`
	NodeID       string         `json:"node_id,omitempty"`
	InstanceID   string         `json:"instance_id,omitempty"`
	Actor        string         `json:"actor"`
	Origin       string         `json:"origin,omitempty"`
	Data         map[string]any `json:"data,omitempty"`
}

func (a *app) eventsCmd() *cobra.Command {
	var cluster, since string
	var types []string
	var follow, asJSON bool
	var interval time.Duration
	var limit int
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show the audit trail of events, and follow it",
		Long: `Prints the append-only event trail, oldest first: cluster and pool changes, allocations,
releases, holds, reclaims. --type takes an exact type (instance.allocated) or a prefix ending in
'*' (instance.*), and may repeat. --follow keeps printing new events until interrupted.`,
		Example: `  ipamctl events --since 2h
  ipamctl events --cluster prod-eu1 --type 'env.*' --since 7d
  ipamctl events --follow --type allocation.reclaimed --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if interval <= 0 {
				return badUsage("--interval must be positive")
			}
			if err := checkIDFlags("cluster", cluster); err != nil {
				return err
			}
			for _, t := range types {
				if err := ipam.ValidateEventType(t); err != nil {
					return flagError(err)
				}
			}
			if limit < 0 {
				return badUsage("--limit: %d is negative: give the number of newest events to print, or 0 for all", limit)
			}
			st, err := a.open(ctx, true)
			if err != nil {
				return err
			}
			now, err := operator.New(st).DatabaseNow(ctx)
			if err != nil {
				return err
			}
			from, err := parseSince(since, now)
			if err != nil {
				return err
			}
			f := operator.EventFilter{ClusterID: cluster, Types: types, Since: from, Limit: limit}
			evs, err := operator.New(st).ListEvents(ctx, f)
			if err != nil {
				return flagError(err)
			}
			seen := map[uuid.UUID]time.Time{}
			last := from
			// A poll looks back followOverlap from the newest event printed,
			// never before --since: what came before it is not asked for.
			lookBack := func() time.Time {
				if b := last.Add(-followOverlap); b.After(from) {
					return b
				}
				return from
			}
			print := func(evs []operator.Event) error {
				for _, e := range evs {
					if _, ok := seen[e.ID]; ok {
						continue
					}
					seen[e.ID] = e.At
					if e.At.After(last) {
						last = e.At
					}
					if err := a.printEvent(e, asJSON); err != nil {
						return err
					}
				}
				return nil
			}
			if err := print(evs); err != nil || !follow {
				return err
			}
			if f.Limit > 0 {
				// The events --limit left out are not news: the polls look
				// back followOverlap, and would print the older ones there.
				// They are those up to the newest printed: one written
				// since the first listing, after it, is news.
				f.Since, f.Limit = lookBack(), 0
				if before, err := operator.New(st).ListEvents(ctx, f); err == nil {
					for _, e := range before {
						if _, ok := seen[e.ID]; !ok && !e.At.After(last) {
							seen[e.ID] = e.At
						}
					}
				}
			}
			f.Limit = 0
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
				f.Since = lookBack()
				evs, err := operator.New(st).ListEvents(ctx, f)
				if ctx.Err() != nil {
					return nil
				}
				if err != nil {
					// Keep following through a database outage; say so once per poll.
					fmt.Fprintf(a.errOut, "ipamctl: %v (retrying)\n", err)
					continue
				}
				if err := print(evs); err != nil {
					return err
				}
				for id, at := range seen {
					if at.Before(f.Since) {
						delete(seen, id)
					}
				}
			}
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cluster, "cluster", "", "only events of this cluster")
	fl.StringVar(&since, "since", "24h", "from this long ago (24h, 7d) or from an RFC 3339 time")
	fl.StringArrayVar(&types, "type", nil, "only this event type, or types with this prefix when it ends in '*', e.g. 'env.*' (repeatable); a type's older name (env_ipv4.relabeled) matches it too")
	fl.BoolVarP(&follow, "follow", "f", false, "keep printing new events until interrupted")
	fl.DurationVar(&interval, "interval", 2*time.Second, "how often --follow polls")
	fl.IntVar(&limit, "limit", 0, "print only the newest N of the matching events (0: all; --follow then continues)")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object per line")
	return cmd
}

func (a *app) printEvent(e operator.Event, asJSON bool) error {
	if asJSON {
		j := eventJSON{ID: e.ID.String(), At: e.At.UTC(), Type: e.Type, ClusterID: e.ClusterID, PoolID: e.PoolID,
			Generation: e.Generation, OwnerKind: e.Owner.Kind, OwnerID: e.Owner.ID, OrgID: e.Owner.OrgID, EnvID: e.Owner.EnvID,
			NodeID: e.Owner.NodeID, InstanceID: e.Owner.InstanceID, Actor: e.Actor, Origin: e.Origin, Data: e.Data}
		if e.AllocationID != uuid.Nil {
			j.AllocationID = e.AllocationID.String()
		}
		if e.Address.IsValid() {
			j.Address = e.Address.String()
		}
		return a.writeJSONLine(j)
	}
	parts := []string{e.At.UTC().Format("2006-01-02T15:04:05.000Z"), e.Type, dash(e.ClusterID)}
	if e.Address.IsValid() {
		parts = append(parts, e.Address.String())
	}
	if e.Owner.Kind != "" {
		parts = append(parts, e.Owner.Kind+"="+e.Owner.ID)
	}
	for _, l := range [][2]string{{"org", e.Owner.OrgID}, {"env", e.Owner.EnvID}, {"node", e.Owner.NodeID}, {"instance", e.Owner.InstanceID}} {
		// A label repeating the owner key (instance=i1 of instance i1) is printed once.
		if sameAsOwner := e.Owner.Kind == l[0] && e.Owner.ID == l[1]; l[1] != "" && !sameAsOwner {
			parts = append(parts, l[0]+"="+l[1])
		}
	}
	parts = append(parts, "actor="+e.Actor)
	if e.Origin != "" {
		parts = append(parts, "origin="+e.Origin)
	}
	if len(e.Data) > 0 {
		keys := make([]string, 0, len(e.Data))
		for k := range e.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%v", k, e.Data[k]))
		}
	}
	_, err := fmt.Fprintln(a.out, strings.Join(parts, "  "))
	return err
}
