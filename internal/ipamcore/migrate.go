package ipamcore

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

// VersionTable records the applied schema version (tern's format).
const VersionTable = "ipam_schema_version"

// SchemaStatus is the schema version the database has and the one this binary wants.
type SchemaStatus struct {
	Current int32
	Latest  int32
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

// Migrate applies the embedded migrations, each in its own transaction. Several
// processes may call it at once: tern serializes them with an advisory lock (on
// this rare, non-hot path). A database newer than this binary is refused.
func (s *Store) Migrate(ctx context.Context) (SchemaStatus, error) {
	var st SchemaStatus
	err := s.withConn(ctx, func(conn *pgx.Conn) error {
		m, err := migrate.NewMigrator(ctx, conn, VersionTable)
		if err != nil {
			return err
		}
		if err := m.LoadMigrations(migrations.FS); err != nil {
			return err
		}
		st.Latest = int32(len(m.Migrations))
		if st.Current, err = m.GetCurrentVersion(ctx); err != nil {
			return err
		}
		if err := checkNotNewer(st); err != nil {
			return err
		}
		if err := m.Migrate(ctx); err != nil {
			return err
		}
		st.Current, err = m.GetCurrentVersion(ctx)
		return err
	})
	return st, err
}

// SchemaStatus reads the schema version without changing anything.
func (s *Store) SchemaStatus(ctx context.Context) (SchemaStatus, error) {
	var st SchemaStatus
	var err error
	if st.Latest, err = LatestSchemaVersion(); err != nil {
		return st, err
	}
	err = s.pool.QueryRow(ctx, "SELECT version FROM "+VersionTable).Scan(&st.Current)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgerrcode.UndefinedTable {
		return st, nil
	}
	return st, s.mapErr(err)
}

// CheckSchema fails unless the database schema is exactly the one this binary
// was built for.
func (s *Store) CheckSchema(ctx context.Context) error {
	st, err := s.SchemaStatus(ctx)
	if err != nil {
		return err
	}
	if err := checkNotNewer(st); err != nil {
		return err
	}
	if st.Current < st.Latest {
		return &SchemaError{Msg: fmt.Sprintf("the database schema is at version %d but this binary needs version %d; run `ipamctl migrate up` as the schema owner, or set auto_migrate = true", st.Current, st.Latest)}
	}
	return nil
}

func checkNotNewer(st SchemaStatus) error {
	if st.Current > st.Latest {
		return &SchemaError{Msg: fmt.Sprintf("the database schema is at version %d, newer than this binary knows (%d): upgrade the provider and ipamctl", st.Current, st.Latest)}
	}
	return nil
}

func (s *Store) withConn(ctx context.Context, fn func(*pgx.Conn) error) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.mapErr(err)
	}
	defer c.Release()
	return s.mapErr(fn(c.Conn()))
}
