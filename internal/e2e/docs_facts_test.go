package e2e

// Facts that several pages state, checked against their one source in the
// code: error samples (the real error text, docs_errors_test.go), event names (operator.EventTypes), error codes (the Code constants of
// ipam/internal/engine/errors.go and its sentinels), provider option
// defaults (the schema descriptions, generated into docs/index.md, and the
// ipam defaults behind them), the oldest supported Terraform (the one
// scripts/ensure-terraform.sh builds, which the tests run where no terraform
// is on PATH), and that the modules' fresh-clone walk-through can run beside
// make demo (its cluster's name and prefix are not the demo's).

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-version"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// factPages reads the pages of docPages.
func factPages(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range docPages(t, root) {
		out[p] = mustRead(t, filepath.Join(root, p))
	}
	return out
}

// lineOf is the line of byte offset i in s.
func lineOf(s string, i int) int { return strings.Count(s[:i], "\n") + 1 }

func TestDocsFacts(t *testing.T) {
	root := repoRoot(t)
	pages := factPages(t, root)

	t.Run("event names", func(t *testing.T) {
		known := operator.EventTypes()
		for old := range operator.EventTypeAliases() {
			known = append(known, old) // an older name, which filters accept
		}
		// An event name in backticks: `node.enrolled`, `instance.*`.
		re := regexp.MustCompile("`((?:cluster|pool|allocation|node|instance|env|env_ipv4|set)\\.[a-z0-9_.]*\\*?)`")
		n := 0
		for _, page := range sortedKeys(pages) {
			text := pages[page]
			for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
				name := text[m[2]:m[3]]
				n++
				ok := slices.Contains(known, name)
				if p, glob := strings.CutSuffix(name, "*"); glob {
					ok = slices.ContainsFunc(known, func(k string) bool { return strings.HasPrefix(k, p) })
				}
				if !ok {
					t.Errorf("%s:%d: `%s` is not an event type the IPAM writes (operator.EventTypes: %s)", page, lineOf(text, m[0]), name, strings.Join(known, ", "))
				}
			}
		}
		if n < 10 {
			t.Errorf("found only %d event names in the docs: the scan is broken", n)
		}
	})

	t.Run("error codes", func(t *testing.T) {
		codes, sentinels := errorCodes(t, root)
		// The production database guide's table: every code, and nothing else.
		page := "docs/guides/production-database.md"
		text := pages[page]
		i := strings.Index(text, "| code | cause | what to do |")
		if i < 0 {
			t.Fatalf("%s: no table of error codes", page)
		}
		listed := map[string]bool{}
		row := regexp.MustCompile("(?m)^\\| (`[a-z_]+`(?:, `[a-z_]+`)*) \\|")
		for _, m := range row.FindAllStringSubmatchIndex(text[i:], -1) {
			for _, c := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(text[i+m[2]:i+m[3]], -1) {
				listed[c[1]] = true
				if !slices.Contains(codes, c[1]) {
					t.Errorf("%s:%d: `%s` is not an error code of ipam/internal/engine/errors.go", page, lineOf(text, i+m[0]), c[1])
				}
			}
		}
		for _, c := range codes {
			if !listed[c] {
				t.Errorf("%s: the table of error codes lacks %s (ipam/internal/engine/errors.go)", page, c)
			}
		}
		// The Go API guide's table: each sentinel with the codes it matches.
		page = "docs/guides/go-api.md"
		text = pages[page]
		srow := regexp.MustCompile("(?m)^\\| `(Err[A-Za-z]+)` \\| ((?:`[a-z_]+`(?:, )?)+) \\|")
		seen := map[string]bool{}
		for _, m := range srow.FindAllStringSubmatchIndex(text, -1) {
			name := text[m[2]:m[3]]
			var got []string
			for _, c := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(text[m[4]:m[5]], -1) {
				got = append(got, c[1])
			}
			sort.Strings(got)
			seen[name] = true
			if want, ok := sentinels[name]; !ok {
				t.Errorf("%s:%d: ipam has no sentinel %s", page, lineOf(text, m[0]), name)
			} else if !slices.Equal(got, want) {
				t.Errorf("%s:%d: %s matches the codes %v (ipam/internal/engine/errors.go), the guide says %v", page, lineOf(text, m[0]), name, want, got)
			}
		}
		for name := range sentinels {
			if !seen[name] {
				t.Errorf("%s: the table of errors lacks %s (ipam/internal/engine/errors.go)", page, name)
			}
		}
	})

	t.Run("provider defaults", func(t *testing.T) {
		// The reference (docs/index.md, from the schema's descriptions).
		ref := map[string]string{}
		index := pages["docs/index.md"]
		for _, m := range regexp.MustCompile("(?m)^- `([a-z_]+)` \\([A-Za-z]+\\) (.*)$").FindAllStringSubmatch(index, -1) {
			if d := regexp.MustCompile("\\(default `([^`]+)`|`([^`]+)` \\(default\\)").FindStringSubmatch(m[2]); d != nil {
				ref[m[1]] = strings.Trim(d[1]+d[2], `"`)
			}
		}
		// The reference against the code's defaults.
		for name, want := range map[string]string{
			"max_connections":   strconv.Itoa(ipam.DefaultMaxConnections),
			"connect_timeout":   secs(ipam.DefaultConnectTimeout),
			"lock_timeout":      secs(ipam.DefaultLockTimeout),
			"statement_timeout": secs(ipam.DefaultStatementTimeout),
			"failover_timeout":  secs(ipam.DefaultFailoverTimeout),
			"actor":             ipam.DefaultActor,
			"auto_migrate":      "true",
			"plan_reservations": "true",
			"reservation_ttl":   "1h",
		} {
			if ref[name] != want {
				t.Errorf("docs/index.md: %s defaults to %q in the code, the schema description says %q", name, want, ref[name])
			}
		}
		// Every page that states a default against the reference.
		stated := regexp.MustCompile("`([a-z_]+)` \\(default `?\"?([^`\"):;,\\s]+)")
		table := regexp.MustCompile("(?m)^\\| `([a-z_]+)` / `--[a-z-]+` \\| `([^`]+)` \\|")
		for _, page := range sortedKeys(pages) {
			text := pages[page]
			for _, re := range []*regexp.Regexp{stated, table} {
				for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
					name, val := text[m[2]:m[3]], text[m[4]:m[5]]
					if want, ok := ref[name]; ok && val != want {
						t.Errorf("%s:%d: %s defaults to %s (docs/index.md, from the schema), not %s", page, lineOf(text, m[0]), name, want, val)
					}
				}
			}
		}
	})

	// Error samples against the real error text (see docs_errors_test.go).
	t.Run("error samples", func(t *testing.T) {
		codes, _ := errorCodes(t, root)
		variants, msgs, sums := errorVariants(), messageFormats(t, root), summaries(t, root)
		answerFormats = readAnswerFormats(t, root)
		n := 0
		for _, page := range sortedKeys(pages) {
			for _, s := range errorSamples(parseFences(t, root, page), codes) {
				n++
				if why := checkErrorSample(s, variants, msgs, sums); why != "" {
					t.Errorf("%s: the error sample is not what the provider prints: %s", s.f, why)
				}
			}
		}
		if n < 8 {
			t.Errorf("found only %d error samples in the docs: the scan is broken", n)
		}
	})

	// A script of the repository a page names (scripts/pgbouncer.sh, ...)
	// exists, and the production guide, where PgBouncer is discussed, names
	// the one that starts it.
	t.Run("scripts named", func(t *testing.T) {
		n := 0
		for _, page := range sortedKeys(pages) {
			text := pages[page]
			for _, m := range regexp.MustCompile(`scripts/[a-z0-9_-]+\.sh`).FindAllStringIndex(text, -1) {
				n++
				if _, err := os.Stat(filepath.Join(root, text[m[0]:m[1]])); err != nil {
					t.Errorf("%s:%d: %s does not exist", page, lineOf(text, m[0]), text[m[0]:m[1]])
				}
			}
		}
		if page := "docs/guides/production-database.md"; !strings.Contains(pages[page], "scripts/pgbouncer.sh start") {
			t.Errorf("%s discusses PgBouncer but does not say how scripts/pgbouncer.sh starts one", page)
		}
		if n < 3 {
			t.Errorf("found only %d script names in the docs: the scan is broken", n)
		}
	})

	// The node-enrollment README's "From a fresh clone" runs in the demo's
	// directory and server (.demo/pg), so after `make demo` its cluster
	// lands in the demo's database: its name and prefix must not be the
	// demo's (examples/quickstart, which make demo applies), or its apply
	// fails with the prefix overlap.
	t.Run("fresh clone beside the demo", func(t *testing.T) {
		clusters := func(text string) (names []string, prefixes []netip.Prefix) {
			for _, m := range regexp.MustCompile(`(?m)^\s*name\s*=\s*"([^"]+)"`).FindAllStringSubmatch(text, -1) {
				names = append(names, m[1])
			}
			for _, m := range regexp.MustCompile(`(?m)^\s*prefix\s*=\s*"([^"]+)"`).FindAllStringSubmatch(text, -1) {
				prefixes = append(prefixes, netip.MustParsePrefix(m[1]))
			}
			return names, prefixes
		}
		readme := freshCloneReadme
		block := pageBlock(t, readme, "fresh-clone") // the block TestFreshClone runs
		fresh, freshPrefixes := clusters(block)
		if !strings.Contains(block, ".demo/pg") || len(fresh) == 0 || len(freshPrefixes) == 0 {
			t.Fatalf("%s: no fresh-clone block using .demo/pg with a cluster's name and prefix", readme)
		}
		quickstart, err := filepath.Glob(filepath.Join(root, "examples", "quickstart", "*.tf"))
		if err != nil || len(quickstart) == 0 {
			t.Fatalf("examples/quickstart: %v", err)
		}
		var demo string
		for _, p := range quickstart {
			demo += mustRead(t, p)
		}
		demoNames, demoPrefixes := clusters(demo)
		if len(demoNames) == 0 || len(demoPrefixes) == 0 {
			t.Fatal("examples/quickstart: no cluster name and prefix found: the scan is broken")
		}
		for _, n := range fresh {
			if slices.Contains(demoNames, n) {
				t.Errorf("%s: the fresh clone's cluster %q is the demo's (examples/quickstart)", readme, n)
			}
		}
		for _, p := range freshPrefixes {
			for _, d := range demoPrefixes {
				if p.Overlaps(d) {
					t.Errorf("%s: the fresh clone's prefix %s overlaps the demo's %s (examples/quickstart): after make demo its apply fails", readme, p, d)
				}
			}
		}
	})

	t.Run("terraform versions", func(t *testing.T) {
		m := regexp.MustCompile(`(?m)^TERRAFORM_VERSION=v(\d+)\.(\d+)\.\d+$`).FindStringSubmatch(mustRead(t, filepath.Join(root, "scripts", "ensure-terraform.sh")))
		if m == nil {
			t.Fatal("scripts/ensure-terraform.sh: no TERRAFORM_VERSION")
		}
		oldest := m[1] + "." + m[2]
		minV := version.Must(version.NewVersion(oldest))
		// No page claims support below it.
		claim := regexp.MustCompile(`Terraform v?(\d+\.\d+)(?:\.\d+)?\+?(?: or later| and later| or newer|\+)|\(v?(\d+\.\d+)(?:\.\d+)? or newer\)`)
		for _, page := range sortedKeys(pages) {
			text := pages[page]
			for _, mm := range claim.FindAllStringSubmatchIndex(text, -1) {
				v := ""
				if mm[2] >= 0 {
					v = text[mm[2]:mm[3]]
				} else {
					v = text[mm[4]:mm[5]]
				}
				if version.Must(version.NewVersion(v)).LessThan(minV) {
					t.Errorf("%s:%d: says Terraform %s, below the oldest supported and tested, %s (scripts/ensure-terraform.sh)", page, lineOf(text, mm[0]), v, oldest)
				}
			}
		}
		// The places that state the oldest supported version state it.
		for _, want := range []struct{ file, re string }{
			{"README.md", `\| Terraform \| (\d+\.\d+) and later`},
			{"docs/index.md", `works with Terraform (\d+\.\d+) and later`},
			{"docs/guides/getting-started.md", `- Terraform (\d+\.\d+) or later`},
			{"examples/modules/cluster-bootstrap/versions.tf", `required_version = ">= (\d+\.\d+)\.0"`},
			{"examples/modules/environment-ipv4/versions.tf", `required_version = ">= (\d+\.\d+)\.0"`},
		} {
			text := mustRead(t, filepath.Join(root, want.file))
			mm := regexp.MustCompile(want.re).FindStringSubmatchIndex(text)
			switch {
			case mm == nil:
				t.Errorf("%s: no statement of the oldest supported Terraform (%s)", want.file, want.re)
			case text[mm[2]:mm[3]] != oldest:
				t.Errorf("%s:%d: says Terraform %s; the oldest supported and tested is %s (scripts/ensure-terraform.sh)", want.file, lineOf(text, mm[0]), text[mm[2]:mm[3]], oldest)
			}
		}
		// node-enrollment needs provider functions: its README says what its
		// versions.tf requires.
		req := regexp.MustCompile(`required_version = ">= (\d+\.\d+)\.0"`).FindStringSubmatch(mustRead(t, filepath.Join(root, "examples/modules/node-enrollment/versions.tf")))
		readme := mustRead(t, filepath.Join(root, "examples/modules/node-enrollment/README.md"))
		if req == nil || !strings.Contains(readme, "`terraform` ("+req[1]+" or newer)") || !strings.Contains(readme, "Terraform "+req[1]+" or later") {
			t.Errorf("examples/modules/node-enrollment/README.md does not state the Terraform its versions.tf requires (%v)", req)
		}
	})
}

func secs(d time.Duration) string { return strconv.Itoa(int(d/time.Second)) + "s" }

// errorCodes reads the Code constants of ipam/internal/engine/errors.go and, from
// the same file, the codes each sentinel matches.
func errorCodes(t *testing.T, root string) (codes []string, sentinels map[string][]string) {
	t.Helper()
	fset := token.NewFileSet()
	consts := map[string]string{}
	for _, name := range []string{"errors.go"} {
		f, err := parser.ParseFile(fset, filepath.Join(root, "ipam", "internal", "engine", name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i >= len(n.Values) {
						break
					}
					if lit, ok := n.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(id.Name, "Code") {
						consts[id.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			case *ast.CompositeLit:
				for _, e := range n.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					k, ok1 := kv.Key.(*ast.Ident)
					v, ok2 := kv.Value.(*ast.Ident)
					if ok1 && ok2 && strings.HasPrefix(k.Name, "Code") && strings.HasPrefix(v.Name, "Err") {
						if sentinels == nil {
							sentinels = map[string][]string{}
						}
						sentinels[v.Name] = append(sentinels[v.Name], k.Name)
					}
				}
			}
			return true
		})
	}
	for _, c := range consts {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	for name, ks := range sentinels {
		vals := make([]string, len(ks))
		for i, k := range ks {
			vals[i] = consts[k]
		}
		sort.Strings(vals)
		sentinels[name] = vals
	}
	if len(codes) < 10 || len(sentinels) < 10 {
		t.Fatalf("read %d codes and %d sentinels from ipam/: the parse is broken", len(codes), len(sentinels))
	}
	return codes, sentinels
}
