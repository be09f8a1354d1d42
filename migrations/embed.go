// Package migrations holds the numbered SQL migrations of the IPAM schema,
// and the current definition of each of its functions.
//
// Files are named NNN_description.sql (tern's format: the up migration above
// the "---- create above / drop below ----" line, the down migration below).
// functions/NAME.sql holds the current definition of the function NAME (a
// CREATE OR REPLACE FUNCTION and its comment), applied after the numbered
// migrations whenever it changed (see Definitions and migration 21). They
// are embedded in every binary that applies them: the provider and ipamctl.
package migrations

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// FS holds the migration files and the function definitions.
//
//go:embed *.sql functions/*.sql
var FS embed.FS

// Definition is the current definition of one function.
type Definition struct {
	Name     string // the function's name, its file's name without .sql
	SQL      string
	Checksum string // hex SHA-256 of SQL
}

// Definitions lists the function definitions by name.
func Definitions() ([]Definition, error) {
	files, err := fs.Glob(FS, "functions/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := make([]Definition, 0, len(files))
	for _, f := range files {
		b, err := fs.ReadFile(FS, f)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		out = append(out, Definition{Name: strings.TrimSuffix(path.Base(f), ".sql"), SQL: string(b), Checksum: hex.EncodeToString(sum[:])})
	}
	return out, nil
}
