package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

func (a *app) scaleCmd() *cobra.Command {
	var cluster, node string
	var interval time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Scale per-node instance blocks to demand, once or continuously",
		Long: `Runs the instance-block scaling of ipam_node_instance_blocks with each node's stored settings:
target = ceil(mf + used / B) blocks, capped at max_blocks, at least one. Missing blocks are added
in one step; surplus blocks are released only when more than Mf x B addresses are free, and then
only blocks empty on two consecutive scalings, never a node's last block.

Without --node every node with blocks is scaled (of --cluster, or of all clusters). With
--interval the scaling repeats until interrupted. Each node's result is printed (a line saying
so when no node has blocks; --json prints nothing then).`,
		Example: `  ipamctl scale --cluster prod-eu1 --node node-17
  ipamctl scale --cluster prod-eu1
  ipamctl scale --interval 1m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node != "" && cluster == "" {
				return badUsage("--node needs --cluster")
			}
			if interval < 0 {
				return badUsage("--interval must not be negative")
			}
			if err := checkIDFlags("cluster", cluster, "node", node); err != nil {
				return err
			}
			st, err := a.open(cmd.Context(), true)
			if err != nil {
				return err
			}
			for {
				if err := a.scaleOnce(cmd.Context(), st, cluster, node, asJSON); err != nil {
					return err
				}
				if interval == 0 {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "cluster to scale (default: all)")
	cmd.Flags().StringVar(&node, "node", "", "one node to scale (needs --cluster)")
	cmd.Flags().DurationVar(&interval, "interval", 0, "repeat the scaling this often (default: once)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each node's result as one JSON object per line")
	return cmd
}

type scaleResult struct {
	Cluster      string   `json:"cluster"`
	Node         string   `json:"node"`
	Blocks       []string `json:"blocks"`
	Used         int64    `json:"used"`
	Capacity     int64    `json:"capacity"`
	TargetBlocks int      `json:"target_blocks"`
	Added        []string `json:"added"`
	Released     []string `json:"released"`
}

func (a *app) scaleOnce(ctx context.Context, st *ipam.Client, cluster, node string, asJSON bool) error {
	nodes := [][2]string{{cluster, node}}
	if node == "" {
		var err error
		if nodes, err = st.NodesWithBlocks(ctx, cluster); err != nil {
			return err
		}
		if len(nodes) == 0 {
			if err := clusterExists(ctx, st, cluster); err != nil || asJSON {
				return err
			}
			where := "of any cluster"
			if cluster != "" {
				where = fmt.Sprintf("of cluster %q", cluster)
			}
			fmt.Fprintf(a.out, "no node %s has instance blocks: nothing to scale\n", where)
			return nil
		}
	}
	for _, cn := range nodes {
		nb, err := st.RescaleNodeBlocks(ctx, cn[0], cn[1])
		if errors.Is(err, ipam.ErrNotFound) {
			return fmt.Errorf("node %q of cluster %q has no instance blocks (create them with ipam_node_instance_blocks)", cn[1], cn[0])
		}
		if err != nil {
			return fmt.Errorf("scaling %s/%s: %w", cn[0], cn[1], err)
		}
		if asJSON {
			r := scaleResult{Cluster: cn[0], Node: cn[1], Used: nb.Used, Capacity: nb.Capacity, TargetBlocks: nb.TargetBlocks,
				Blocks: strs(nb.Blocks), Added: strs(nb.Added), Released: strs(nb.Released)}
			if err := a.writeJSONLine(r); err != nil {
				return err
			}
			continue
		}
		switch {
		case len(nb.Added) > 0 || len(nb.Released) > 0:
			fmt.Fprintf(a.out, "%s/%s: %d used, target %d blocks: added %v, released %v; now %d blocks (%d addresses)\n",
				cn[0], cn[1], nb.Used, nb.TargetBlocks, strs(nb.Added), strs(nb.Released), len(nb.Blocks), nb.Capacity)
		default:
			fmt.Fprintf(a.out, "%s/%s: %d used, %d blocks (%d addresses), target %d: no change\n",
				cn[0], cn[1], nb.Used, len(nb.Blocks), nb.Capacity, nb.TargetBlocks)
		}
	}
	return nil
}

func strs[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}
