package engine

import (
	"context"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// AlertThreshold is the utilization at or above which a pool or category is
// reported with Alert set (and the Prometheus alert fires).
const AlertThreshold = 0.8

// FailureWindow is how far back usage counts allocation failures.
const FailureWindow = 24 * time.Hour

// UsageCategories are reported for every cluster, even with no pool in them;
// the operator category ipv6 is reported only when the cluster has such a pool.
var UsageCategories = []string{CategoryNode, CategoryInstance, CategoryIPv4}

// CooldownQueue is what a pool holds back: released addresses still inside
// their cooldown, and when the first of them becomes reusable.
type CooldownQueue struct {
	Count int64 `json:"count"`
	// NextReusableAt is nil when nothing is cooling.
	NextReusableAt *time.Time `json:"next_reusable_at"`
}

// UsageCounts are the figures of one pool, or of all pools of a category.
//
// Reserved counts plan-time holds that have not expired; Cooling counts
// released addresses inside their cooldown. A reserved hold past its expiry
// and a cooling address past its cooldown are free: the allocator takes them.
// Free is Size - Active - Reserved - Cooling. Utilization is the share of the
// pool that cannot be handed out now, (Active + Reserved + Cooling) / Size,
// because that is what runs a pool into ipam_exhausted.
type UsageCounts struct {
	Size          int64         `json:"size"`
	Active        int64         `json:"active"`
	Reserved      int64         `json:"reserved"`
	Cooling       int64         `json:"cooling"`
	Free          int64         `json:"free"`
	Utilization   float64       `json:"utilization"`
	CooldownQueue CooldownQueue `json:"cooldown_queue"`
	// Failures counts failed allocations of the last FailureWindow, by reason
	// (the error code, e.g. ipam_exhausted).
	Failures map[string]int64 `json:"allocation_failures"`
	Alert    bool             `json:"alert"`
}

// PoolUsage is the usage of one pool.
type PoolUsage struct {
	ClusterID string `json:"cluster_id"`
	PoolID    string `json:"pool_id"`
	Name      string `json:"name"`
	Category  string `json:"category"`
	Family    int    `json:"family"`
	Kind      string `json:"kind"`
	UsageCounts
}

// CategoryUsage sums the pools of one category of a cluster.
type CategoryUsage struct {
	ClusterID string `json:"cluster_id"`
	Category  string `json:"category"`
	Pools     int    `json:"pools"`
	UsageCounts
}

// ClusterUsage is the usage of a cluster, per category and per pool.
type ClusterUsage struct {
	ClusterID  string          `json:"cluster_id"`
	At         time.Time       `json:"at"`
	Categories []CategoryUsage `json:"categories"`
	Pools      []PoolUsage     `json:"pools"`
	// Tombstones counts the addresses that destroyed pools of the cluster
	// left inside their cooldown (no pool counts them: a pool created
	// over one inherits it), and NextReusableAt the first to cool.
	Tombstones CooldownQueue `json:"tombstones"`
}

// PoolUsage reports the usage of one cluster. It fails with ErrNotFound when
// the cluster does not exist.
func (o *Operator) PoolUsage(ctx context.Context, clusterID string) (ClusterUsage, error) {
	s := o.c
	if err := checkIDs("cluster_id", clusterID); err != nil {
		return ClusterUsage{}, err
	}
	all, err := s.usage(ctx, clusterID)
	if err != nil {
		return ClusterUsage{}, err
	}
	if len(all) == 0 {
		return ClusterUsage{}, ErrNotFound
	}
	return all[0], nil
}

// AllUsage reports the usage of every cluster, ordered by cluster id.
func (o *Operator) AllUsage(ctx context.Context) ([]ClusterUsage, error) {
	s := o.c
	return s.usage(ctx, "")
}

func (s *Client) usage(ctx context.Context, clusterID string) ([]ClusterUsage, error) {
	var pools []PoolUsage
	var at time.Time
	var buried map[string]CooldownQueue
	// One snapshot for the pools' counts and the tombstones: read apart, a
	// pool destroyed between them counted its cooling addresses twice.
	err := s.readTx(ctx, true, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, usagePlannerSetting); err != nil {
			return err
		}
		var err error
		if buried, err = countTombstones(ctx, tx, clusterID); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, usagePoolsSQL, clusterID)
		if err != nil {
			return err
		}
		pools, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (PoolUsage, error) {
			var p PoolUsage
			var next *time.Time
			err := r.Scan(&p.ClusterID, &p.PoolID, &p.Name, &p.Category, &p.Family, &p.Kind, &p.Size,
				&p.Active, &p.Reserved, &p.Cooling, &next, &at)
			p.CooldownQueue = CooldownQueue{Count: p.Cooling, NextReusableAt: utcPtr(next)}
			p.Failures = map[string]int64{}
			return p, err
		})
		if err != nil || len(pools) == 0 {
			return err
		}
		ids := make([]string, len(pools))
		byID := make(map[string]*PoolUsage, len(pools))
		for i := range pools {
			ids[i] = pools[i].PoolID
			byID[pools[i].PoolID] = &pools[i]
		}
		rows, err = tx.Query(ctx, usageFailuresSQL, ids, durationInterval(FailureWindow))
		if err != nil {
			return err
		}
		var poolID, reason string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&poolID, &reason, &n}, func() error {
			if p := byID[poolID]; p != nil {
				p.Failures[reason] += n
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if clusterID != "" && len(pools) == 0 {
		if _, err := s.GetCluster(ctx, clusterID); err != nil {
			return nil, err // not_found names the cluster
		}
		out := []ClusterUsage{summarize(clusterID, at, nil)}
		out[0].Tombstones = buried[clusterID]
		return out, nil
	}
	var out []ClusterUsage
	for i := 0; i < len(pools); {
		j := i
		for j < len(pools) && pools[j].ClusterID == pools[i].ClusterID {
			pools[j].finish()
			j++
		}
		cu := summarize(pools[i].ClusterID, at, pools[i:j])
		cu.Tombstones = buried[cu.ClusterID]
		out = append(out, cu)
		i = j
	}
	return out, nil
}

// countTombstones reads each cluster's tombstones (clusterID: its own; "":
// every cluster's).
func countTombstones(ctx context.Context, tx pgx.Tx, clusterID string) (map[string]CooldownQueue, error) {
	rows, err := tx.Query(ctx, sqlUsageTombstones, clusterID)
	if err != nil {
		return nil, err
	}
	out := map[string]CooldownQueue{}
	var id string
	var n int64
	var next *time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &n, &next}, func() error {
		out[id] = CooldownQueue{Count: n, NextReusableAt: utcPtr(next)}
		return nil
	})
	return out, err
}

// summarize builds a cluster's usage from its pools, adding up the categories.
func summarize(clusterID string, at time.Time, pools []PoolUsage) ClusterUsage {
	cu := ClusterUsage{ClusterID: clusterID, At: at.UTC(), Pools: pools}
	if cu.Pools == nil {
		cu.Pools = []PoolUsage{}
	}
	cats := map[string]*CategoryUsage{}
	newCategory := func(name string) *CategoryUsage {
		c := &CategoryUsage{ClusterID: clusterID, Category: name, UsageCounts: UsageCounts{Failures: map[string]int64{}}}
		cats[name] = c
		return c
	}
	for _, c := range UsageCategories {
		newCategory(c)
	}
	var extra []string
	for _, p := range pools {
		c := cats[p.Category]
		if c == nil {
			c = newCategory(p.Category)
			extra = append(extra, p.Category)
		}
		c.Pools++
		c.Size = satAdd(c.Size, p.Size)
		c.Active += p.Active
		c.Reserved += p.Reserved
		c.Cooling += p.Cooling
		c.Free = satAdd(c.Free, p.Free)
		if n := p.CooldownQueue.NextReusableAt; n != nil && (c.CooldownQueue.NextReusableAt == nil || n.Before(*c.CooldownQueue.NextReusableAt)) {
			c.CooldownQueue.NextReusableAt = n
		}
		for r, n := range p.Failures {
			c.Failures[r] += n
		}
	}
	sort.Strings(extra)
	for _, name := range append(slices.Clone(UsageCategories), extra...) {
		c := cats[name]
		c.CooldownQueue.Count = c.Cooling
		c.Utilization, c.Alert = utilization(c.Size, c.Active+c.Reserved+c.Cooling)
		cu.Categories = append(cu.Categories, *c)
	}
	return cu
}

func (p *PoolUsage) finish() {
	p.Free = max(0, p.Size-p.Active-p.Reserved-p.Cooling)
	p.Utilization, p.Alert = utilization(p.Size, p.Active+p.Reserved+p.Cooling)
}

func utilization(size, used int64) (float64, bool) {
	if size <= 0 {
		return 0, false
	}
	u := min(1, float64(used)/float64(size))
	return u, u >= AlertThreshold
}

// satAdd adds two non-negative sizes, saturating: several IPv6 pools of a /64
// each add up to more than an int64 holds.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// DatabaseNow is the database's clock, the only clock of cooldowns.
func (o *Operator) DatabaseNow(ctx context.Context) (time.Time, error) {
	s := o.c
	var t time.Time
	err := s.pool.QueryRow(ctx, sqlNow).Scan(&t)
	return t.UTC(), s.mapErr(err)
}
