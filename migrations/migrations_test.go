package migrations_test

import (
	"bufio"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/overlayipam/terraform-provider-ipam/migrations"
)

var update = flag.Bool("update", false, "record changed function definitions in functions/SUMS at the latest schema version")

var numbered = regexp.MustCompile(`^(\d+)_[a-z0-9_]+\.sql$`)

// numbers lists the numbered migrations' numbers, and fails on a file that
// is not one.
func numbers(t *testing.T) map[int][]string {
	t.Helper()
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := numbered.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("%s: a migration is named NNN_description.sql (lower case)", e.Name())
			continue
		}
		n, _ := strconv.Atoi(m[1])
		out[n] = append(out[n], e.Name())
	}
	return out
}

// Two migrations with one number (two branches each adding "the next one")
// are refused, as is a gap: tern would apply one of them and skip the other.
func TestMigrationNumbersAreUniqueAndContiguous(t *testing.T) {
	nums := numbers(t)
	for n := 1; n <= len(nums); n++ {
		switch files := nums[n]; len(files) {
		case 0:
			t.Errorf("no migration %03d (numbers run from 001 without gaps)", n)
		case 1:
		default:
			t.Errorf("migration %03d is %s: two migrations have one number; renumber the newer one", n, strings.Join(files, " and "))
		}
	}
	for n := range nums {
		if n < 1 || n > len(nums) {
			t.Errorf("migration %03d lies outside 001..%03d", n, len(nums))
		}
	}
}

var createFunction = regexp.MustCompile(`(?m)^CREATE OR REPLACE FUNCTION (\w+)\(`)

// Each definition file holds exactly one function, the one it is named
// after, as CREATE OR REPLACE (it is applied again on every change).
func TestDefinitionFilesHoldOneFunctionEach(t *testing.T) {
	defs, err := migrations.Definitions()
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) == 0 {
		t.Fatal("no function definitions")
	}
	for _, d := range defs {
		got := createFunction.FindAllStringSubmatch(d.SQL, -1)
		if len(got) != 1 || got[0][1] != d.Name {
			t.Errorf("functions/%s.sql defines %v; it must hold exactly CREATE OR REPLACE FUNCTION %s", d.Name, got, d.Name)
		}
		if strings.Contains(d.SQL, "---- create above") {
			t.Errorf("functions/%s.sql has a down part: definitions have none", d.Name)
		}
	}
}

type sumLine struct {
	version int
	name    string
	sum     string
}

func readSums(t *testing.T) []sumLine {
	t.Helper()
	f, err := os.Open("functions/SUMS")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sumLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var l sumLine
		if _, err := fmt.Sscanf(line, "%d %s %s", &l.version, &l.name, &l.sum); err != nil {
			t.Fatalf("functions/SUMS: %q: %v", line, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A changed function definition comes with a numbered migration: functions/
// SUMS records, for each definition, the schema version at which each of
// its contents was recorded, and a change recorded at the version of the
// previous one is refused. So two binaries of one schema version never
// apply two different definitions over each other, and an older binary
// refuses the newer schema instead. To record a change: add a numbered
// migration (it may only say which definition changed and why), then run
// go test ./migrations -run TestDefinitionChangesComeWithAMigration -update
func TestDefinitionChangesComeWithAMigration(t *testing.T) {
	defs, err := migrations.Definitions()
	if err != nil {
		t.Fatal(err)
	}
	latest := len(numbers(t))
	lines := readSums(t)
	last := map[string]sumLine{}
	for _, l := range lines {
		if p, ok := last[l.name]; ok && l.version <= p.version {
			t.Errorf("functions/SUMS: %s recorded at version %d after version %d: each change needs a new numbered migration", l.name, l.version, p.version)
		}
		if l.version > latest {
			t.Errorf("functions/SUMS: %s recorded at version %d, past the latest migration %03d", l.name, l.version, latest)
		}
		last[l.name] = l
	}
	var add []string
	for _, d := range defs {
		l, ok := last[d.Name]
		switch {
		case ok && l.sum == d.Checksum:
			continue
		case ok && l.version == latest:
			t.Errorf("functions/%s.sql changed, but its last change was recorded at version %d, the latest: add a numbered "+
				"migration for this change, then record it with -update", d.Name, latest)
			continue
		case !*update:
			t.Errorf("functions/%s.sql is not recorded in functions/SUMS at its current content: add a numbered migration "+
				"for the change, then run go test ./migrations -run TestDefinitionChangesComeWithAMigration -update", d.Name)
			continue
		}
		add = append(add, fmt.Sprintf("%d %s %s", latest, d.Name, d.Checksum))
	}
	if len(add) > 0 {
		f, err := os.OpenFile("functions/SUMS", os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, a := range add {
			if _, err := fmt.Fprintln(f, a); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("recorded %d definitions at version %d", len(add), latest)
	}
}
