// Package migrations holds the numbered SQL migrations of the IPAM schema.
//
// Files are named NNN_description.sql (tern's format: the up migration above
// the "---- create above / drop below ----" line, the down migration below).
// They are embedded in every binary that applies them: the provider and ipamctl.
package migrations

import "embed"

// FS holds the migration files.
//
//go:embed *.sql
var FS embed.FS
