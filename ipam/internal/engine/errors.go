package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Error codes. They appear verbatim at the start of error messages, so that
// operators and scripts can match on them.
const (
	CodeExhausted      = "ipam_exhausted"
	CodeUnavailable    = "ipam_unavailable"
	CodeOwnerConflict  = "owner_conflict"
	CodeAddressInUse   = "address_in_use"
	CodeAddressCooling = "address_cooling"
	CodeInvalid        = "invalid_input"
	CodeNotFound       = "not_found"
	CodeConflict       = "conflict"
	CodeSchema         = "schema_mismatch"
	CodeReadOnly       = "read_only"
	CodeDenied         = "permission_denied"
	CodeBusy           = "ipam_busy"
	CodeTimeout        = "ipam_timeout"
	CodeRefused        = "ipam_refused"
	CodeHoldLost       = "hold_lost"
)

// Code returns the error code of err, or "" when it has none.
func Code(err error) string {
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return c.Code()
	}
	if errors.Is(err, ErrNotFound) {
		return CodeNotFound
	}
	return ""
}

// WriteRefused reports whether err is the database refusing a write it
// could do without: a read-only server or session (read_only), or a role
// without the grant (permission_denied). A plan-time hold so refused leaves
// the address to the apply.
func WriteRefused(err error) bool {
	c := Code(err)
	return c == CodeReadOnly || c == CodeDenied
}

// gaveUpError: the caller's context ended (it was canceled, or its deadline
// passed) before the call completed. That is neither the database failing
// (ipam_unavailable) nor the store's own bounds on waits (ipam_busy,
// ipam_timeout), so it has no code of its own: it unwraps to the context's
// error (errors.Is(err, context.Canceled) or context.DeadlineExceeded).
// inTx: the call ran in the caller's transaction: nothing of it has
// committed, and the transaction is lost if its connection was closed.
type gaveUpError struct {
	err  error
	inTx bool
}

func (e *gaveUpError) Unwrap() error { return e.err }
func (e *gaveUpError) Error() string {
	if e.inTx {
		return "the caller gave the call up before it completed (" + e.err.Error() +
			"), in the caller's transaction: nothing of it has committed; a statement it interrupted (one that had started) " +
			"closed the transaction's connection, so roll the transaction back and run it again"
	}
	return "the caller gave the call up before it completed (" + e.err.Error() +
		"); it may have committed before that: the same call again finds what it did"
}

// ExhaustedError: no address can be handed out from a pool right now.
type ExhaustedError struct {
	PoolID string
	Size   int64
	// Active is the number of active allocations; Held the number of live
	// plan-time holds (a plan's new addresses, this plan's own included),
	// which become allocations when applied or go back when they expire.
	Active int64
	Held   int64
	// Cooling is the number of released addresses still inside their cooldown.
	Cooling int64
	// NextReusable is when the earliest cooling address becomes reusable; zero
	// when nothing is cooling.
	NextReusable time.Time
	// Tried holds the errors of each pool when several were tried in turn.
	Tried []string
	// Node and MaxBlocks are set when a node's instance blocks are full and
	// the node may not grow any more.
	Node      string
	MaxBlocks int
}

func (e *ExhaustedError) Code() string { return CodeExhausted }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *ExhaustedError) Is(target error) bool { return isCode(CodeExhausted, target) }

func (e *ExhaustedError) Error() string {
	next := "no address is cooling, so none will free up until one is released"
	if !e.NextReusable.IsZero() {
		next = "the next becomes reusable at " + e.NextReusable.UTC().Format(time.RFC3339)
	}
	held := ""
	if e.Held > 0 {
		held = fmt.Sprintf(" %d held by plan-time holds,", e.Held)
	}
	if e.Node != "" {
		if held != "" {
			held = fmt.Sprintf(", %d held by plan-time holds", e.Held)
		}
		return fmt.Sprintf("%s: node %q has no free instance address: its blocks (%d addresses, max_blocks %d reached) hold %d active%s and %d cooling; %s",
			CodeExhausted, e.Node, e.Size, e.MaxBlocks, e.Active, held, e.Cooling, next)
	}
	if len(e.Tried) > 1 {
		return fmt.Sprintf("%s: every pool tried is full (%s): %s", CodeExhausted, e.PoolID, strings.Join(e.Tried, "; "))
	}
	return fmt.Sprintf("%s: pool %q has no free address: size %d, %d active,%s %d cooling; %s",
		CodeExhausted, e.PoolID, e.Size, e.Active, held, e.Cooling, next)
}

// UnavailableError: no usable database server answered: none could be
// reached, those that answered were read-only or shutting down, or the
// connection was lost. It names each host and what it answered, never the
// password. Retrying later may succeed.
type UnavailableError struct {
	// Addr lists the database's host:port pairs, comma separated.
	Addr string
	// Reached is true when a server answered (read-only, shutting down, a
	// session lost mid-way); false when none could be reached at all.
	Reached bool
	// NoSlots: a server answered that it has no connection slot left for
	// the role (its CONNECTION LIMIT, or max_connections).
	NoSlots bool
	// Answers says what each host tried answered ("127.0.0.1:5432 refused
	// the connection (nothing listens there)", "... is read-only ...").
	Answers []string
	// Waited is how long no usable server has answered when the call gave
	// up (at least Bound, the failover bound, unless FirstContact); zero
	// when it did not wait.
	Waited, Bound time.Duration
	// FirstContact: nothing was there at any host (the connection refused,
	// no route, a name that does not resolve) and no server had answered
	// the client before, so the call gave up after FirstContactTimeout
	// rather than the default failover bound (see Config.FailoverTimeout).
	FirstContact bool
	// CallersTx: the call ran in the caller's transaction (InTx), which
	// cannot go on: its connection, or its session, is gone.
	CallersTx bool
	Err       error
}

func (e *UnavailableError) Code() string { return CodeUnavailable }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *UnavailableError) Is(target error) bool { return isCode(CodeUnavailable, target) }

func (e *UnavailableError) Error() string {
	what := "cannot be reached"
	if e.Reached {
		what = "has no usable server"
	}
	msg := fmt.Sprintf("%s: the IPAM database at %s %s: %v", CodeUnavailable, e.Addr, what, e.Err)
	switch {
	case e.FirstContact:
		msg += fmt.Sprintf(" (for %s now; no server has answered yet: a first contact waits %s, not failover_timeout's %s)",
			FormatDuration(e.Waited.Round(time.Second)), FormatDuration(FirstContactTimeout), FormatDuration(e.Bound))
	case e.Waited > 0:
		msg += fmt.Sprintf(" (for %s now; failover_timeout is %s)", FormatDuration(e.Waited.Round(time.Second)), FormatDuration(e.Bound))
	}
	if e.CallersTx {
		msg += "; in the caller's transaction, which cannot go on: nothing of it has committed; roll it back and run " +
			"it again, the call with it"
	}
	return msg
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// OwnerConflictError: the owner already holds an address, allocated by another
// actor (or a different address than the one requested).
type OwnerConflictError struct {
	ClusterID string
	OwnerKind string
	OwnerID   string
	Address   string
	Actor     string
	Detail    string
	// PoolID is the pool of the address held, and SetID the address set
	// of a member (kind "set"): with the fields above, what a tool needs to
	// name the held allocation (the provider builds its import ID).
	PoolID string
	SetID  string
	// Block is the pool block the held address lies in (zero when not
	// known): with Address, the address's CIDR as an allocation gives it.
	Block netip.Prefix
	// OtherTenant: what the owner holds is for another org or env than
	// the request's; an import would hand one tenant's address to another.
	OtherTenant bool
	// Held: what the owner holds is another configuration's live plan-time
	// hold, not an allocation (nothing to import yet).
	Held bool
	// Replacing (a plan's refusal, Reserve): the owner's allocation is
	// marked as being replaced by a plan of this configuration
	// (MarkReplacement), so the create of that replacement takes it over,
	// or moves the owner to the address or pool it asks for. The plan of
	// that create (Terraform plans it again at apply, without the replaced
	// object's state) holds nothing for it.
	Replacing bool
}

func (e *OwnerConflictError) Code() string { return CodeOwnerConflict }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *OwnerConflictError) Is(target error) bool { return isCode(CodeOwnerConflict, target) }

func (e *OwnerConflictError) Error() string {
	if e.Held {
		return fmt.Sprintf("%s: %s %q in cluster %q is held at %s by a plan of actor %q; %s",
			CodeOwnerConflict, e.OwnerKind, e.OwnerID, e.ClusterID, e.Address, e.Actor, e.Detail)
	}
	return fmt.Sprintf("%s: %s %q in cluster %q already holds %s, allocated by actor %q; %s",
		CodeOwnerConflict, e.OwnerKind, e.OwnerID, e.ClusterID, e.Address, e.Actor, e.Detail)
}

// AddressInUseError: an exact address is active for another owner, or held
// for one by a plan-time reservation.
type AddressInUseError struct {
	Address   string
	State     string
	OwnerKind string
	OwnerID   string
	Actor     string
	Until     time.Time // end of a reservation
}

func (e *AddressInUseError) Code() string { return CodeAddressInUse }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *AddressInUseError) Is(target error) bool { return isCode(CodeAddressInUse, target) }

func (e *AddressInUseError) Error() string {
	if e.State == StateReserved {
		return fmt.Sprintf("%s: %s is reserved for %s %q by a plan of actor %q until %s", CodeAddressInUse, e.Address,
			e.OwnerKind, e.OwnerID, e.Actor, e.Until.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s: %s is held by %s %q (actor %q)", CodeAddressInUse, e.Address, e.OwnerKind, e.OwnerID, e.Actor)
}

// AddressCoolingError: an exact address was released and its cooldown has not passed.
type AddressCoolingError struct {
	Address    string
	OwnerKind  string
	OwnerID    string
	ReusableAt time.Time
}

func (e *AddressCoolingError) Code() string { return CodeAddressCooling }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *AddressCoolingError) Is(target error) bool { return isCode(CodeAddressCooling, target) }

func (e *AddressCoolingError) Error() string {
	return fmt.Sprintf("%s: %s was released by %s %q and is cooling down until %s; only that owner, under the same org and env, may take it back before then",
		CodeAddressCooling, e.Address, e.OwnerKind, e.OwnerID, e.ReusableAt.UTC().Format(time.RFC3339))
}

// InvalidError: bad input, naming the field at fault.
type InvalidError struct {
	Field string
	// Index, when Indexed, is the position (from 0) of the element of the
	// list Field at fault: Path gives "exclude[3]".
	Index   int
	Indexed bool
	Msg     string
	// Err, when set, classifies the problem (e.g. ErrPoolNotFound).
	Err error
}

// ErrPoolNotFound classifies an InvalidError about a pool (or a pool holding
// an address) that does not exist, which at plan time may simply not be
// created yet.
var ErrPoolNotFound = errors.New("pool not found")

func (e *InvalidError) Unwrap() error { return e.Err }

func (e *InvalidError) Code() string { return CodeInvalid }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *InvalidError) Is(target error) bool { return isCode(CodeInvalid, target) }

func (e *InvalidError) Error() string { return fmt.Sprintf("%s: %s: %s", CodeInvalid, e.Path(), e.Msg) }

// Path is the field at fault, with the element's index when there is one:
// "exclude[3]", "cidrs".
func (e *InvalidError) Path() string {
	if e.Indexed {
		return fmt.Sprintf("%s[%d]", e.Field, e.Index)
	}
	return e.Field
}

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ConflictError: the change is refused because of existing data.
type ConflictError struct {
	Msg string
	// ExistingKind ("cluster", "pool") and ExistingID name the object that
	// already exists, when that is the conflict (a tool can offer to import
	// it); empty otherwise.
	ExistingKind, ExistingID string
}

func (e *ConflictError) Code() string { return CodeConflict }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *ConflictError) Is(target error) bool { return isCode(CodeConflict, target) }
func (e *ConflictError) Error() string        { return CodeConflict + ": " + e.Msg }

// SchemaError: the database schema does not match this binary.
type SchemaError struct{ Msg string }

func (e *SchemaError) Code() string { return CodeSchema }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *SchemaError) Is(target error) bool { return isCode(CodeSchema, target) }
func (e *SchemaError) Error() string        { return CodeSchema + ": " + e.Msg }

// BusyError: a lock another session holds was not released within the lock
// timeout; nothing was written. What names the lock as PostgreSQL reported it.
type BusyError struct {
	What    string
	Timeout time.Duration
}

func (e *BusyError) Code() string { return CodeBusy }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *BusyError) Is(target error) bool { return isCode(CodeBusy, target) }
func (e *BusyError) Error() string {
	return fmt.Sprintf("%s: waited %s (lock_timeout) for a lock another session holds (%s); nothing was written. "+
		"Find the holder in pg_stat_activity / pg_locks, or try again once it is done", CodeBusy, FormatDuration(e.Timeout), e.What)
}

// TimeoutError: a statement ran past the statement timeout; nothing was
// written.
type TimeoutError struct {
	What    string
	Timeout time.Duration
	// Take: the bound was a one-statement call's own (lock_timeout and 2
	// s, takeContext), not statement_timeout: the call waited for a lock
	// while its statement was prepared (a lock no longer held when the
	// call looked for its holders), or the server did not answer.
	Take bool
	// Holders: the statement waited for a lock until its bound, held by
	// these sessions when last seen (a wait report's look).
	Holders string
	// Unanswered (with Take): the look for a lock's holders, on another
	// connection, got no answer either: the server is overloaded or gone,
	// or a pooler in front of it had no server connection free.
	Unanswered bool
}

func (e *TimeoutError) Code() string { return CodeTimeout }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *TimeoutError) Is(target error) bool { return isCode(CodeTimeout, target) }
func (e *TimeoutError) Error() string {
	if e.Take && e.Unanswered {
		return fmt.Sprintf("%s: %s within %s (lock_timeout and 2 s, the call's own bound) and was canceled; nothing was "+
			"written. A look at the server's locks on another connection got no answer either: the server is overloaded, "+
			"or a pooler in front of it (PgBouncer) had no server connection free for either (%s)",
			CodeTimeout, e.What, FormatDuration(e.Timeout), poolerQueue)
	}
	if e.Take {
		return fmt.Sprintf("%s: %s within %s (lock_timeout and 2 s, the call's own bound) and was canceled; nothing was "+
			"written. It waited for a lock another session held while its statement was prepared (a LOCK TABLE or a "+
			"schema change, say; gone when the call looked for its holder), or the server is overloaded, or a pooler "+
			"in front of it (PgBouncer) had no server connection free for it (%s)",
			CodeTimeout, e.What, FormatDuration(e.Timeout), poolerQueue)
	}
	if e.Holders != "" {
		return fmt.Sprintf("%s: a statement ran past %s (statement_timeout) and was canceled (%s); nothing was written. "+
			"It waited for a lock held by %s (when last seen)", CodeTimeout, FormatDuration(e.Timeout), e.What, e.Holders)
	}
	return fmt.Sprintf("%s: a statement ran past %s (statement_timeout) and was canceled (%s); nothing was written. "+
		"The server is overloaded, or the bound is too short for this operation", CodeTimeout, FormatDuration(e.Timeout), e.What)
}

// poolerQueue is why a pooler makes a call wait for a server connection.
const poolerQueue = "in session pooling each client connection keeps its server connection until it closes: " +
	"default_pool_size must cover every client connection open at once"

// DeniedError: the database role lacks a grant the operation needs (a read
// as well as a write); the message quotes the server's, which names the
// table or schema.
type DeniedError struct {
	Msg string
	err error
}

func (e *DeniedError) Code() string  { return CodeDenied }
func (e *DeniedError) Unwrap() error { return e.err }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *DeniedError) Is(target error) bool { return isCode(CodeDenied, target) }
func (e *DeniedError) Error() string        { return CodeDenied + ": " + e.Msg }

// existsConflict is a create's refusal of an object (kind cluster or pool)
// that exists already, which an import would manage.
func existsConflict(kind, id string) *ConflictError {
	return &ConflictError{Msg: fmt.Sprintf("%s %q already exists; import it to manage it", kind, id), ExistingKind: kind, ExistingID: id}
}

// ReadOnlyError: the database refused a write, because the server (or the
// session) is read-only: a standby, or a demoted primary.
type ReadOnlyError struct {
	Msg string
	err error // the server's refusal, when it is one
}

func (e *ReadOnlyError) Code() string  { return CodeReadOnly }
func (e *ReadOnlyError) Unwrap() error { return e.err }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *ReadOnlyError) Is(target error) bool { return isCode(CodeReadOnly, target) }
func (e *ReadOnlyError) Error() string        { return CodeReadOnly + ": " + e.Msg }

// HoldLostError: the owner's plan-time hold expired and another owner took
// its address, so a plan that showed that address cannot be applied. Reserve
// says so once (and again to the same plan run), taking no new hold: the
// next Reserve takes one.
type HoldLostError struct {
	Owner Owner
	Lost  LostHold
}

func (e *HoldLostError) Error() string {
	return fmt.Sprintf("the plan-time hold of %s %s on %s expired and %s took the address at %s; a plan that showed %s cannot be applied: run the plan again (it reserves a new address)",
		e.Owner.Kind, e.Owner.ID, e.Lost.Address, e.Lost.TakenBy, e.Lost.At.UTC().Format(time.RFC3339), e.Lost.Address)
}

// Code is the error's stable code.
func (e *HoldLostError) Code() string { return CodeHoldLost }

// Is matches the sentinel of the code (errors.Is(err, Err...)).
func (e *HoldLostError) Is(target error) bool { return isCode(CodeHoldLost, target) }

// ownerConflict is the owner_conflict error of an allocation another
// configuration or actor manages (its Detail says why and what to do).
func ownerConflict(held Allocation) *OwnerConflictError {
	return &OwnerConflictError{ClusterID: held.ClusterID, OwnerKind: held.Owner.Kind, OwnerID: held.Owner.ID,
		Address: held.Address.String(), Actor: held.Actor, PoolID: held.PoolID, SetID: held.Owner.SetID, Block: held.Block}
}

// The errors callers test with errors.Is. Each carries the spec's code
// (Code returns it).
var (
	// ErrExhausted: no address can be handed out from the pool right now
	// (ipam_exhausted). The failure is recorded.
	ErrExhausted = errors.New(CodeExhausted)
	// ErrUnavailable: no usable database server answered within the
	// failover bound: none could be reached, or those that answered were
	// read-only or shutting down (ipam_unavailable). The message names each
	// host and its answer.
	ErrUnavailable = errors.New(CodeUnavailable)
	// ErrRefused: a server answered and refused the connection for good:
	// credentials, a missing database, a startup parameter a pooler rejects
	// (ipam_refused). The message carries the server's answer.
	ErrRefused = errors.New(CodeRefused)
	// ErrOwnerConflict: the owner holds an address another actor (or another
	// configuration) manages (owner_conflict).
	ErrOwnerConflict = errors.New(CodeOwnerConflict)
	// ErrAddressTaken: an exact address asked for is in use or inside its
	// cooldown (address_in_use, address_cooling).
	ErrAddressTaken = errors.New("address_taken")
	// ErrInvalid: an input is not valid; the message names it (invalid_input).
	ErrInvalid = errors.New(CodeInvalid)
	// ErrNotFound: the cluster, pool or allocation does not exist (not_found).
	ErrNotFound = errors.New(CodeNotFound)
	// ErrConflict: a concurrent change kept the call from completing, or
	// something still depends on what was to be changed (conflict).
	ErrConflict = errors.New(CodeConflict)
	// ErrReadOnly: the server (or session) is read-only: a standby, or a
	// demoted primary (read_only).
	ErrReadOnly = errors.New(CodeReadOnly)
	// ErrDenied: the database role lacks a grant the operation needs, to
	// read or to write (permission_denied).
	ErrDenied = errors.New(CodeDenied)
	// ErrBusy: a lock another session holds was not released within the
	// lock timeout; nothing was written (ipam_busy).
	ErrBusy = errors.New(CodeBusy)
	// ErrTimeout: a statement ran past the statement timeout; nothing was
	// written (ipam_timeout).
	ErrTimeout = errors.New(CodeTimeout)
	// ErrSchema: the database's schema is not the one this binary was built
	// for: migrate it (ipamctl migrate up), or use the binary that matches
	// it (schema_mismatch).
	ErrSchema = errors.New(CodeSchema)
	// ErrHoldLost: a plan-time hold expired and another owner took its
	// address, so a plan that showed that address cannot be applied; run
	// the plan again (hold_lost).
	ErrHoldLost = errors.New(CodeHoldLost)
	// ErrClosed: the call was made on a client after its Close (or on a
	// pool given to New after the caller closed it). It comes as an
	// invalid_input on "client" (errors.Is ErrInvalid holds too): the
	// caller's mistake, at once, not an outage waited for.
	ErrClosed = errors.New("the client is closed")
)

var sentinels = map[string]error{
	CodeExhausted:      ErrExhausted,
	CodeUnavailable:    ErrUnavailable,
	CodeOwnerConflict:  ErrOwnerConflict,
	CodeAddressInUse:   ErrAddressTaken,
	CodeAddressCooling: ErrAddressTaken,
	CodeInvalid:        ErrInvalid,
	CodeNotFound:       ErrNotFound,
	CodeConflict:       ErrConflict,
	CodeReadOnly:       ErrReadOnly,
	CodeDenied:         ErrDenied,
	CodeBusy:           ErrBusy,
	CodeTimeout:        ErrTimeout,
	CodeRefused:        ErrRefused,
	CodeSchema:         ErrSchema,
	CodeHoldLost:       ErrHoldLost,
}

// isCode is the Is of each typed error: it matches the sentinel of its code.
func isCode(code string, target error) bool {
	s, ok := sentinels[code]
	return ok && s == target
}

// FirstContactTimeout is how long a call of a client whose failover bound
// is the default waits when nothing is there: no server of the database has
// answered the client yet, and every host tried refuses the connection
// (nothing listens on the port), has no route, or has a name that does not
// resolve. That is a wrong host or port, or PostgreSQL not running, far more
// often than a restart, and a tool like Terraform shows nothing while a
// provider waits; so the call gives up after this rather than the whole
// failover bound. A server that answers anything (starting up, read-only)
// lifts the cut for the rest of the call, and a client that has reached a
// server once waits the whole bound. An explicit FailoverTimeout is waited
// in full from the first contact too.
const FirstContactTimeout = 5 * time.Second

// Wait is a call's wait for a usable database server, as OnWait reports it.
type Wait struct {
	// Addr is the database's host:port list.
	Addr string
	// Waited is how long the call has waited; Bound is the bound it waits
	// at most: the failover bound, or FirstContactTimeout when FirstContact.
	Waited, Bound time.Duration
	// FirstContact: nothing is there at any host and no server has answered
	// the client yet, so the call waits FirstContactTimeout only.
	FirstContact bool
	// Last is the last failure (an UnavailableError naming each host's
	// answer), or nil.
	Last error
	// Lock: the call's transaction waits for a lock another session holds
	// (Holders names them: pid, application and state), not for a server;
	// Waited is that lock's wait, and Bound the lock bound (lock_timeout),
	// which each lock the transaction waits for has anew.
	Lock    bool
	Holders string
	// Stalled: the call's statement has had no answer, and a look aside
	// from it (on another connection) had none within a few seconds
	// either: the server does not answer (stopped, overloaded, or the
	// network between). Waited counts from the call's start; Bound is the
	// statement bound (statement_timeout).
	Stalled bool
}

// String says what the call waits for, in the words ipamctl and the
// provider both use: "waiting for the database at HOST:PORT, 5 s of 30 s",
// or "waiting for a lock in the database at HOST:PORT, 5 s of 30 s".
// ofBound is how long the wait has lasted, of its bound: "12 s of 30 s",
// or "12 s, no bound" when the bound is off (0 or negative).
func (w Wait) ofBound() string {
	if w.Bound <= 0 {
		return fmt.Sprintf("%d s, no bound", int(w.Waited/time.Second))
	}
	return fmt.Sprintf("%d s of %d s", int(w.Waited/time.Second), int(w.Bound.Round(time.Second)/time.Second))
}

func (w Wait) String() string {
	if w.Lock {
		held := "another session holds it"
		if w.Holders != "" {
			held = "held by " + w.Holders
		}
		return fmt.Sprintf("waiting for a lock in the database at %s, %s (lock_timeout): %s", w.Addr, w.ofBound(), held)
	}
	if w.Stalled {
		return fmt.Sprintf("waiting for an answer of the database at %s, %s (statement_timeout): a look aside from "+
			"the call had no answer either (a stopped or overloaded server, or the network)", w.Addr, w.ofBound())
	}
	bound := "failover_timeout"
	if w.FirstContact {
		bound = "first contact"
	}
	msg := fmt.Sprintf("waiting for the database at %s, %s (%s)", w.Addr, w.ofBound(), bound)
	var ue *UnavailableError
	if errors.As(w.Last, &ue) && len(ue.Answers) > 0 {
		msg += ": " + strings.Join(ue.Answers, "; ")
	}
	return msg
}

// namedInRefusal is how many rows a refusal names (firstFew).
const namedInRefusal = 5

// firstFew is what a refusal names of the total rows in its way: the first
// namedInRefusal that sql finds (one string each; its last parameter is the
// limit, after args), then how many more there are: "a, b and 3 more".
func firstFew(ctx context.Context, tx pgx.Tx, total int64, sql string, args ...any) (string, error) {
	rows, err := tx.Query(ctx, sql, append(args, namedInRefusal)...)
	if err != nil {
		return "", err
	}
	named, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	list := strings.Join(named, ", ")
	if total > int64(len(named)) {
		list += fmt.Sprintf(" and %d more", total-int64(len(named)))
	}
	return list, nil
}
