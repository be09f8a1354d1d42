package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The fast paths run the one-statement forms of an allocation
// (takeFreshSQL, takeReuseSQL and confirmHoldSQL in handout.go).

// fastAllocate tries Allocate's fast paths: a fresh address (in an IPv4 table
// pool, the longest-cooled reusable one) in one statement, or the plan's hold
// on the exact address confirmed in one statement. false means "use the full
// path". In a caller's transaction the statement runs inside it, in a
// savepoint (runOneInTx).
func (s *Client) fastAllocate(ctx context.Context, req request) (AllocateResult, bool, error) {
	if s.paths.fastOff.Load() {
		return AllocateResult{}, false, nil
	}
	if !req.Address.IsValid() {
		return s.fastTake(ctx, req, 0)
	}
	return s.fastConfirm(ctx, req)
}

// fastTake is the fast path of Allocate (hold = 0) and of Reserve (hold > 0:
// the row becomes a plan-time hold), in the pool the request names or the
// owner's kind gives: a take of one owner by takeFreshOneSQL, or in an IPv4
// table pool takeReuseOneSQL. An instance whose node has blocks
// draws from them: the statement hands over when they exist.
func (s *Client) fastTake(ctx context.Context, req request, hold time.Duration) (AllocateResult, bool, error) {
	sh, t, ok := s.takeOf(req, hold)
	if !ok {
		return AllocateResult{}, false, nil
	}
	if q := sh.queue(); s.outer == nil && hold == 0 && q != "" {
		// A standalone allocation: it may share a statement (shareTake).
		return s.shareTake(ctx, q, sh, t)
	}
	sql, args := s.takeStatement(sh, []take{t})
	return s.runOne(ctx, sql, args...)
}

// takeOf is the one-statement take of the request (hold > 0: a plan-time
// hold) in the pool it names or its owner's kind gives; false when the fast
// path cannot serve it.
func (s *Client) takeOf(req request, hold time.Duration) (takeShared, take, bool) {
	pool := req.own
	if !pool.valid() || s.paths.fastOff.Load() {
		return takeShared{}, take{}, false
	}
	o := req.Owner
	sh := takeShared{fresh: true, cluster: pool.ClusterID, pool: pool.ID(), kind: o.Kind,
		eventType: eventTypes[o.Kind].allocated, hold: hold, set: o.SetID}
	if hold > 0 {
		sh.eventType = "allocation.reserved"
	}
	if o.Kind == OwnerEnvIPv4 {
		// IPv4 pools are table pools; from another pool the statement hands over.
		sh.fresh = false
	}
	t := take{owner: o, event: newID(), row: newID()}
	if req.Pool.Name == "" && o.Kind == OwnerInstance && o.NodeID != "" {
		t.avoid = label(NodeBlocksPool(pool.ClusterID, o.NodeID).ID())
	}
	return sh, t, true
}

// takeStatement is the take statement for the owners ts, and its
// parameters: the one-owner form with the owner's fields, or the form of
// several with one array per owner field, one element per owner.
func (s *Client) takeStatement(sh takeShared, ts []take) (string, []any) {
	v := params{"cluster": sh.cluster, "pool": sh.pool, "kind": sh.kind, "actor": s.actor,
		"event_type": sh.eventType, "hold": sh.hold, "set_owner": label(sh.set)}
	st := takeReuseSQL
	if len(ts) == 1 {
		o, t := ts[0].owner, ts[0]
		v["owner"], v["org"], v["env"], v["node"], v["instance"], v["event"] = o.ID, label(o.OrgID), label(o.EnvID),
			label(o.NodeID), label(o.InstanceID), t.event
		st = takeReuseOneSQL
		if sh.fresh {
			v["avoid"], v["row"] = t.avoid, t.row
			st = takeFreshOneSQL
			if s.outer != nil {
				st = takeFreshOneInTxSQL // its locks last until the caller commits
			}
		}
		return st.sql, []any{v}
	}
	n := len(ts)
	ids := make([]string, n)
	orgs, envs, nodes, insts, avoid := make([]label, n), make([]label, n), make([]label, n), make([]label, n), make([]label, n)
	events, rows := make([]uuid.UUID, n), make([]uuid.UUID, n)
	for i, t := range ts {
		o := t.owner
		ids[i] = o.ID
		orgs[i], envs[i], nodes[i], insts[i] = label(o.OrgID), label(o.EnvID), label(o.NodeID), label(o.InstanceID)
		avoid[i], events[i], rows[i] = t.avoid, t.event, t.row
	}
	v["owners"], v["orgs"], v["envs"], v["nodes"], v["instances"], v["events"] = ids, orgs, envs, nodes, insts, events
	if sh.fresh {
		v["avoid"], v["rows"] = avoid, rows
		st = takeFreshSQL
	}
	return st.sql, []any{v}
}

// runOne runs one self-committing statement returning an allocation (plus its
// pool's block and its cluster's network settings). Anything but one row
// means "use the full path": an error commits nothing, and no row means there
// was nothing to take here.
//
// The statement goes in one batch after the store's bounds on waits and its
// planner settings (set_config(..., true)): a batch up to its Sync is one implicit
// transaction, so the bounds hold for the statement and end with it, in the
// same round trip. A wait that runs into them is an error of its own (busy,
// timeout), not a reason to wait again on the full path. The first use of a
// statement on a connection prepares it in a round trip of its own, before
// the bounds are set, and preparing takes the tables' locks: a deadline a
// little past the lock bound covers that wait.
func (s *Client) runOne(ctx context.Context, sql string, args ...any) (AllocateResult, bool, error) {
	if s.outer != nil {
		return s.runOneInTx(ctx, sql, args...)
	}
	got, err := s.runMany(ctx, sql, args...)
	if err != nil || len(got) != 1 {
		return AllocateResult{}, false, s.waitErr(err)
	}
	return got[0], true, nil
}

// waitErr is what a failed fast statement tells its caller: a wait that ran
// into the store's bounds (busy, timeout), which the full path would only
// wait out again; nil for anything else, which the full path decides.
func (s *Client) waitErr(err error) error {
	if err == nil {
		return nil
	}
	if me := s.mapErr(err); Code(me) == CodeBusy || Code(me) == CodeTimeout || errors.As(me, new(*gaveUpError)) {
		return me
	}
	return nil
}

// runMany runs runOne's batch for a statement that returns any number of
// allocations (the shared statements of shareTake, or one): runTakes with
// one statement.
func (s *Client) runMany(ctx context.Context, sql string, args ...any) ([]AllocateResult, error) {
	got, err := s.runTakes(ctx, takeStmt{sql, args})
	if err != nil {
		return nil, err
	}
	return got[0], nil
}

// takeStmt is one statement of runTakes' batch.
type takeStmt struct {
	sql  string
	args []any
}

// runTakes runs statements that each return any number of allocations in
// one round trip (oneTrip). It returns each statement's rows only once the
// batch has ended without error: until the commit, a row returned is not an
// allocation.
func (s *Client) runTakes(ctx context.Context, stmts ...takeStmt) ([][]AllocateResult, error) {
	got := make([][]AllocateResult, len(stmts))
	err := s.oneTrip(ctx, func(b *pgx.Batch) {
		for _, st := range stmts {
			b.Queue(st.sql, st.args...)
		}
	}, func(br pgx.BatchResults) (err error) {
		for i := range got {
			if got[i], err = readTaken(br); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

// oneTrip sends the statements queue adds after the store's bounds in one
// batch, one round trip and one implicit transaction (runOne's), and reads
// their results with read. An error at the batch's end, its Sync (the
// commit), is the call's: what read read before it was never acknowledged
// by the server. A wait that runs into the bounds is named (takeErr).
func (s *Client) oneTrip(ctx context.Context, queue func(*pgx.Batch), read func(pgx.BatchResults) error) error {
	ctx, cancel := s.takeContext(ctx)
	defer cancel() // pgx closes a connection its deadline interrupted
	b := &pgx.Batch{}
	s.queueBounds(b)
	queue(b)
	br := s.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = read(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if _, none := br.(errBatch); none {
		// No connection to send it on: the database's absence (a server
		// that accepts connections and never answers, one whose processes
		// stopped), not a statement's wait.
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), errTakeBound) {
			return &UnavailableError{Addr: s.addr, Answers: []string{"no connection answered"},
				Err: fmt.Errorf("no connection answered within %s (the one-statement call's bound: lock_timeout and 2 s)",
					FormatDuration(s.bounds.lock+2*time.Second))}
		}
		return err
	}
	return s.takeErr(ctx, heldIn(br, err))
}

// readTaken reads the rows of a take statement, the next result of br.
func readTaken(br pgx.BatchResults) ([]AllocateResult, error) {
	rows, err := br.Query()
	var got []AllocateResult
	for err == nil && rows.Next() {
		var block *netip.Prefix
		var gw netip.Prefix
		var dns []netip.Prefix
		var res AllocateResult
		var a Allocation
		if a, err = scanAllocation(extraRow{rows, []any{&block, &gw, &res.Network.MTU, &dns}}); err == nil && block != nil {
			got = append(got, oneResult(res, a, *block, gw, dns))
		}
	}
	if rows != nil {
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	return got, err
}

// takeErr names the failure of a one-statement call (a take, or a release)
// whose bounded context (takeContext) ran out: a lock another session
// holds, or no answer.
func (s *Client) takeErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), errTakeBound) {
		h, answered := s.lockHoldersNowSeen()
		if h != "" {
			return &BusyError{What: "preparing the statement; held: " + h, Timeout: s.bounds.lock}
		}
		return &TimeoutError{What: "the one-statement call (an allocation, a hold or a release) did not answer", Timeout: s.bounds.lock + 2*time.Second,
			Take: true, Unanswered: !answered}
	}
	return err
}

func oneResult(res AllocateResult, a Allocation, block, gw netip.Prefix, dns []netip.Prefix) AllocateResult {
	a.Block = block
	res.Allocation = a
	res.Network.GatewayIPv6 = gw.Addr()
	res.Network.DNSServers = prefixAddrs(dns)
	return res
}

// runOneInTx runs a one-statement allocation inside the caller's transaction
// (InTx), in one round trip (oneInTx); false means "use the full path".
func (s *Client) runOneInTx(ctx context.Context, sql string, args ...any) (AllocateResult, bool, error) {
	var block *netip.Prefix
	var gw netip.Prefix
	var dns []netip.Prefix
	var res AllocateResult
	var a Allocation
	ok, err := s.oneInTx(ctx, sql, args, func(row pgx.Row) (err error) {
		a, err = scanAllocation(extraRow{row, []any{&block, &gw, &res.Network.MTU, &dns}})
		return err
	})
	if !ok || block == nil {
		return AllocateResult{}, false, err
	}
	return oneResult(res, a, *block, gw, dns), true, nil
}

// oneInTx runs one statement inside the caller's transaction (InTx), in one
// round trip: a savepoint, a guard that fails unless the transaction is
// READ COMMITTED (the allocator's isolation) and sets the statement's
// planning (fastPlans) and the client's origin, the statement (its row read
// by scan), the caller's planning back and the savepoint's release go in
// one batch, which stops at the first error. The caller's transaction keeps
// its own bounds on waits, as the full path does in it. ok is false when
// the full path decides: the statement found no row (scan's ErrNoRows or
// ErrNotFound: nothing was written), or anything failed, in which case
// everything the batch did is rolled back to the savepoint and the full path
// takes over (and names a wrong isolation), so the caller's transaction is
// left as it was; err is then a wait that ran into the caller's bounds. A
// transaction that had failed before refuses the savepoint itself: that is
// named, and nothing is undone.
func (s *Client) oneInTx(ctx context.Context, sql string, args []any, scan func(pgx.Row) error) (ok bool, err error) {
	if s.outerErr != nil {
		return false, s.outerErr
	}
	b := &pgx.Batch{}
	b.Queue(sqlFastSavepoint)
	b.Queue(sqlFastGuard, s.origin, s.bounds.lockSetting(), s.bounds.statementSetting())
	b.Queue(sql, args...)
	b.Queue(sqlFastCallersPlans)
	b.Queue(sqlFastRelease)
	br := s.outer.SendBatch(ctx, b)
	_, err = br.Exec()
	saved := err == nil // else there is no savepoint to go back to
	if err == nil {
		_, err = br.Exec()
	}
	found := false
	if err == nil {
		err = scan(br.QueryRow())
		found = err == nil
		if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, ErrNotFound) {
			err = nil // nothing here: the full path decides
		}
	}
	for range 2 { // the caller's plans back, the release
		if err == nil {
			_, err = br.Exec()
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil && (isConnError(err) || ctx.Err() != nil):
		return false, s.mapErr(err) // the caller's transaction is gone
	case err != nil && !saved:
		// The caller's transaction had failed before (or the batch never
		// reached the server): name that, not the missing savepoint.
		return false, s.mapErr(err)
	case err != nil:
		// Simple protocol: a transaction in error takes no Parse.
		if _, uerr := s.outer.Exec(ctx, sqlFastUndo, pgx.QueryExecModeSimpleProtocol); uerr != nil {
			return false, s.mapErr(uerr)
		}
		// A wait that ran into the caller's bounds is an error of its own,
		// as in runOne: not a reason to wait again on the full path.
		if me := s.mapErr(err); Code(me) == CodeBusy || Code(me) == CodeTimeout {
			return false, me
		}
		return false, nil
	}
	return found, nil
}

// fastConfirm tries to confirm the owner's hold on the planned address in
// one round trip; false means "use the full path". An instance with no pool
// named confirms the hold in whichever pool its plan took it from, as
// plannedInstancePool does.
func (s *Client) fastConfirm(ctx context.Context, req request) (AllocateResult, bool, error) {
	if !req.Address.IsValid() {
		return AllocateResult{}, false, nil
	}
	o := req.Owner
	pool := req.Pool.ID()
	if pool == "" && o.Kind != OwnerInstance {
		pool = req.own.ID()
	}
	args := params{
		"cluster": req.Pool.ClusterID, "kind": o.Kind, "owner": o.ID, "address": netip.PrefixFrom(req.Address, req.Address.BitLen()),
		"org": label(o.OrgID), "env": label(o.EnvID), "node": label(o.NodeID), "instance": label(o.InstanceID),
		"set_owner": label(o.SetID), "actor": s.actor, "pool": label(pool), "event": newID(),
		"event_type": eventTypes[o.Kind].allocated}
	alone := func() takeDone {
		a, ok, err := s.runOne(ctx, confirmHoldSQL.sql, args)
		return takeDone{a, ok, err}
	}
	d := takeDone{}
	if s.outer == nil {
		// Concurrent confirms of one cluster share a commit (runConfirms).
		d = s.share(ctx, confirmQueue(req.Pool.ClusterID), &takeReq{t: take{owner: o}, confirm: args}, alone)
	} else {
		d = alone()
	}
	return d.res, d.ok, d.err
}

// confirmQueue names the queue of the confirms of a cluster's holds.
func confirmQueue(cluster string) string { return "confirm\x00" + cluster }

// findHold is the first look of Reserve: the owner's hold (or allocation)
// that already answers the request, with more than half of its time left
// (sqlFindHold), and the owner's lost hold (sqlLostHold), in one round trip.
// looked is false when it did not run (a caller's transaction, a pool it
// cannot name); a failed lost-hold look-up leaves Lost nil, since it only
// explains a plan. An instance with no pool named takes its live hold from
// whichever pool its plan took it from, as plannedInstancePool does.
//
// With orTake (Reserve of an owner the one-statement take can serve) the
// same round trip, in the same implicit transaction, takes a new hold: the
// take's guards serve only an owner that holds nothing and lost no hold
// lately (owner_free, no_lost_hold), so it writes nothing when the look
// finds something, unless the owner changed between the two statements
// (each reads what has committed when it starts): then the look found what
// the owner held before, and the take's hold is what it holds. taken is
// that new hold (nil: none taken), whatever the look found, tried that it
// was sent; err a failure of the take that Reserve reports (busy, timed
// out; any other sends the owner to the full path). Concurrent looks of one
// pool that take share the round trip, the take statement and its commit
// (share): a plan's new addresses are held a batch at a time.
func (s *Client) findHold(ctx context.Context, req request, ttl time.Duration, orTake bool) (h Hold, found, looked bool, taken *AllocateResult, tried bool, err error) {
	want := req.own
	anyPool := req.Pool.Name == "" && req.Owner.Kind == OwnerInstance
	if !want.valid() || s.outer != nil {
		return h, false, false, nil, false, nil
	}
	l := &holdLook{find: params{"cluster": want.ClusterID, "kind": req.Owner.Kind, "owner": req.Owner.ID,
		"actor": s.actor, "fresh_for": ttl / 2, "origin": s.origin}, lost: lostHoldArgs(want.ClusterID, req.Owner)}
	var sh takeShared
	if orTake && !req.Address.IsValid() {
		sh, l.t, tried = s.takeOf(req, ttl)
	}
	switch q := sh.queue(); {
	case tried && q != "":
		d := s.share(ctx, q, &takeReq{t: l.t, sh: sh, look: l}, func() takeDone {
			return takeDone{ok: true, err: s.runLooks(ctx, sh, []*holdLook{l})}
		})
		if !d.ok {
			return h, false, false, nil, false, nil // left the batch: it did not run
		}
		err = s.waitErr(d.err)
	case tried:
		err = s.waitErr(s.runLooks(ctx, sh, []*holdLook{l}))
	default:
		_ = s.runLooks(ctx, takeShared{}, []*holdLook{l})
	}
	a, ferr := l.a, l.ferr
	h.Lost, taken = l.lostHold, l.taken
	if ferr != nil {
		h.Lost = nil
	}
	samePool := a.PoolID == want.ID() || (anyPool && a.State == StateReserved)
	if ferr != nil || !l.fresh || !samePool || (req.Address.IsValid() && req.Address != a.Address) {
		return h, false, ferr == nil, taken, tried, err
	}
	for _, c := range l.cidrs {
		if c.Contains(a.Address) {
			a.Block = c
		}
	}
	h.Allocation = a
	return h, true, true, taken, tried, err
}

// runLooks sends the first looks of ls (each owner's hold and lost hold) in
// one batch and, when sh names a take (the looks' t), the one take statement
// of their owners after them: one round trip and one implicit transaction, so
// that each look reads what the take has not changed yet. It fills each
// look's outcome (ferr: the look's failure, nil when it found nothing), and
// returns the take's error (the batch's, at its commit, named by takeErr);
// when the take fails, no look has taken anything.
func (s *Client) runLooks(ctx context.Context, sh takeShared, ls []*holdLook) error {
	withTake := sh.pool != ""
	b := &pgx.Batch{}
	if withTake {
		var cancel context.CancelFunc
		ctx, cancel = s.takeContext(ctx)
		defer cancel()
		s.queueBounds(b)
	}
	takes := make([]take, len(ls))
	for i, l := range ls {
		b.Queue(sqlFindHold.sql, l.find)
		b.Queue(sqlLostHold, l.lost...)
		takes[i] = l.t
	}
	if withTake {
		sql, args := s.takeStatement(sh, takes)
		b.Queue(sql, args...)
	}
	br := s.pool.SendBatch(ctx, b)
	var terr error
	if withTake {
		_, terr = br.Exec()
	}
	for _, l := range ls {
		l.a, l.ferr = scanAllocation(extraRow{br.QueryRow(), []any{&l.fresh, &l.cidrs}})
		l.lostHold, _ = scanLostHold(br.QueryRow())
	}
	var got []AllocateResult
	if withTake && terr == nil {
		got, terr = readTaken(br)
	}
	cerr := br.Close()
	if withTake {
		// The batch's error at its end (the commit) is the take's: the
		// looks read their rows before it, and the rows taken are void.
		if terr == nil {
			terr = cerr
		}
		if terr != nil {
			got = nil
		}
		terr, cerr = heldIn(br, terr), nil
	}
	taken := make(map[string]*AllocateResult, len(got)) // a batch never holds one owner twice
	for i := range got {
		taken[got[i].Owner.ID] = &got[i]
	}
	for _, l := range ls {
		if errors.Is(l.ferr, ErrNotFound) || l.ferr == nil {
			l.ferr = cerr
		}
		l.taken = taken[l.t.owner.ID]
	}
	return s.takeErr(ctx, terr)
}

// shareTake runs the take t (sh says of which statement) from the pool named
// key, on its own or in a shared statement (above). false means "use the
// full path".
func (s *Client) shareTake(ctx context.Context, key string, sh takeShared, t take) (AllocateResult, bool, error) {
	d := s.share(ctx, key, &takeReq{t: t, sh: sh}, func() takeDone {
		sql, args := s.takeStatement(sh, []take{t})
		res, ok, err := s.runOne(ctx, sql, args...)
		return takeDone{res, ok, err}
	})
	return d.res, d.ok, d.err
}

// share runs r in the queue of the pool named key: alone (by alone, on the
// caller's context) while fewer than coalesceRunning of the pool's
// statements run, else in the batch gathering meanwhile, which starts when
// one of them ends (runShared). A caller whose context ends before its
// batch starts leaves it, and gets a zero takeDone.
func (s *Client) share(ctx context.Context, key string, r *takeReq, alone func() takeDone) takeDone {
	c := s.shared
	c.mu.Lock()
	q := c.pools[key]
	if q == nil {
		q = &poolQueue{}
		c.pools[key] = q
	}
	if q.running < coalesceRunning {
		q.running++
		c.mu.Unlock()
		d := alone()
		s.ended(key, q)
		return d
	}
	ownerKey := r.t.owner.Kind + "\x00" + r.t.owner.ID
	b := q.next
	if b == nil {
		b = &takeBatch{sh: r.sh, owners: map[string]bool{}}
		q.next = b
	}
	if len(b.reqs) >= coalesceMax || b.owners[ownerKey] {
		c.mu.Unlock()
		return alone()
	}
	r.done = make(chan takeDone, 1)
	b.reqs = append(b.reqs, r)
	b.owners[ownerKey] = true
	c.mu.Unlock()
	select {
	case d := <-r.done:
		return d
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
		return takeDone{} // the full path names the context's end
	}
}

// ended is called when a statement of the pool ends: the batch gathered
// meanwhile starts in its place.
func (s *Client) ended(key string, q *poolQueue) {
	c := s.shared
	c.mu.Lock()
	b := q.next
	q.next = nil
	if b == nil || len(b.reqs) == 0 {
		q.running--
		if q.running == 0 {
			delete(c.pools, key)
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	go func() {
		s.runShared(b)
		s.ended(key, q)
	}()
}

// runShared runs a gathered batch and tells each caller its outcome. It runs
// on none of its callers' contexts, so that one caller's end does not fail
// the others; the store's bounds on waits and statements bound it.
func (s *Client) runShared(b *takeBatch) {
	ctx := context.Background()
	if b.reqs[0].confirm != nil {
		s.runConfirms(ctx, b.reqs)
		return
	}
	if b.reqs[0].look != nil {
		// Plan-time holds, each with its first look (findHold).
		looks := make([]*holdLook, len(b.reqs))
		for i, r := range b.reqs {
			looks[i] = r.look
		}
		err := s.runLooks(ctx, b.sh, looks)
		for _, r := range b.reqs {
			r.done <- takeDone{ok: true, err: err}
		}
		return
	}
	takes := make([]take, len(b.reqs))
	byOwner := make(map[string]*takeReq, len(b.reqs))
	for i, r := range b.reqs {
		takes[i] = r.t
		byOwner[r.t.owner.ID] = r
	}
	sql, args := s.takeStatement(b.sh, takes)
	got, err := s.runMany(ctx, sql, args...)
	served := map[*takeReq]bool{}
	for _, res := range got {
		if r := byOwner[res.Owner.ID]; r != nil && !served[r] {
			served[r] = true
			r.done <- takeDone{res, true, nil}
		}
	}
	for _, r := range b.reqs {
		if !served[r] {
			r.done <- takeDone{err: s.waitErr(err)}
		}
	}
}

// runConfirms runs the confirms of rs (fastConfirm's statement, one per
// owner, each as it runs alone) in one batch (runTakes): one round trip and
// one implicit transaction, so one commit. Each caller learns of its
// allocation only once the batch has ended without error; when a confirm
// fails, the batch writes nothing and every caller goes on to the full path
// alone.
func (s *Client) runConfirms(ctx context.Context, rs []*takeReq) {
	stmts := make([]takeStmt, len(rs))
	for i, r := range rs {
		stmts[i] = takeStmt{confirmHoldSQL.sql, []any{r.confirm}}
	}
	got, err := s.runTakes(ctx, stmts...)
	werr := s.waitErr(err)
	for i, r := range rs {
		if i < len(got) && len(got[i]) == 1 { // none when the batch failed
			r.done <- takeDone{got[i][0], true, nil}
		} else {
			r.done <- takeDone{err: werr}
		}
	}
}

// takeContext bounds a take statement's batch by the lock bound and two
// seconds more: a statement waiting to be prepared behind another session's
// lock holds no bound of its own (see takeErr).
func (s *Client) takeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.bounds.lock > 0 {
		return context.WithTimeoutCause(ctx, s.bounds.lock+2*time.Second, errTakeBound)
	}
	return ctx, func() {}
}

// errTakeBound is the cause of takeContext's end, so that takeErr tells the
// store's bound from the caller's own deadline.
var errTakeBound = errors.New("the take statement's bound")
