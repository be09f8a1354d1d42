package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
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
	var checked []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "statements.go" || name == "handout.go" || name == "fragments.go" {
			continue
		}
		checked = append(checked, name)
	}
	if len(checked) < 10 {
		t.Fatalf("checked only %d files: is the test running in the package directory?", len(checked))
	}
	eachStringLiteral(t, checked, func(pos token.Position, s string) {
		if looksLikeSQL(s) {
			t.Errorf("%s:%d: SQL outside statements.go (name it there): %.60q", pos.Filename, pos.Line, s)
		}
	})
}

// eachStringLiteral calls fn with every string literal of the named Go
// files, unquoted, and where it is.
func eachStringLiteral(t *testing.T, files []string, fn func(pos token.Position, s string)) {
	t.Helper()
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
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
			fn(fset.Position(lit.Pos()), s)
			return true
		})
	}
}

// The SQL of the statement files reads the clock once per statement: it
// calls ipam_now() only as a scalar sub-select, (SELECT ipam_now()), which
// the server runs once, or as the now_at column of a one-row relation.
// ipam_now() reads the test clock's table in PL/pgSQL at every call
// (DESIGN.md, "Cooldown and release"), and a call in a row's condition or
// select list runs once per row: a listing of a cluster of 1,000,000
// allocations spent most of its time in it.
func TestStatementsReadTheClockOnce(t *testing.T) {
	call := regexp.MustCompile(`ipam_now\(\)`)
	once := regexp.MustCompile(`SELECT ipam_now\(\)|ipam_now\(\) AS now_at`)
	found := 0
	eachStringLiteral(t, []string{"statements.go", "handout.go", "fragments.go"}, func(pos token.Position, s string) {
		all, good := len(call.FindAllStringIndex(s, -1)), len(once.FindAllStringIndex(s, -1))
		found += all
		if all > good {
			t.Errorf("%s:%d: ipam_now() called per row (write (SELECT ipam_now()), or read now_at): %.80q", pos.Filename, pos.Line, s)
		}
	})
	if found < 20 {
		t.Fatalf("found only %d calls of ipam_now(): is the test running in the package directory?", found)
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

// maxPositional is the most positional parameters ($1..$n) a statement may
// have: one with more is written with named parameters (named, @cluster),
// where a reader sees each parameter by its name and a call site gives
// each value by name.
const maxPositional = 5

// positionalParam is a positional parameter ($1) in a statement's text.
var positionalParam = regexp.MustCompile(`\$([0-9]+)`)

// highestPositional reads the package-level constants and variables of the
// files (and their functions) and returns, for each one that is a
// positional statement or a piece of one, the highest $n its text can hold:
// its own literals', and those of the constants and variables it is built
// from, whatever the expression that joins them (a concatenation, a
// strings.Replace, a function given the parameters' spelling: every string
// literal in it counts). A value that is a named statement (named, or a
// function that returns one) is not positional; its fragments are judged
// each by itself. A function counts its own literals only (what it refers
// to is judged where it is defined).
func highestPositional(files []*ast.File) map[string]int {
	values := map[string]ast.Expr{}
	namedFuncs := map[string]bool{"named": true}
	var funcs []*ast.FuncDecl
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					vs, ok := s.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							values[n.Name] = vs.Values[i]
						}
					}
				}
			case *ast.FuncDecl:
				funcs = append(funcs, d)
				if r := d.Type.Results; r != nil && len(r.List) == 1 {
					if id, ok := r.List[0].Type.(*ast.Ident); ok && id.Name == "namedStatement" {
						namedFuncs[d.Name.Name] = true
					}
				}
			}
		}
	}
	isNamed := func(e ast.Expr) bool {
		c, ok := e.(*ast.CallExpr)
		if !ok {
			return false
		}
		id, ok := c.Fun.(*ast.Ident)
		return ok && namedFuncs[id.Name]
	}
	literalMax := func(lit *ast.BasicLit) int {
		if lit.Kind != token.STRING {
			return 0
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return 0
		}
		hi := 0
		for _, m := range positionalParam.FindAllStringSubmatch(s, -1) {
			if n, _ := strconv.Atoi(m[1]); n > hi {
				hi = n
			}
		}
		return hi
	}
	memo := map[string]int{}
	var of func(name string) int
	of = func(name string) int {
		if hi, ok := memo[name]; ok {
			return hi
		}
		memo[name] = 0 // a cycle (none compiles) counts nothing twice
		hi := 0
		var walk func(n ast.Node) bool
		walk = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr: // a field's name is not a value
				ast.Inspect(n.Value, walk)
				return false
			case *ast.CallExpr:
				return !isNamed(n)
			case *ast.BasicLit:
				hi = max(hi, literalMax(n))
			case *ast.Ident:
				if _, ok := values[n.Name]; ok {
					hi = max(hi, of(n.Name))
				}
			}
			return true
		}
		ast.Inspect(values[name], walk)
		memo[name] = hi
		return hi
	}
	out := map[string]int{}
	for name := range values {
		if hi := of(name); hi > 0 {
			out[name] = hi
		}
	}
	for _, fd := range funcs {
		if namedFuncs[fd.Name.Name] || fd.Body == nil {
			continue
		}
		hi := 0
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if c, ok := n.(*ast.CallExpr); ok && isNamed(c) {
				return false
			}
			if lit, ok := n.(*ast.BasicLit); ok {
				hi = max(hi, literalMax(lit))
			}
			return true
		})
		if hi > 0 {
			out["func "+fd.Name.Name] = hi
		}
	}
	return out
}

// parseStatementFiles parses the files that write the package's statements.
func parseStatementFiles(t *testing.T) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range []string{"statements.go", "handout.go", "fragments.go"} {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// A statement with more than maxPositional parameters is written with
// named parameters (named): a positional one fails the test, by name, with
// its highest $n.
func TestStatementsWithManyParametersAreNamed(t *testing.T) {
	hi := highestPositional(parseStatementFiles(t))
	if hi["sqlLoadPool"] != 1 || hi["sqlOwnerRows"] != 5 {
		t.Fatalf("the scan misreads the statements (sqlLoadPool $%d, sqlOwnerRows $%d): fix highestPositional",
			hi["sqlLoadPool"], hi["sqlOwnerRows"])
	}
	var names []string
	for name := range hi {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if hi[name] > maxPositional {
			t.Errorf("%s has positional parameters up to $%d: write it with named parameters (named, @name), as sqlRelease is",
				name, hi[name])
		}
	}
}

// The scan itself: a statement's parameters are found in its own text, in
// the fragments it is built from and in the spelling it gives a function;
// a named statement, and what only it is built from, have none.
func TestHighestPositionalReadsFragments(t *testing.T) {
	const src = `package p
const frag = "a = $6"
const viaFragment = "SELECT 1 WHERE " + frag
var viaArgument = "UPDATE t SET " + set(spelling{kind: "$7"})
var viaReplace = strings.ReplaceAll(frag, "$6", "$2")
var namedOne = named("n", "SELECT 1 WHERE a = @a AND " + frag2)
const frag2 = "b = @b"
var viaNamedFunc = build(true)
func build(one bool) namedStatement { return named("b", "SELECT @x") }
func inline() string { return "SELECT $8" }
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := highestPositional([]*ast.File{f})
	want := map[string]int{"frag": 6, "viaFragment": 6, "viaArgument": 7, "viaReplace": 6, "func inline": 8}
	if !maps.Equal(got, want) {
		t.Errorf("highestPositional = %v, want %v", got, want)
	}
}
