package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/tern/v2/migrate"

	"github.com/overlayipam/terraform-provider-ipam/migrations"
)

// SchemaStatus is the schema version the database has and the one this binary wants.
type SchemaStatus struct {
	Current int32
	Latest  int32
	// From (Migrate only): the version this call found when it applied
	// its first migration, under the migration lock (0: a database without
	// the schema); Current when it applied none, because the database was
	// up to date or another process migrated it first.
	From int32
	// Found (Migrate only): the version the call found when it began,
	// before it waited for the migration lock (0: a database without the
	// schema). Applied: how many migrations this call applied. Processes
	// that migrate at once take turns migration by migration, so Current
	// minus Found is more than Applied when another one applied some.
	Found, Applied int32
}

// LatestSchemaVersion is the number of migrations embedded in this binary.
func LatestSchemaVersion() (int32, error) {
	m, err := migrate.NewMigrator(context.Background(), nil, VersionTable)
	if err != nil {
		return 0, err
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		return 0, err
	}
	return int32(len(m.Migrations)), nil
}

// migrationLock is the key of the advisory lock that serializes migrations:
// tern's, so that an older binary migrating with tern's session lock and
// this one exclude each other.
const migrationLock = int64(9628173550095224)

// Migrate applies the embedded migrations, each in its own transaction.
// Several processes may call it at once, also through a transaction-pooling
// PgBouncer: each transaction takes a transaction-level advisory lock
// (released with its commit, so never left behind on a pooled server
// connection, unlike a session lock), reads the version under it and applies
// the next migration, or nothing when another process already did. The wait
// for that lock is bounded like any other (lock_timeout: ipam_busy). A
// database newer than this binary is refused. The status it returns says
// what this call found (From) and left (Current).
func (s *Client) Migrate(ctx context.Context) (SchemaStatus, error) {
	var st SchemaStatus
	m, err := migrate.NewMigrator(ctx, nil, VersionTable)
	if err != nil {
		return st, err
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		return st, err
	}
	st.Latest = int32(len(m.Migrations))
	defs, err := migrations.Definitions()
	if err != nil {
		return st, err
	}
	// What the database has before this call waits for anyone.
	found, err := s.SchemaStatus(ctx)
	if err != nil {
		return st, err
	}
	st.Found = found.Current
	applied := false // a numbered migration ran in this call
	for {
		done := false
		err := s.retryConn(ctx, func() error {
			tx, err := s.begin(ctx, pgx.ReadCommitted, false)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
			if _, err := tx.Exec(ctx, sqlMigrationLock, migrationLock); err != nil {
				return err
			}
			var exists bool
			if err := tx.QueryRow(ctx, sqlTableExists, VersionTable).Scan(&exists); err != nil {
				return err
			}
			if !exists {
				if _, err := tx.Exec(ctx, sqlCreateVersionTable); err != nil {
					return s.migrateDenied(err, st)
				}
			}
			if err := tx.QueryRow(ctx, sqlSchemaVersion).Scan(&st.Current); err != nil {
				return err
			}
			if err := checkNotNewer(st); err != nil {
				return err
			}
			if !applied {
				st.From = st.Current
			}
			if st.Current == st.Latest {
				if err := applyDefinitions(ctx, tx, defs, applied); err != nil {
					return s.migrateDenied(err, st)
				}
				done = true
				return tx.Commit(ctx)
			}
			next := m.Migrations[st.Current]
			// A migration file holds several statements: sent without
			// arguments, they go in one simple-protocol message.
			if _, err := tx.Exec(ctx, next.UpSQL); err != nil {
				return s.migrateDenied(fmt.Errorf("migration %s: %w", next.Name, err), st)
			}
			if _, err := tx.Exec(ctx, sqlSetSchemaVersion, next.Sequence); err != nil {
				return s.migrateDenied(err, st)
			}
			if err := tx.Commit(ctx); err != nil {
				return err
			}
			st.Current = next.Sequence
			st.Applied++
			applied = true
			return nil
		})
		if err != nil || done {
			return st, s.mapErr(err)
		}
	}
}

// migrateDenied is a migration step refused for want of a grant, as the
// schema mismatch it leaves (the schema stays at st.Current): a role that
// may not change the schema (the runtime role, with auto_migrate on) cannot
// migrate it, which only the schema's owner can. Any other error is err.
func (s *Client) migrateDenied(err error, st SchemaStatus) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != pgerrcode.InsufficientPrivilege {
		return err
	}
	return &SchemaError{Msg: fmt.Sprintf("the database schema is at version %d and this binary needs version %d, and this role may not "+
		"migrate it (%s): run `ipamctl migrate up` as the schema's owner role (see the database setup guide)", st.Current, st.Latest, scrub(pe.Message, s.secret))}
}

// applyDefinitions applies the function definitions (migrations.Definitions)
// whose checksum differs from the one the database records, or all of them
// after a numbered migration ran (it may have replaced one), and records
// them (migration 21). It runs in Migrate's last transaction, under the
// migration lock.
func applyDefinitions(ctx context.Context, tx pgx.Tx, defs []migrations.Definition, all bool) error {
	rows, err := tx.Query(ctx, sqlDefinitionChecksums)
	if err != nil {
		return err
	}
	have := map[string]string{}
	var name, sum string
	if _, err := pgx.ForEachRow(rows, []any{&name, &sum}, func() error { have[name] = sum; return nil }); err != nil {
		return err
	}
	for _, d := range defs {
		if !all && have[d.Name] == d.Checksum {
			continue
		}
		// Sent without arguments: the file's statements go in one
		// simple-protocol message, as a migration's do.
		if _, err := tx.Exec(ctx, d.SQL); err != nil {
			return fmt.Errorf("function definition %s: %w", d.Name, err)
		}
		if _, err := tx.Exec(ctx, sqlRecordDefinition, d.Name, d.Checksum); err != nil {
			return err
		}
	}
	return nil
}

// SchemaStatus reads the schema version without changing anything.
func (s *Client) SchemaStatus(ctx context.Context) (SchemaStatus, error) {
	var st SchemaStatus
	var err error
	if st.Latest, err = LatestSchemaVersion(); err != nil {
		return st, err
	}
	err = s.pool.QueryRow(ctx, sqlSchemaVersion).Scan(&st.Current)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgerrcode.UndefinedTable {
		return st, nil
	}
	return st, s.mapErr(err)
}

// CheckSchema fails unless the database schema is exactly the one this binary
// was built for.
func (s *Client) CheckSchema(ctx context.Context) error {
	st, err := s.SchemaStatus(ctx)
	if err != nil {
		return err
	}
	if err := checkNotNewer(st); err != nil {
		return err
	}
	if st.Current < st.Latest {
		return &SchemaError{Msg: fmt.Sprintf("the database schema is at version %d but this binary needs version %d; run `ipamctl migrate up` as the schema's owner role, or let a provider that connects as that role migrate it (auto_migrate = true)", st.Current, st.Latest)}
	}
	return nil
}

func checkNotNewer(st SchemaStatus) error {
	if st.Current > st.Latest {
		return &SchemaError{Msg: fmt.Sprintf("the database schema is at version %d, newer than this binary knows (%d): upgrade the provider and ipamctl", st.Current, st.Latest)}
	}
	return nil
}
