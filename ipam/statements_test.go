package ipam

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sqlStarts are the words an SQL statement starts with (after trimming
// whitespace, case-insensitively); sqlFragments the starts, as the package
// writes them (upper case), of the pieces appended to one: a row lock, a
// filter, an order; sqlContains and sqlParam what only a statement (or a
// piece of one) contains.
var (
	sqlStarts = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "CREATE", "ALTER", "DROP",
		"LOCK", "RESET", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK", "TRUNCATE", "VALUES"}
	// sqlSet is a SET statement: a setting and its value, or what SET also
	// sets ("set member id %q is ..." is prose).
	sqlSet       = regexp.MustCompile(`(?i)^SET\s+(((LOCAL|SESSION)\s+)?[a-z_][a-z0-9_.]*\s*(=|TO\s)|(TRANSACTION|CONSTRAINTS|ROLE|SESSION\s+AUTHORIZATION)\s)`)
	sqlFragments = []string{"FOR UPDATE", "FOR NO KEY UPDATE", "FOR SHARE", "FOR KEY SHARE", "SKIP LOCKED",
		"WHERE", "AND", "OR", "ORDER BY", "GROUP BY", "LIMIT", "RETURNING", "ON CONFLICT", "FROM", "UNION"}
	sqlContains = []string{" FROM IPAM_", "INTO IPAM_", "UPDATE IPAM_", "JOIN IPAM_"}
	// sqlParam is a statement's parameter ($1), or its format ($%d).
	sqlParam = regexp.MustCompile(`\$([0-9]|%d)`)
)

// startsWithWord tells whether s starts with the word (or words) w, followed
// by the end or by a character that cannot continue a word: "SET x" and
// "SET\n" do, "settings" and "set_owner" do not.
func startsWithWord(s, w string) bool {
	if !strings.HasPrefix(s, w) {
		return false
	}
	if len(s) == len(w) {
		return true
	}
	c := s[len(w)]
	wordChar := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	return !wordChar
}

// looksLikeSQL tells whether a string literal's value is an SQL statement,
// or a piece of one.
func looksLikeSQL(s string) bool {
	t := strings.TrimSpace(s)
	u := strings.ToUpper(t)
	for _, w := range sqlStarts {
		if startsWithWord(u, w) {
			return true
		}
	}
	if sqlSet.MatchString(t) {
		return true
	}
	for _, w := range sqlFragments {
		if startsWithWord(t, w) {
			return true
		}
	}
	for _, w := range sqlContains {
		if strings.Contains(strings.ToUpper(s), w) {
			return true
		}
	}
	return sqlParam.MatchString(s)
}

// Every SQL statement of the package is written once, by name, in
// statements.go (the hand-out statements and their guards in handout.go,
// the fragments both share in fragments.go): a literal anywhere else that
// looks like SQL (or a piece of it) fails the test, named by file and line.
func TestSQLIsNamedInStatementsFile(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "statements.go" || name == "handout.go" || name == "fragments.go" {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Errorf("%s: %v", fset.Position(lit.Pos()), err)
				return true
			}
			if looksLikeSQL(s) {
				pos := fset.Position(lit.Pos())
				t.Errorf("%s:%d: SQL outside statements.go (name it there): %.60q", pos.Filename, pos.Line, s)
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("checked only %d files: is the test running in the package directory?", checked)
	}
}

// The check itself: statements and their pieces are found, prose is not.
func TestLooksLikeSQL(t *testing.T) {
	for _, s := range []string{"SELECT 1", "\n\tselect id FROM x", "INSERT INTO t", "UPDATE t SET a = 1", "DELETE FROM t",
		"WITH a AS (SELECT 1) SELECT 1", "CREATE TABLE t ()", "ALTER TABLE t", "DROP TABLE t", "LOCK TABLE t",
		"SET LOCAL x = 1", "set statement_timeout TO 5", "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "RESET ALL",
		" FOR UPDATE", "FOR UPDATE", " FOR SHARE SKIP LOCKED", " WHERE id = $1", " AND state = 'active'",
		" ORDER BY id", " LIMIT 1", "x FROM ipam_pools", "a INTO ipam_events", "SAVEPOINT s", "id = $1",
		"a.pool_id = $%d"} {
		if !looksLikeSQL(s) {
			t.Errorf("%q not taken for SQL", s)
		}
	}
	for _, s := range []string{"", "pool %s: no address left", "settings", "withdrawn", "updated", "selected pool",
		"allocation.released", "blocks/", "1 hour", "and so on", "where the pool is", "set_owner", "set",
		"set member id %q is not <owner_id>#<key>", "SETTINGS"} {
		if looksLikeSQL(s) {
			t.Errorf("%q taken for SQL", s)
		}
	}
}
