// Package ipam is the IP address manager of the platform as a Go library:
// address math (net/netip), clusters and pools, the transactional allocator
// with cooldown, events and typed errors, on PostgreSQL through pgx. The
// Terraform provider, ipamctl and the platform's scheduler are its callers; it
// never imports Terraform packages.
//
// A Client is the one handle: Open makes one with a pool of its own, New one
// over the caller's pgx pool. Every allocation, whoever asks, goes through the
// same three verbs, Allocate, Reserve (a plan-time hold) and Release, which
// resolve the pool from a PoolRef and take the one-statement fast path where
// it is safe. The scheduler's calls below are those verbs with a request
// shaped for it.
//
// The scheduler allocates an instance's address at placement time, inside
// its own placement transaction: the address, its instance.allocated event
// and the scheduler's rows commit together, or none of them does.
//
//	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
//	if err != nil {
//		return err
//	}
//	defer tx.Rollback(ctx)
//	// ... the scheduler's own rows ...
//	addr, err := client.AllocateInstance(ctx, tx, ipam.InstanceRequest{...})
//	if errors.Is(err, ipam.ErrExhausted) {
//		return err // the placement is aborted; the failure is already recorded
//	} else if err != nil {
//		return err
//	}
//	// ... addr in the scheduler's rows ...
//	return tx.Commit(ctx)
//
// Every call that takes a pgx.Tx runs inside it (in a savepoint, so the
// allocator's retries never abort the caller's transaction); a nil tx runs in
// a transaction of the client's own. The transaction must be READ COMMITTED.
// A failed allocation is recorded (ipam_allocation_failures and an
// "<kind>.allocation_failed" event) outside the caller's transaction, so the
// record outlives its rollback; it takes a connection of its own from the
// pool, waiting at most 5 seconds for one.
//
// Errors carry the spec's codes: test them with errors.Is against ErrExhausted,
// ErrUnavailable, ErrOwnerConflict, ErrInvalid, ... (every typed error matches
// the sentinel of its code), read their fields with errors.As
// (*ExhaustedError, *InvalidError, ...), or read Code(err).
//
// The operator's reads and writes (list, usage, lookup, leaks, check,
// metrics, events, release, reclaim) are package ipam/operator, over the same
// Client: operator.New(client). The allocator itself is ipam/internal/engine;
// this package names its API (api.go), as aliases, so the methods and fields
// documented there are the engine's.
package ipam
