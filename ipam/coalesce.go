package ipam

import (
	"context"
	"sync"

	"github.com/google/uuid"
)

// Concurrent fresh allocations from one pool share a statement.
//
// A one-statement allocation costs the server about as much in what every
// statement pays (its executor's start and end over a plan of some forty
// nodes, the pool guard and its lock, the stripe pick and advance, the
// commit) as in the rows it writes. So when a client already has
// coalesceRunning fresh allocations of a pool in flight, the next callers of
// that pool wait for one of them to end and then go together, as one
// statement (fastFreshBatchSQL) with one stripe advance and one commit. A
// caller alone, or among few, runs its own statement as before and waits for
// nobody.
//
// Every guarantee is the single statement's, per owner: each owner is probed
// (it must hold nothing, its node no blocks), the ordinals are consecutive in
// one stripe (as if its advances had come one after another), the unique
// constraints decide against every other writer, each row's event and the
// pool's count are in the same statement, and the caller learns of its
// address only after the commit. The shared fate is all or nothing: when the
// statement fails, nothing of it is written, and every caller in it goes on
// to the full path alone, which decides as it would have without the batch.
// An owner that was not served (it holds something, its node has blocks, or
// no stripe has room for the whole batch) goes on to the full path too. A
// batch never holds one owner twice.
//
// A caller whose context ends while it waits leaves the batch if the batch
// has not started; once started, its allocation may commit after it has
// gone, as a single statement interrupted mid-flight may, and its retry
// adopts it (an owner's allocation is idempotent).
type coalescer struct {
	mu    sync.Mutex
	pools map[string]*poolQueue
}

// coalesceRunning is how many statements of one pool a client runs at once
// before callers wait to share one; coalesceMax bounds the owners of one
// statement.
const (
	coalesceRunning = 2
	coalesceMax     = 64
)

type poolQueue struct {
	running int
	next    *freshBatch // gathering: starts when a running statement ends
}

type freshBatch struct {
	reqs   []*freshReq
	owners map[string]bool
}

// freshReq is one caller's fresh allocation: its arguments as fastTake
// numbers them for fastFreshSQL, and where its outcome goes.
type freshReq struct {
	args []any
	done chan freshDone
}

type freshDone struct {
	res AllocateResult
	ok  bool
	err error
}

// shareFresh runs a fresh allocation of owner o from the pool named key, on
// its own or in a shared statement (above). false means "use the full path".
func (s *Client) shareFresh(ctx context.Context, key string, o Owner, args []any) (AllocateResult, bool, error) {
	c := s.fresh
	c.mu.Lock()
	q := c.pools[key]
	if q == nil {
		q = &poolQueue{}
		c.pools[key] = q
	}
	if q.running < coalesceRunning {
		q.running++
		c.mu.Unlock()
		res, ok, err := s.runOne(ctx, fastFreshSQL, args...)
		s.ended(key, q)
		return res, ok, err
	}
	ownerKey := o.Kind + "\x00" + o.ID
	b := q.next
	if b == nil {
		b = &freshBatch{owners: map[string]bool{}}
		q.next = b
	}
	if len(b.reqs) >= coalesceMax || b.owners[ownerKey] {
		c.mu.Unlock()
		return s.runOne(ctx, fastFreshSQL, args...)
	}
	r := &freshReq{args: args, done: make(chan freshDone, 1)}
	b.reqs = append(b.reqs, r)
	b.owners[ownerKey] = true
	c.mu.Unlock()
	select {
	case d := <-r.done:
		return d.res, d.ok, d.err
	case <-ctx.Done():
		c.mu.Lock()
		if q.next == b { // not started: leave it
			for i, x := range b.reqs {
				if x == r {
					b.reqs = append(b.reqs[:i], b.reqs[i+1:]...)
					break
				}
			}
			delete(b.owners, ownerKey)
		}
		c.mu.Unlock()
		return AllocateResult{}, false, nil // the full path names the context's end
	}
}

// ended is called when a statement of the pool ends: the batch gathered
// meanwhile starts in its place.
func (s *Client) ended(key string, q *poolQueue) {
	c := s.fresh
	c.mu.Lock()
	b := q.next
	q.next = nil
	if b == nil || len(b.reqs) == 0 {
		q.running--
		if q.running == 0 && q.next == nil {
			delete(c.pools, key)
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	go func() {
		s.runFresh(b)
		s.ended(key, q)
	}()
}

// runFresh runs a gathered batch and tells each caller its outcome. It runs
// on none of its callers' contexts, so that one caller's end does not fail
// the others; the store's bounds on waits and statements bound it.
func (s *Client) runFresh(b *freshBatch) {
	ctx := context.Background()
	if len(b.reqs) == 1 {
		res, ok, err := s.runOne(ctx, fastFreshSQL, b.reqs[0].args...)
		b.reqs[0].done <- freshDone{res, ok, err}
		return
	}
	// fastFreshSQL's arguments: $1 cluster, $2 pool, $3 kind, $4 id, $5 org,
	// $6 env, $7 node, $8 instance, $9 actor, $10 hold, $11 set, $12 event
	// id, $13 event type, $14 blocks to avoid, $15 row id.
	first := b.reqs[0].args
	var ids []string
	var orgs, envs, nodes, insts, avoid []*string
	var events, rows []uuid.UUID
	byRow := make(map[uuid.UUID]*freshReq, len(b.reqs))
	for _, r := range b.reqs {
		a := r.args
		ids = append(ids, a[3].(string))
		orgs, envs = append(orgs, a[4].(*string)), append(envs, a[5].(*string))
		nodes, insts = append(nodes, a[6].(*string)), append(insts, a[7].(*string))
		events, avoid, rows = append(events, a[11].(uuid.UUID)), append(avoid, a[13].(*string)), append(rows, a[14].(uuid.UUID))
		byRow[a[14].(uuid.UUID)] = r
	}
	got, err := s.runMany(ctx, fastFreshBatchSQL, first[0], first[1], first[2], first[8], first[12],
		ids, orgs, envs, nodes, insts, avoid, events, rows)
	served := map[*freshReq]bool{}
	for _, res := range got {
		if r := byRow[res.Allocation.ID]; r != nil && !served[r] {
			served[r] = true
			r.done <- freshDone{res, true, nil}
		}
	}
	for _, r := range b.reqs {
		if !served[r] {
			d := freshDone{}
			if err != nil {
				if me := s.mapErr(err); Code(me) == CodeBusy || Code(me) == CodeTimeout {
					d.err = me
				}
			}
			r.done <- d
		}
	}
}
