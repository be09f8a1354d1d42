package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
)

// Per-node instance blocks (the Azure CNS scaling, in one step): a node holds
// aligned blocks of the instance prefix, sized to demand. Instances placed on
// the node take their addresses inside its blocks, from the node's own pool,
// so nodes never contend with each other, and WireGuard AllowedIPs can route
// whole blocks.

// Block scaling defaults.
const (
	DefaultBlockPrefixLength = 124 // 16 addresses: the batch size B
	DefaultMinFreeFraction   = 0.5
	DefaultMaxFreeFraction   = 1.5
	DefaultMaxBlocks         = 16
)

// BlockScaling are a node's scaling settings.
type BlockScaling struct {
	PrefixLength int     // block length, e.g. 124
	MinFree      float64 // mf: free addresses to keep, in batches
	MaxFree      float64 // Mf: free addresses above which to shrink, in batches
	MaxBlocks    int
	// Demand, when set (>= 0), is the number of addresses expected on the
	// node; otherwise the node's current use counts.
	Demand *int64
}

// BatchSize is B, the addresses of one block.
func (b BlockScaling) BatchSize() int64 { return int64(1) << (128 - b.PrefixLength) }

// Validate checks the settings. Mf >= mf + 1 is needed for the scaling to
// converge: right after growing to the target, up to mf + 1 batches are free,
// which must not already count as surplus.
func (b BlockScaling) Validate() error {
	switch {
	case b.PrefixLength < 65 || b.PrefixLength > 128:
		return invalid("block_prefix_length", "/%d is out of range: blocks are /65 to /128", b.PrefixLength)
	case b.MaxBlocks < 1:
		return invalid("max_blocks", "must be at least 1")
	case b.MinFree < 0 || math.IsNaN(b.MinFree) || math.IsInf(b.MinFree, 0):
		return invalid("min_free_fraction", "%g is out of range: a finite number, at least 0", b.MinFree)
	case math.IsInf(b.MaxFree, 0):
		return invalid("max_free_fraction", "%g is out of range: a finite number, at least min_free_fraction + 1", b.MaxFree)
	case b.MaxFree < b.MinFree+1 || math.IsNaN(b.MaxFree):
		return invalid("max_free_fraction", "%g must be at least min_free_fraction + 1 (%g) for the scaling to converge", b.MaxFree, b.MinFree+1)
	case b.MaxBlocks < 1:
		return invalid("max_blocks", "must be at least 1")
	case b.Demand != nil && *b.Demand < 0:
		return invalid("demand", "must not be negative")
	case b.tooManyAddresses():
		// The block alone past the cap is its length's fault; else the count's.
		field := "max_blocks"
		if h := 128 - b.PrefixLength; h >= 62 || int64(1)<<h > MaxNodeBlockAddresses {
			field = "block_prefix_length"
		}
		return invalid(field, "/%d blocks of 2^%d addresses x max_blocks %d are too many: a node's blocks keep a row per address and may hold at most %d (use /%d or longer blocks, or fewer max_blocks)",
			b.PrefixLength, 128-b.PrefixLength, b.MaxBlocks, MaxNodeBlockAddresses, 128-bitsFor(max(MaxNodeBlockAddresses/int64(b.MaxBlocks), 1)))
	}
	return nil
}

// tooManyAddresses tells whether the node's blocks could hold more than
// MaxNodeBlockAddresses: B x max_blocks > cap, judged as max_blocks >
// floor(cap / B), which cannot overflow (B x max_blocks can: a /65 block
// alone has 2^63 addresses).
func (b BlockScaling) tooManyAddresses() bool {
	h := 128 - b.PrefixLength // host bits of a block, 0 to 63
	return h >= 62 || int64(b.MaxBlocks) > MaxNodeBlockAddresses>>h
}

// MaxNodeBlockAddresses caps what one node's blocks may materialize: a row
// per address, like an IPv4 pool (MaxTablePoolSize).
const MaxNodeBlockAddresses = MaxTablePoolSize

// bitsFor is the number of host bits of the largest power of two <= n (n >= 1).
func bitsFor(n int64) int {
	b := 0
	for n > 1 {
		n >>= 1
		b++
	}
	return b
}

// TargetBlocks is the number of blocks for used addresses, computed in one
// step: ceil(mf + used / B), capped at max_blocks, never below one.
func (b BlockScaling) TargetBlocks(used int64) int {
	t := math.Ceil(b.MinFree + float64(used)/float64(b.BatchSize()))
	switch {
	case t < 1:
		return 1
	case t > float64(b.MaxBlocks):
		return b.MaxBlocks
	}
	return int(t)
}

// Surplus reports whether the free addresses exceed Mf x B, the point where
// shrinking starts.
func (b BlockScaling) Surplus(capacity, used int64) bool {
	return float64(capacity-used) > b.MaxFree*float64(b.BatchSize())
}

// NodeBlocks is a node's blocks and their use.
type NodeBlocks struct {
	ClusterID    string
	NodeID       string
	Scaling      BlockScaling
	Blocks       []netip.Prefix
	Capacity     int64
	Used         int64 // active and reserved addresses on the node
	TargetBlocks int
	// Generation moves on each time a create takes the blocks over (see
	// CreateNodeBlocks); a release carrying an older one releases nothing.
	Generation int64
	// Added and Released are what the last Scale changed.
	Added    []netip.Prefix
	Released []netip.Prefix
}

// Free is capacity minus use.
func (n NodeBlocks) Free() int64 { return n.Capacity - n.Used }

// ScaleNodeBlocks stores a node's scaling settings and scales its blocks to
// the target in one step: growth adds every missing block at once; surplus
// blocks are released only when the node has more than Mf x B free, and then
// only blocks that are empty (no active, reserved or cooling address) on two
// consecutive scalings, never the node's last block.
func (s *Client) ScaleNodeBlocks(ctx context.Context, clusterID, nodeID string, sc BlockScaling) (NodeBlocks, error) {
	return s.scaleNodeBlocks(ctx, clusterID, nodeID, sc, false)
}

// CreateNodeBlocks is ScaleNodeBlocks for a configuration that declares the
// node's blocks anew (a Terraform create). Blocks the node has already are
// adopted by the rule of every allocation: only by the actor that created
// them, and only while no Terraform state has confirmed them and they are
// younger than the adoption window (a retried or killed apply finding its
// own work), or while a plan of that actor marks them as being replaced
// (MarkNodeBlocksReplacement). Anything else is an OwnerConflictError (kind
// OwnerNodeBlocks): import them instead. Taking them over moves their
// Generation on.
func (s *Client) CreateNodeBlocks(ctx context.Context, clusterID, nodeID string, sc BlockScaling) (NodeBlocks, error) {
	return s.scaleNodeBlocks(ctx, clusterID, nodeID, sc, true)
}

// ConfirmNodeBlocks records that a Terraform state read the node's blocks
// (a refresh or an import): from then on only that configuration manages
// them, and a create elsewhere is refused.
func (s *Client) ConfirmNodeBlocks(ctx context.Context, clusterID, nodeID string) error {
	if err := checkIDs("cluster_id", clusterID, "node_id", nodeID); err != nil || s.peek {
		return err
	}
	_, err := s.pool.Exec(ctx, sqlConfirmNodeBlocks, clusterID, nodeID)
	return s.mapErr(err)
}

// OwnerNodeBlocks is the owner kind an OwnerConflictError names for a node's
// instance blocks (they are not an allocation, and no event carries it).
const OwnerNodeBlocks = "node_blocks"

// MarkNodeBlocksReplacement records that a plan replaces the node's blocks
// of this actor and generation (the replaced object's): Terraform's create
// half of a replacement. Until ttl has passed, and while nothing else takes
// the blocks over, a create of the same node by this actor takes them over
// (CreateNodeBlocks) instead of failing with owner_conflict; the old
// object's destroy then carries the older generation and releases nothing.
// It returns ErrNotFound when the node has no blocks of this actor and
// generation.
func (s *Client) MarkNodeBlocksReplacement(ctx context.Context, clusterID, nodeID string, generation int64, ttl time.Duration) error {
	if err := checkIDs("cluster_id", clusterID, "node_id", nodeID); err != nil {
		return err
	}
	if ttl <= 0 {
		return invalid("reservation_ttl", "must be positive")
	}
	if generation <= 0 {
		return invalid("generation", "must be the replaced blocks' generation, a positive number")
	}
	tag, err := s.pool.Exec(ctx, sqlMarkNodeBlocksReplacement, clusterID, nodeID, s.actor, durationInterval(ttl), generation)
	if err != nil {
		return s.mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// checkBlocksAdoptable refuses a create of blocks the node has already,
// unless they are the same actor's unconfirmed work or marked as being
// replaced (see CreateNodeBlocks); those it takes over.
func (s *Client) checkBlocksAdoptable(ctx context.Context, tx pgx.Tx, clusterID, nodeID string) error {
	found, err := s.blocksHeldElsewhere(ctx, tx, sqlNodeBlocksOwner, clusterID, nodeID)
	if err != nil || !found {
		return err
	}
	_, err = tx.Exec(ctx, sqlTakeOverNodeBlocks, clusterID, nodeID)
	return err
}

// CheckNodeBlocks tells, without writing, what a create of the node's blocks
// with these settings would refuse (for plan time): settings out of range,
// a block length other than the cluster's, blocks of the node that another
// manager holds (owner_conflict). A cluster that does not exist yet is no
// refusal: the same apply may create it.
func (s *Client) CheckNodeBlocks(ctx context.Context, clusterID, nodeID string, sc BlockScaling) error {
	if err := checkIDs("cluster_id", clusterID, "node_id", nodeID); err != nil {
		return err
	}
	if err := sc.Validate(); err != nil {
		return err
	}
	return s.readTx(ctx, false, func(tx pgx.Tx) error {
		if err := checkBlockLength(ctx, tx, clusterID, sc); err != nil {
			return err
		}
		_, err := s.blocksHeldElsewhere(ctx, tx, sqlNodeBlocksOwnerRead, clusterID, nodeID)
		return err
	})
}

// blocksHeldElsewhere: the node's blocks, if it has some, refused to a create
// (owner_conflict) unless they are the same actor's unconfirmed work or
// marked as being replaced; found says that it has some to take over. owner
// reads who holds them, locking (a create) or not (a plan's check).
func (s *Client) blocksHeldElsewhere(ctx context.Context, tx pgx.Tx, owner, clusterID, nodeID string) (found bool, err error) {
	o, found, err := readBlocksOwner(ctx, tx, owner, clusterID, nodeID)
	if err != nil || !found {
		return false, err
	}
	conflict := &OwnerConflictError{ClusterID: clusterID, OwnerKind: OwnerNodeBlocks, OwnerID: nodeID,
		Address: "instance blocks", Actor: o.actor}
	switch {
	case o.actor != s.actor:
		conflict.Detail = fmt.Sprintf("import them into the configuration that should manage them, or release them "+
			"before creating them as actor %q", s.actor)
		return true, conflict
	case o.confirmed && !o.replacing:
		conflict.Detail = fmt.Sprintf("since %s they are managed by a configuration whose refresh has seen them (or that "+
			"made them over %s ago); a node has one set of instance blocks, whatever the actor: declare them in one configuration "+
			"only (import them into this one and remove them from the other, or remove them here)",
			o.created.UTC().Format(time.RFC3339), FormatDuration(AdoptionWindow))
		return true, conflict
	}
	return true, nil
}

func (s *Client) scaleNodeBlocks(ctx context.Context, clusterID, nodeID string, sc BlockScaling, create bool) (NodeBlocks, error) {
	if err := checkIDs("cluster_id", clusterID, "node_id", nodeID); err != nil {
		return NodeBlocks{}, err
	}
	if err := sc.Validate(); err != nil {
		return NodeBlocks{}, err
	}
	var nb NodeBlocks
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := lockNodeForScaling(ctx, tx, clusterID, nodeID, false, func() error {
			if create {
				if err := s.checkBlocksAdoptable(ctx, tx, clusterID, nodeID); err != nil {
					return err
				}
			}
			return saveScaling(ctx, tx, clusterID, nodeID, sc, s.actor)
		}); err != nil {
			return err
		}
		var err error
		nb, err = s.scaleTx(ctx, tx, clusterID, nodeID, 0, 0)
		return err
	})
	return nb, err
}

// RescaleNodeBlocks runs the scaling again with the stored settings (for
// ipamctl scale); ErrNotFound when the node has no blocks.
func (s *Client) RescaleNodeBlocks(ctx context.Context, clusterID, nodeID string) (NodeBlocks, error) {
	var nb NodeBlocks
	if err := checkIDs("cluster_id", clusterID, "node_id", nodeID); err != nil {
		return nb, err
	}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := lockScaledNode(ctx, tx, clusterID, nodeID, false); err != nil {
			return err
		}
		var err error
		nb, err = s.scaleTx(ctx, tx, clusterID, nodeID, 0, 0)
		return err
	})
	return nb, err
}

// NodesWithBlocks lists the nodes of a cluster (all clusters when empty) that have blocks.
func (s *Client) NodesWithBlocks(ctx context.Context, clusterID string) ([][2]string, error) {
	if err := checkFilterIDs("cluster_id", clusterID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sqlNodesWithBlocks, clusterID)
	if err != nil {
		return nil, s.mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var x [2]string
		return x, r.Scan(&x[0], &x[1])
	})
	return out, s.mapErr(err)
}

// checkBlockLength: every node of a cluster uses the block length of the
// cluster's first blocks.
func checkBlockLength(ctx context.Context, tx pgx.Tx, clusterID string, sc BlockScaling) error {
	var cur int
	err := tx.QueryRow(ctx, sqlBlockLength, clusterID).Scan(&cur)
	if err == nil && cur != sc.PrefixLength {
		return invalid("block_prefix_length", "cluster %q carves /%d blocks; every node of a cluster uses the same block length", clusterID, cur)
	} else if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return nil
}

func saveScaling(ctx context.Context, tx pgx.Tx, clusterID, nodeID string, sc BlockScaling, actor string) error {
	if err := checkBlockLength(ctx, tx, clusterID, sc); err != nil {
		return err
	}
	// KEY SHARE: a cluster destroy in flight commits first (and then the
	// cluster is gone), and none starts until the settings are written.
	var exists bool
	if err := tx.QueryRow(ctx, sqlClusterExistsKeyShare, clusterID).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return invalid("cluster_id", "cluster %q does not exist", clusterID)
	}
	_, err := tx.Exec(ctx, sqlSaveNodeScaling.sql, params{
		"cluster": clusterID, "node": nodeID, "block_prefix_length": sc.PrefixLength, "min_free_fraction": sc.MinFree,
		"max_free_fraction": sc.MaxFree, "max_blocks": sc.MaxBlocks, "demand": sc.Demand, "actor": actor,
	})
	return err
}

// lockNodeForScaling takes, in the locking order, what a scaling or block
// release needs: the cluster row FOR SHARE (a cluster update, which takes it
// FOR NO KEY UPDATE, cannot run meanwhile, so the node pool is written with
// the settings in force), then the node pool's row, then the node's scaling
// row (lockRow: read or written FOR UPDATE), which serializes the scalings
// of one node.
//
// The pool's row is taken FOR UPDATE (allocations on the node in flight,
// which hold it FOR KEY SHARE, commit first) by what may take blocks away:
// a release, a scaling. A growth (grow) only adds blocks, which strands no
// allocation, so it takes the row FOR NO KEY UPDATE: it waits for another
// growth, scaling or release of the node but not for the allocations in
// flight there, one of which may be in the growing transaction's own caller
// (a placement transaction that placed an instance on the node before it
// found the node full), or in another's that waits for this growth.
//
// A node's first scaling creates its block pool. When one committed after
// the pool's lock here found nothing, the pool is unlocked and allocations
// from it are free to run: the transaction runs again (errRetry), and its
// pool lock finds the pool.
func lockNodeForScaling(ctx context.Context, tx pgx.Tx, clusterID, nodeID string, grow bool, lockRow func() error) error {
	if _, err := tx.Exec(ctx, sqlLockClusterShare, clusterID); err != nil {
		return err
	}
	poolID := NodeBlocksPool(clusterID, nodeID).ID()
	lockPool := sqlLockPoolsByID
	if grow {
		lockPool = sqlLockPoolForGrowth
	}
	locked, err := lockPoolsExclusive(ctx, tx, lockPool, poolID)
	if err != nil {
		return err
	}
	if err := lockRow(); err != nil {
		return err
	}
	if len(locked) > 0 {
		return nil
	}
	var exists bool
	if err := tx.QueryRow(ctx, sqlPoolExists, poolID).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return errRetry
	}
	return nil
}

// lockScaledNode is lockNodeForScaling for a node whose settings exist
// (a rescale, a growth): ErrNotFound when they do not.
func lockScaledNode(ctx context.Context, tx pgx.Tx, clusterID, nodeID string, grow bool) error {
	return lockNodeForScaling(ctx, tx, clusterID, nodeID, grow, func() error {
		_, err := loadScaling(ctx, tx, clusterID, nodeID)
		return err
	})
}

// loadScaling locks and reads a node's settings: the lock serializes the
// scaling of one node (other nodes go on).
func loadScaling(ctx context.Context, tx pgx.Tx, clusterID, nodeID string) (BlockScaling, error) {
	sc, _, err := loadScalingGeneration(ctx, tx, clusterID, nodeID)
	return sc, err
}

// loadScalingGeneration is loadScaling with the blocks' generation.
func loadScalingGeneration(ctx context.Context, tx pgx.Tx, clusterID, nodeID string) (BlockScaling, int64, error) {
	var sc BlockScaling
	var gen int64
	err := tx.QueryRow(ctx, sqlLockNodeScaling, clusterID, nodeID).Scan(
		&sc.PrefixLength, &sc.MinFree, &sc.MaxFree, &sc.MaxBlocks, &sc.Demand, &gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return sc, 0, ErrNotFound
	}
	return sc, gen, err
}

type nodeBlock struct {
	prefix     netip.Prefix
	emptyScans int
}

func activeBlocks(ctx context.Context, tx pgx.Tx, clusterID, nodeID string) ([]nodeBlock, error) {
	rows, err := tx.Query(ctx, sqlActiveBlocks, clusterID, nodeID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (nodeBlock, error) {
		var b nodeBlock
		return b, r.Scan(&b.prefix, &b.emptyScans)
	})
}

// nodeUse counts the addresses in use on a node: active, and reserved holds not yet expired.
// nodeInUse is the refusal to release a node's blocks that instance
// addresses still use: it names them (the first few), so that the operator
// knows whose they are, whether Terraform's or a scheduler's.
func nodeInUse(ctx context.Context, q pgx.Tx, clusterID, nodeID, poolID string, used int64) error {
	who, err := firstFew(ctx, q, used, sqlNodeUsers, poolID)
	if err != nil {
		return err
	}
	addresses := "addresses"
	if used == 1 {
		addresses = "address"
	}
	return &ConflictError{Msg: fmt.Sprintf("node %q still has %d %s in its blocks: %s; release them first "+
		"(destroy their resources, or `ipamctl release --cluster %s --kind KIND --owner ID --reason ...` for one "+
		"placed by another system), then destroy the blocks again",
		nodeID, used, addresses, who, clusterID)}
}

func nodeUse(ctx context.Context, q querier, poolID string) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, sqlNodeUse, poolID).Scan(&n)
	return n, err
}

// scaleTx scales one node in the caller's transaction. minUsed raises the use
// the target is computed from, and minBlocks the target itself: an allocation
// that found the node full asks for room for one more, and for one more block
// at least (its blocks may be full of cooling addresses), up to max_blocks.
func (s *Client) scaleTx(ctx context.Context, tx pgx.Tx, clusterID, nodeID string, minUsed int64, minBlocks int) (NodeBlocks, error) {
	nb := NodeBlocks{ClusterID: clusterID, NodeID: nodeID}
	sc, gen, err := loadScalingGeneration(ctx, tx, clusterID, nodeID)
	if err != nil {
		return nb, err
	}
	nb.Scaling, nb.Generation = sc, gen
	// FOR SHARE: the node pool is written with the cluster settings in force
	// (a cluster update waits, or has committed and is read here).
	var cluster Cluster
	if err := tx.QueryRow(ctx, sqlLoadClusterShare, clusterID).Scan((*scannedCluster)(&cluster)); errors.Is(err, pgx.ErrNoRows) {
		return nb, ErrNotFound
	} else if err != nil {
		return nb, err
	}
	poolID := NodeBlocksPool(clusterID, nodeID).ID()
	blocks, err := activeBlocks(ctx, tx, clusterID, nodeID)
	if err != nil {
		return nb, err
	}
	used, err := nodeUse(ctx, tx, poolID)
	if err != nil {
		return nb, err
	}
	nb.Used = used
	demand := max(used, minUsed)
	if sc.Demand != nil {
		demand = max(*sc.Demand, minUsed)
	}
	nb.TargetBlocks = min(max(sc.TargetBlocks(demand), minBlocks), sc.MaxBlocks)
	B := sc.BatchSize()

	// Grow: every missing block at once.
	for len(blocks) < nb.TargetBlocks {
		b, err := s.takeBlock(ctx, tx, cluster, nodeID, sc.PrefixLength)
		if err != nil {
			return nb, err
		}
		blocks = append(blocks, nodeBlock{prefix: b})
		nb.Added = append(nb.Added, b)
	}

	// Shrink: only past Mf x B free, only empty blocks seen empty twice, never the last.
	capacity := int64(len(blocks)) * B
	if len(blocks) > nb.TargetBlocks && sc.Surplus(capacity, used) {
		keep := blocks[:0:0]
		surplus := len(blocks) - nb.TargetBlocks
		for i := len(blocks) - 1; i >= 0; i-- { // newest first
			b := blocks[i]
			if surplus == 0 || len(blocks)-len(nb.Released) <= 1 {
				keep = append([]nodeBlock{b}, keep...)
				continue
			}
			empty, err := blockEmpty(ctx, tx, poolID, b.prefix)
			if err != nil {
				return nb, err
			}
			scans := 0
			if empty {
				scans = b.emptyScans + 1
			}
			if scans >= 2 {
				if err := releaseBlock(ctx, tx, cluster, poolID, b.prefix, false); err != nil {
					return nb, err
				}
				nb.Released = append(nb.Released, b.prefix)
				surplus--
				continue
			}
			if _, err := tx.Exec(ctx, sqlSetBlockEmptyScans,
				clusterID, b.prefix, scans); err != nil {
				return nb, err
			}
			keep = append([]nodeBlock{b}, keep...)
		}
		blocks = keep
	} else if _, err := tx.Exec(ctx, sqlResetEmptyScans, clusterID, nodeID); err != nil {
		return nb, err
	}

	for _, b := range blocks {
		nb.Blocks = append(nb.Blocks, b.prefix)
	}
	nb.Capacity = int64(len(blocks)) * B
	if len(nb.Added) > 0 || len(nb.Released) > 0 {
		if err := syncNodePool(ctx, tx, cluster, nodeID, nb.Blocks); err != nil {
			return nb, err
		}
		if err := s.insertEvent(ctx, tx, Event{Type: "node.blocks_scaled", ClusterID: clusterID, PoolID: poolID,
			Owner: Owner{Kind: OwnerNode, ID: nodeID, NodeID: nodeID},
			Data: map[string]any{"added": prefixList(nb.Added), "released": prefixList(nb.Released),
				"target_blocks": nb.TargetBlocks, "used": used}}); err != nil {
			return nb, err
		}
	}
	return nb, nil
}

// blockEmpty locks the rows of a block (waiting for allocators in flight) and
// reports whether none is active, reserved or inside its cooldown. The locks
// keep any allocator out of the block until the scaling commits.
func blockEmpty(ctx context.Context, tx pgx.Tx, poolID string, b netip.Prefix) (bool, error) {
	lo, hi := blockBounds(b)
	rows, err := tx.Query(ctx, sqlLockBlockRows, poolID, lo, hi)
	if err != nil {
		return false, err
	}
	empty := true
	for rows.Next() {
		var state string
		var waiting bool
		if err := rows.Scan(&state, &waiting); err != nil {
			rows.Close()
			return false, err
		}
		if state == StateActive || ((state == StateReserved || state == StateCooling) && waiting) {
			empty = false
		}
	}
	return empty, rows.Err()
}

func blockBounds(b netip.Prefix) (netip.Prefix, netip.Prefix) {
	lo := b.Addr()
	hi := add128(lo, 0, uint64(blockSize(b)-1))
	return netip.PrefixFrom(lo, 128), netip.PrefixFrom(hi, 128)
}

// releaseBlock returns a block to the cluster: it cools down for the
// cluster's instance cooldown, and at least until every address in it has
// finished its own cooldown, before another node may get it. Free rows, and
// rows whose cooldown has passed, are deleted. A row still inside its cooldown
// is never deleted: with park it moves, with its cooldown, to the block's
// parked pool (from which nothing allocates) until the block is taken again;
// without park such a block is not released (the caller saw it empty).
// The caller holds the node pool's lock (FOR UPDATE).
func releaseBlock(ctx context.Context, tx pgx.Tx, c Cluster, poolID string, b netip.Prefix, park bool) error {
	lo, hi := blockBounds(b)
	if _, err := tx.Exec(ctx, sqlDeleteReusableBlockRows, poolID, lo, hi); err != nil {
		return err
	}
	var left, active int64
	var until *time.Time
	if err := tx.QueryRow(ctx, sqlBlockRowCounts, poolID, lo, hi).Scan(&left, &active, &until); err != nil {
		return err
	}
	switch {
	case active > 0:
		return &ConflictError{Msg: fmt.Sprintf("block %s still holds %d active instance addresses; release them first", b, active)}
	case left > 0 && !park:
		return errRetry // it was seen empty under the same lock: cannot happen
	case left > 0:
		pp := Pool{ID: parkedPoolID(c.ID, b), ClusterID: c.ID, Name: parkedPrefix + b.String(), Category: CategoryInstance,
			Family: 6, Kind: kindParked, CIDRs: []netip.Prefix{b}, Cooldown: c.InstanceCooldown, Stripes: 1, MTU: c.MTU, Gateway: c.GatewayIPv6}
		if err := insertPool(ctx, tx, pp); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlParkBlockRows, poolID, lo, hi, pp.ID); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, sqlCoolBlock,
		c.ID, b, durationInterval(c.InstanceCooldown), until)
	return err
}

// takeBlock gives a node a block: one it released itself, cooled down or
// not (one that keeps cooling addresses first, then the last released:
// sqlTakeOwnCoolingBlock); else the longest-cooled reusable one; else the
// next fresh one, carved from the end of the instance prefix and skipped if
// the cluster-wide instance pool already handed out any address inside it.
// A released block's
// parked pool goes: the database keeps the cooldowns of its rows as
// tombstones, which the block inherits with their last owners when it joins
// the node's pool (syncNodePool), so an instance placed again on its node
// gets its own cooling address back.
func (s *Client) takeBlock(ctx context.Context, tx pgx.Tx, c Cluster, nodeID string, length int) (netip.Prefix, error) {
	var b netip.Prefix
	err := tx.QueryRow(ctx, sqlTakeOwnCoolingBlock, c.ID, nodeID, length).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		err = tx.QueryRow(ctx, sqlTakeCooledBlock, c.ID, nodeID, length).Scan(&b)
		if err == nil {
			// The block's reusable time is past every parked row's cooldown.
			var cooling int64
			if err := tx.QueryRow(ctx, sqlParkedCooling,
				parkedPoolID(c.ID, b)).Scan(&cooling); err != nil {
				return b, err
			}
			if cooling > 0 {
				return b, errRetry
			}
		}
	}
	if err == nil {
		_, err := tx.Exec(ctx, sqlDeletePool, parkedPoolID(c.ID, b))
		return b, err
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return b, err
	}
	if length < c.InstancePrefix.Bits() {
		return b, invalid("block_prefix_length", "/%d blocks do not fit in the instance prefix %s", length, c.InstancePrefix)
	}
	if length-c.InstancePrefix.Bits() > 62 {
		return b, invalid("block_prefix_length", "/%d blocks are too fine for the instance prefix %s (at most 2^62 blocks); use longer blocks or a smaller instance prefix", length, c.InstancePrefix)
	}
	count, half, floor, err := blocksOf(c.InstancePrefix, length)
	if err != nil {
		return b, err
	}
	instPool, err := loadPool(ctx, tx, InstancePool(c.ID).ID())
	if err != nil {
		return b, err
	}
	var next int64
	err = tx.QueryRow(ctx, sqlBlockCounter, c.ID, length).Scan(&next)
	if err != nil {
		return b, err
	}
	for tries := 0; tries < 1024; tries++ {
		if uint64(next) >= half {
			return b, &ExhaustedError{PoolID: InstancePool(c.ID).ID() + " (node blocks)", Size: int64(half)}
		}
		cand, err := SubPrefix(c.InstancePrefix, length, count-1-uint64(next))
		if err != nil {
			return b, err
		}
		next++
		if err := keepInstanceCounterBelow(ctx, tx, instPool, floor, cand); err != nil {
			return b, err
		}
		lo, hi := blockBounds(cand)
		var taken bool
		if err := tx.QueryRow(ctx, sqlClusterRangeUsed,
			c.ID, lo, hi).Scan(&taken); err != nil {
			return b, err
		}
		if taken {
			continue
		}
		if _, err := tx.Exec(ctx, sqlSetBlockCounter, c.ID, next); err != nil {
			return b, err
		}
		_, err = tx.Exec(ctx, sqlInsertNodeBlock, c.ID, cand, next-1, nodeID)
		return cand, err
	}
	return b, errRetry
}

// blocksOf is how many blocks of length length the instance prefix holds
// (count), how many of them node blocks may take (half), and the lowest of
// those (floor): blocks are carved downward from the end of the instance
// prefix and never take more than its upper half (all of it when one block
// is the whole prefix).
func blocksOf(instance netip.Prefix, length int) (count, half uint64, floor netip.Prefix, err error) {
	n := length - instance.Bits()
	if n < 0 || n > 62 {
		return 0, 0, floor, fmt.Errorf("/%d blocks of %s: not between 0 and 62 bits longer", length, instance)
	}
	count = uint64(1) << n
	half = max(count/2, 1)
	floor, err = SubPrefix(instance, length, count-half)
	return count, half, floor, err
}

// keepInstanceCounterBelow keeps the cluster's instance counter (instPool)
// below a block about to be carved. The counter's top and the pool's size are
// lowered under the blocks' floor (blocksOf) the first time a carve finds
// the counter able to reach its block, or, when the counter has already
// handed out ordinals past the floor, under the first block boundary above
// them (never above the block): the lock this takes on the instance pool
// waits for the allocations in flight there. Later carves, above that top,
// take no lock: a node's growth inside a caller's transaction, which may
// hold an allocation of the cluster's pool, waits for no other
// transaction's allocation from it (two such growths waited for each
// other's).
func keepInstanceCounterBelow(ctx context.Context, tx pgx.Tx, instPool *Pool, floor, block netip.Prefix) error {
	instPoolID := instPool.ID
	ordBlock, ok := instPool.layout.Ordinal(block.Addr())
	if !ok {
		return nil // beyond what the counter can reach
	}
	var top int64
	if err := tx.QueryRow(ctx, sqlCounterTop, instPoolID).Scan(&top); err != nil {
		return err
	}
	if top < ordBlock {
		return nil
	}
	if _, err := lockPoolsExclusive(ctx, tx, sqlLockPoolsByID, instPoolID); err != nil {
		return err
	}
	newTop := ordBlock - 1
	if ordFloor, ok := instPool.layout.Ordinal(floor.Addr()); ok {
		var handed int64 // the ordinals below it may have been handed out
		if err := tx.QueryRow(ctx, sqlCounterNext, instPoolID).Scan(&handed); err != nil {
			return err
		}
		// The instance pool is the one prefix, so an ordinal is an offset
		// in it and a block boundary every 2^bits ordinals from the floor.
		keep := ordFloor
		if bits := 128 - block.Bits(); bits <= 62 && handed > ordFloor {
			size := int64(1) << bits
			keep += (handed - ordFloor + size - 1) / size * size
		}
		newTop = min(newTop, keep-1)
	}
	_, err := tx.Exec(ctx, sqlLowerCounterTop, instPoolID, newTop, instPool.layout.SizeUpTo(newTop))
	return err
}

// syncNodePool makes the node's pool hold exactly its active blocks: created
// with the first block, its rows kept per address (free rows for new blocks).
// The blocks the pool already had in the same places (all of them, for a
// growth, which appends blocks) keep their rows and ordinals: their rows
// are left alone, so that a growth waits for none of the allocations in
// flight there.
func syncNodePool(ctx context.Context, tx pgx.Tx, c Cluster, nodeID string, blocks []netip.Prefix) error {
	p := Pool{ID: NodeBlocksPool(c.ID, nodeID).ID(), ClusterID: c.ID, Name: blocksPrefix + nodeID, Category: CategoryInstance,
		Family: 6, Kind: kindBlocks, CIDRs: blocks, Cooldown: c.InstanceCooldown, Stripes: 1, MTU: c.MTU, Gateway: c.GatewayIPv6}
	if err := p.buildLayout(); err != nil {
		return err
	}
	var had []netip.Prefix
	err := tx.QueryRow(ctx, sqlPoolCIDRs, p.ID).Scan(&had)
	if errors.Is(err, pgx.ErrNoRows) {
		err = insertPool(ctx, tx, p)
	} else if err == nil {
		_, err = tx.Exec(ctx, sqlUpdateNodePool.sql, params{
			"pool": p.ID, "cidrs": p.CIDRs, "size": p.Size, "cooldown": p.Cooldown, "mtu": p.MTU,
			"gateway": netip.PrefixFrom(p.Gateway, 128),
		})
	}
	if err != nil {
		return err
	}
	kept := 0
	for kept < min(len(had), len(blocks)) && had[kept] == blocks[kept] {
		kept++
	}
	added := p
	added.CIDRs = blocks[kept:]
	if err := syncTableRows(ctx, tx, &p, p.layout.BlockFirst(kept)); err != nil {
		return err
	}
	// A new block inherits the tombstones inside it.
	return inheritTombstones(ctx, tx, &added)
}

// GetNodeBlocks reads a node's blocks and use without changing anything; the
// target is what a scaling would aim for now.
func (s *Client) GetNodeBlocks(ctx context.Context, clusterID, nodeID string) (NodeBlocks, error) {
	var nb NodeBlocks
	if err := checkIDs("cluster_id", clusterID, "node_id", nodeID); err != nil {
		return nb, err
	}
	err := s.readTx(ctx, true, func(tx pgx.Tx) error {
		nb = NodeBlocks{ClusterID: clusterID, NodeID: nodeID}
		var err error
		err = tx.QueryRow(ctx, sqlNodeScaling, clusterID, nodeID).Scan(
			&nb.Scaling.PrefixLength, &nb.Scaling.MinFree, &nb.Scaling.MaxFree, &nb.Scaling.MaxBlocks, &nb.Scaling.Demand,
			&nb.Generation)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		blocks, err := activeBlocks(ctx, tx, clusterID, nodeID)
		if err != nil {
			return err
		}
		for _, b := range blocks {
			nb.Blocks = append(nb.Blocks, b.prefix)
		}
		nb.Capacity = int64(len(blocks)) * nb.Scaling.BatchSize()
		if nb.Used, err = nodeUse(ctx, tx, NodeBlocksPool(clusterID, nodeID).ID()); err != nil {
			return err
		}
		demand := nb.Used
		if nb.Scaling.Demand != nil {
			demand = *nb.Scaling.Demand
		}
		nb.TargetBlocks = nb.Scaling.TargetBlocks(demand)
		return nil
	})
	return nb, err
}

// ReleaseNodeBlocks gives all of a node's blocks back (cooling for the
// instance cooldown). Refused while any instance address on the node is
// active or reserved.
func (s *Client) ReleaseNodeBlocks(ctx context.Context, clusterID, nodeID string) error {
	_, err := s.ReleaseNodeBlocksAt(ctx, clusterID, nodeID, 0)
	return err
}

// ReleaseNodeBlocksAt is ReleaseNodeBlocks carrying the blocks' generation
// a state read (NodeBlocks.Generation; 0: whatever it is now): when the
// blocks' generation has moved on (the create half of a replacement took
// them over), it releases nothing and returns false, as a stale release of
// an address does. Blocks that instances still use, marked at that
// generation by this actor's plan of a replacement
// (MarkNodeBlocksReplacement), are not refused either: the destroy half of
// a destroy-first replacement releases nothing, and the create half takes
// them over with their instances.
func (s *Client) ReleaseNodeBlocksAt(ctx context.Context, clusterID, nodeID string, generation int64) (bool, error) {
	if err := checkIDs("cluster_id", clusterID, "node_id", nodeID); err != nil {
		return false, err
	}
	if generation < 0 {
		return false, invalid("generation", "must be the blocks' generation (a positive number) or 0")
	}
	released := false
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		released = false
		poolID := NodeBlocksPool(clusterID, nodeID).ID()
		// Instance allocations on the node in flight commit before the use
		// below is counted.
		var gen int64
		if err := lockNodeForScaling(ctx, tx, clusterID, nodeID, false, func() error {
			var err error
			_, gen, err = loadScalingGeneration(ctx, tx, clusterID, nodeID)
			return err
		}); err != nil {
			return err
		}
		if generation > 0 && gen != generation {
			return nil
		}
		used, err := nodeUse(ctx, tx, poolID)
		if err != nil {
			return err
		}
		if used > 0 {
			// The destroy half of a destroy-first replacement, planned by
			// this actor at this generation: the blocks stay, with their
			// instances, for the create half to take over (the mark says
			// it comes). Nothing is released, as for a stale destroy.
			if generation > 0 {
				if replacing, err := s.blocksMarkedForReplacement(ctx, tx, clusterID, nodeID); err != nil || replacing {
					return err
				}
			}
			return nodeInUse(ctx, tx, clusterID, nodeID, poolID, used)
		}
		cluster, err := scanCluster(tx.QueryRow(ctx, sqlLoadCluster, clusterID))
		if err != nil {
			return err
		}
		blocks, err := activeBlocks(ctx, tx, clusterID, nodeID)
		if err != nil {
			return err
		}
		var gone []netip.Prefix
		for _, b := range blocks {
			if err := releaseBlock(ctx, tx, cluster, poolID, b.prefix, true); err != nil {
				return err
			}
			gone = append(gone, b.prefix)
		}
		// Every row still inside its cooldown was parked with its block; what
		// is left of the pool has none.
		if _, err := tx.Exec(ctx, sqlDeletePool, poolID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlDeleteNodeScaling, clusterID, nodeID); err != nil {
			return err
		}
		released = true
		return s.insertEvent(ctx, tx, Event{Type: "node.blocks_released", ClusterID: clusterID, PoolID: poolID,
			Owner: Owner{Kind: OwnerNode, ID: nodeID, NodeID: nodeID},
			Data:  map[string]any{"released": prefixList(gone)}})
	})
	return released, err
}

// blocksMarkedForReplacement: the plan of a replacement of the node's
// blocks by this actor marked them (MarkNodeBlocksReplacement), and the
// mark has not expired or been spent.
func (s *Client) blocksMarkedForReplacement(ctx context.Context, tx pgx.Tx, clusterID, nodeID string) (bool, error) {
	o, _, err := readBlocksOwner(ctx, tx, sqlNodeBlocksOwnerRead, clusterID, nodeID)
	return o.replacing && o.actor == s.actor, err
}

// blocksOwner is who holds a node's blocks (sqlNodeBlocksOwner).
type blocksOwner struct {
	actor                string
	created              time.Time
	confirmed, replacing bool
}

// readBlocksOwner reads who holds a node's blocks with query (the locking
// sqlNodeBlocksOwner or sqlNodeBlocksOwnerRead); found is false when the
// node has none.
func readBlocksOwner(ctx context.Context, tx pgx.Tx, query, clusterID, nodeID string) (o blocksOwner, found bool, err error) {
	err = tx.QueryRow(ctx, query, clusterID, nodeID).Scan(&o.actor, &o.created, &o.confirmed, &o.replacing)
	if errors.Is(err, pgx.ErrNoRows) {
		return blocksOwner{}, false, nil
	}
	return o, err == nil, err
}

// instancePool is the pool an instance draws from: its node's blocks when the
// node has any, else the cluster's instance pool.
func instancePool(ctx context.Context, tx pgx.Tx, clusterID, nodeID string) (*Pool, error) {
	if nodeID != "" {
		p, err := loadPool(ctx, tx, NodeBlocksPool(clusterID, nodeID).ID())
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	p, err := loadPool(ctx, tx, InstancePool(clusterID).ID())
	if errors.Is(err, ErrNotFound) {
		return nil, &InvalidError{Field: "cluster_id", Msg: fmt.Sprintf("cluster %q does not exist", clusterID), Err: ErrPoolNotFound}
	}
	return p, err
}

// plannedInstancePool is the pool an instance allocation or hold uses: the
// pool of the owner's live plan-time hold of this actor (for the address
// asked for, if any), so that what a plan showed is what its apply gets even
// when the node's blocks were created in between (by the same apply); else
// the pool the node resolves to now (instancePool). An instance left outside
// its node's blocks that way is moved into them by the next plan.
func (s *Client) plannedInstancePool(ctx context.Context, tx pgx.Tx, clusterID string, o Owner, addr netip.Addr) (*Pool, error) {
	held, _, err := s.ownerRows(ctx, tx, clusterID, o)
	if err != nil {
		return nil, err
	}
	if held != nil && held.State == StateReserved && held.Actor == s.actor && !held.HoldExpired &&
		(!addr.IsValid() || addr == held.Address) {
		if p, err := loadPool(ctx, tx, held.PoolID); err == nil {
			return p, nil
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	return instancePool(ctx, tx, clusterID, o.NodeID)
}

// InstancePoolID names the pool an instance on nodeID draws from now.
func (s *Client) InstancePoolID(ctx context.Context, clusterID, nodeID string) (string, error) {
	var id string
	if err := checkIDs("cluster_id", clusterID); err != nil {
		return id, err
	}
	if err := checkFilterIDs("node_id", nodeID); err != nil {
		return id, err
	}
	err := s.readTx(ctx, true, func(tx pgx.Tx) error {
		p, err := instancePool(ctx, tx, clusterID, nodeID)
		if err == nil {
			id = p.ID
		}
		return err
	})
	return id, err
}

// PreviewNodeBlocks tells, without writing, what a scaling with settings sc
// would aim for, and whether it would change anything now: add blocks, or
// look at (and eventually release) empty surplus blocks.
func (s *Client) PreviewNodeBlocks(ctx context.Context, clusterID, nodeID string, sc BlockScaling) (NodeBlocks, bool, error) {
	if err := sc.Validate(); err != nil {
		return NodeBlocks{}, false, err
	}
	nb, err := s.GetNodeBlocks(ctx, clusterID, nodeID)
	if err != nil {
		return nb, false, err
	}
	nb.Scaling = sc
	demand := nb.Used
	if sc.Demand != nil {
		demand = *sc.Demand
	}
	nb.TargetBlocks = sc.TargetBlocks(demand)
	switch {
	case len(nb.Blocks) < nb.TargetBlocks:
		return nb, true, nil
	case len(nb.Blocks) == nb.TargetBlocks || !sc.Surplus(nb.Capacity, nb.Used):
		return nb, false, nil
	}
	change := false
	err = s.readTx(ctx, true, func(tx pgx.Tx) error {
		poolID := NodeBlocksPool(clusterID, nodeID).ID()
		for i := len(nb.Blocks) - 1; i >= 1 && i >= nb.TargetBlocks; i-- {
			lo, hi := blockBounds(nb.Blocks[i])
			var busy bool
			if err := tx.QueryRow(ctx, sqlBlockBusy, poolID, lo, hi).Scan(&busy); err != nil {
				return err
			}
			if !busy {
				change = true
				return nil
			}
		}
		return nil
	})
	return nb, change, err
}
