package engine

import (
	"net/netip"
	"sync"
	"time"

	"github.com/google/uuid"
)

// take is one owner's part of a one-statement take.
type take struct {
	owner      Owner
	avoid      label // a fresh take's: the node's blocks pool, or none
	event, row uuid.UUID
}

// takeShared is what the owners of one take statement share: the kind of
// take (fresh: takeFreshSQL, else takeReuseSQL), the pool, the owners' kind,
// the event's type, the hold (> 0: plan-time holds) and the address set.
type takeShared struct {
	fresh                          bool
	cluster, pool, kind, eventType string
	hold                           time.Duration
	set                            string
}

// queue names the queue of the takes that may share a statement with this
// one (share): one per pool, owner kind and hold, so that allocations and
// plan-time holds queue apart; "" for a member of an address set, which
// never shares.
func (sh takeShared) queue() string {
	if sh.set != "" {
		return ""
	}
	return sh.pool + "\x00" + sh.kind + "\x00" + sh.hold.String()
}

// Concurrent allocations from one pool share a statement.
//
// A one-statement allocation costs the server about as much in what every
// statement pays (its executor's start and end over a plan of some forty
// nodes, the pool guard and its lock, the stripe pick and advance or the
// slot and the reuse mark, the commit) as in the rows it writes. So when a
// client already has coalesceRunning allocations of a pool in flight, the
// next callers of that pool wait for one of them to end and then go together,
// as one statement (takeFreshSQL in a counter pool, takeReuseSQL in an IPv4
// table pool, each the statement of a single owner too) with one commit. A caller alone, or among few, runs its
// own statement as before and waits for nobody. Plan-time holds share the
// same way, each owner's first look (findHold: its hold, its lost hold) going
// in the shared batch before the take, so that a plan of many new addresses
// holds them a batch per round trip and commit. Concurrent confirms of holds
// (an apply's creates) share a round trip and a commit too: each is its own
// confirmHoldSQL, the statements one after another in one batch, which is one
// implicit transaction (runConfirms). Members of address sets and
// allocations in a caller's transaction never share.
//
// Every guarantee is the single statement's, per owner: each owner is probed
// (it must hold nothing, its node no blocks); in a counter pool the owners
// take the lowest free ordinals the statement can lock, as the single
// statement takes its one: the next ordinal of n stripes, the n unlocked ones
// lowest as the statement's snapshot sees them and not advanced since (only
// a batch of more owners than stripes free advances a stripe twice), so
// that owners allocated at once get consecutive addresses when nothing else
// allocates from the pool; in a table pool the rows are the next reusable
// ones from the mark on; the unique constraints decide against every other
// writer, each row's event and the pool's count are in the same statement,
// and the caller learns of its address only after the commit. The shared
// fate is all or nothing: when the statement fails, nothing of it is
// written, and every caller in it goes on to the full path alone, which
// decides as it would have without the batch. An owner that was not served
// (it holds something, its node has blocks, its stripe has no room for its
// advance, fewer rows are reusable than owners, or a row picked is another
// owner's expired hold) goes on to the full path too. A batch never holds
// one owner twice.
//
// A caller whose context ends while it waits leaves the batch if the batch
// has not started; once started, its allocation may commit after it has
// gone, as a single statement interrupted mid-flight may, and its retry
// adopts it (an owner's allocation is idempotent).
type coalescer struct {
	mu    sync.Mutex
	pools map[string]*poolQueue
}

// coalesceRunning is how many statements of one pool (and owner kind) a
// client runs at once before callers wait to share one (at 4 clients, 2
// kept the single statements' rate where 1 lost a sixth of it; at 16 both
// tripled it); coalesceMax bounds the owners of one statement.
const (
	coalesceRunning = 2
	coalesceMax     = 64
)

type poolQueue struct {
	running int
	next    *takeBatch // gathering: starts when a running statement ends
}

type takeBatch struct {
	sh     takeShared
	reqs   []*takeReq
	owners map[string]bool
}

// takeReq is one caller's allocation, and where its outcome goes. A
// plan-time hold carries its first look (findHold), which its batch runs
// before the take and fills in; the confirm of a hold (fastConfirm) carries
// its statement's parameters instead of a take.
type takeReq struct {
	t       take
	sh      takeShared
	look    *holdLook
	confirm params
	done    chan takeDone
}

// holdLook is one owner's first look of Reserve: the parameters of its hold
// look (sqlFindHold) and lost-hold look (sqlLostHold), its take, and what
// they found (runLooks).
type holdLook struct {
	find params
	lost []any
	t    take

	a        Allocation
	fresh    bool
	cidrs    []netip.Prefix
	ferr     error
	lostHold *LostHold
	taken    *AllocateResult
}

type takeDone struct {
	res AllocateResult
	ok  bool
	err error
}
