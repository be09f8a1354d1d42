package e2e

// The documentation is tested: every fenced HCL, shell and Go block of
// README.md, docs/ (the guides come from templates/guides, the generated
// pages' examples from examples/) and the module READMEs runs in this test,
// or is marked as not runnable with a reason. A broken block fails the test
// with its file and line. Run it alone with
// TESTFLAGS="-run TestDocs" bash scripts/test.sh e2e.
//
// For contributors, the rules and the markers. A marker is an HTML comment on
// the line(s) right above a fence (blank lines between are allowed); Markdown
// renderers and the registry hide it.
//
//   - HCL (```terraform, ```hcl) in a guide or a README needs
//     <!-- file: NAME --> (the test writes the block to NAME in the page's
//     working directory; the page's shell blocks below then plan and apply it)
//     or <!-- not-run: REASON -->. A page whose blocks have no terraform block
//     gets a versions.tf with the provider's required_providers and an empty
//     provider block, which the reader's configuration has. What a page
//     assumes exists in the database (a cluster, addresses allocated
//     elsewhere) is made by its entry in pageSetups.
//   - Shell (```shell, ```sh, ```bash) runs as is, with bash -e, in the page's
//     working directory, one block after the other. Its environment is the
//     reader's after the page's setup: IPAM_DATABASE_URL names a fresh test
//     database, TF_CLI_CONFIG_FILE the dev_overrides configuration of the
//     provider built for the tests, and `terraform` and `ipamctl` are on PATH.
//     Interactive confirmations are answered "yes". After a block that applies
//     or imports, the test checks that `terraform plan` is empty.
//     <!-- test-setup: COMMAND --> runs COMMAND first (for what the page
//     assumes but does not show, e.g. an address allocated elsewhere);
//     <!-- not-run: REASON --> skips the block. README.md's `make demo` block
//     is marked <!-- run: demo -->: its lines run from the repository root as a
//     newcomer's (no IPAM_DATABASE_URL, so the demo starts its own server),
//     and the commands `make demo` prints are pasted and must work.
//   - Go (```go) needs <!-- go-example: FUNC... -->: every line of the block
//     (import lines among the file's imports, the others in order in the
//     bodies of the functions named, taken one after the other) appears in
//     ipam/example_test.go, whose Example functions call them; the unit tier
//     compiles that file and runs the Examples, checking their output. And
//     the block compiles as a reader pastes it (compileGoSnippets): alone in
//     a function of the scheduler's with ctx, databaseURL, db and client in
//     scope (those it does not declare), with the API's imports, so a
//     variable it declares and never uses fails. Or <!-- not-run: REASON -->.
//   - In the generated pages (docs/ outside docs/guides), an HCL or shell
//     block must be an examples/ file, verbatim; TestDocs/examples applies those
//     together (provider.tf, every resource.tf and the functions in one
//     configuration, then the data sources in a second), plans them empty,
//     imports with every import.sh and import block, and runs the list
//     resources with `terraform query` where the CLI has it.
//   - Other fences (output samples, SQL, connection strings) are not run. An
//     error sample ("Error: TITLE" and its paragraphs, or a bare message
//     starting with an error code) is checked against the real error text
//     by TestDocsFacts (docs_errors_test.go): the core's wording, the
//     provider's title and paragraphs, in its order; values and a tail cut
//     with "..." are free.
//     An output sample marked <!-- sample-of: COMMAND --> is checked: the test
//     runs COMMAND at that point of the page, and every line of the sample but
//     "..." must appear in its output, in order (its times stand for any).
//
// Facts that several pages state are checked against the code in
// TestDocsFacts: error samples, event names, error codes, provider option
// defaults and the oldest supported Terraform.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hashicorp/go-version"

	"github.com/overlayipam/terraform-provider-ipam/internal/testdb"
	"github.com/overlayipam/terraform-provider-ipam/internal/tfcli"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// fence is one fenced code block of a Markdown file.
type fence struct {
	file  string // relative to the repository root
	line  int    // of the opening ```
	lang  string // terraform/hcl -> hcl; sh/shell/bash -> shell; as written otherwise
	body  string
	marks map[string]string // the markers above it
}

func (f fence) String() string { return fmt.Sprintf("%s:%d", f.file, f.line) }

var (
	fenceOpen  = regexp.MustCompile("^(\\s*)```([A-Za-z0-9_-]*)\\s*$")
	fenceClose = regexp.MustCompile("^\\s*```\\s*$")
	markerRE   = regexp.MustCompile(`^\s*<!--\s*([a-z-]+):\s*(.*?)\s*-->\s*$`)
	// tfplugindocs writes "<!-- signature generated by tfplugindocs -->" above
	// a function's signature.
	generatedRE = regexp.MustCompile(`^\s*<!--\s*(.*generated by tfplugindocs)\s*-->\s*$`)
)

func normLang(l string) string {
	switch strings.ToLower(l) {
	case "terraform", "hcl", "tf":
		return "hcl"
	case "sh", "shell", "bash":
		return "shell"
	}
	return strings.ToLower(l)
}

// runnable reports whether the block's language must be run or marked.
func runnable(lang string) bool { return lang == "hcl" || lang == "shell" || lang == "go" }

// parseFences reads the fences of a Markdown file (path relative to root).
func parseFences(t *testing.T, root, rel string) []fence {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []fence
	for i := 0; i < len(lines); i++ {
		m := fenceOpen.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		f := fence{file: rel, line: i + 1, lang: normLang(m[2]), marks: map[string]string{}}
		for j := i - 1; j >= 0; j-- {
			if strings.TrimSpace(lines[j]) == "" {
				continue
			}
			if mm := markerRE.FindStringSubmatch(lines[j]); mm != nil {
				f.marks[mm[1]] = mm[2]
				continue
			}
			if mm := generatedRE.FindStringSubmatch(lines[j]); mm != nil {
				f.marks["not-run"] = mm[1]
				continue
			}
			break
		}
		indent := m[1]
		var body []string
		j := i + 1
		for ; j < len(lines) && !fenceClose.MatchString(lines[j]); j++ {
			body = append(body, strings.TrimPrefix(lines[j], indent))
		}
		if j == len(lines) {
			t.Errorf("%s:%d: the fence is never closed", rel, i+1)
		}
		f.body = strings.Join(body, "\n") + "\n"
		out = append(out, f)
		i = j
	}
	return out
}

// docPages lists README.md, every Markdown file under docs/ and the module
// READMEs.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{"README.md", "examples/modules/README.md"}
	more, err := filepath.Glob(filepath.Join(root, "examples", "modules", "*", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range more {
		rel, _ := filepath.Rel(root, p)
		pages = append(pages, rel)
	}
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			pages = append(pages, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pages)
	return pages
}

// generated reports whether a page of docs/ is rendered from the schema and
// examples/ (everything but the guides).
func generated(page string) bool {
	return strings.HasPrefix(page, "docs/") && !strings.HasPrefix(page, "docs/guides/")
}

// exampleFiles maps the content of every file under examples/ (except the
// modules, which TestModule* apply) to its path.
func exampleFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(filepath.Join(root, "examples"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() || strings.HasPrefix(rel, "examples/modules/") || strings.HasSuffix(p, ".md") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[strings.TrimSpace(string(data))] = rel
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDocs runs (or checks the markers of) every fenced block of README.md and
// docs/; see the top of this file.
func TestDocs(t *testing.T) {
	root := repoRoot(t)
	examples := exampleFiles(t, root)
	pages := map[string][]fence{}
	for _, page := range docPages(t, root) {
		fs := parseFences(t, root, page)
		pages[page] = fs
		for _, f := range fs {
			for m := range f.marks {
				if !slices.Contains([]string{"not-run", "file", "go-example", "test-setup", "sample-of", "run"}, m) {
					t.Errorf("%s: unknown marker <!-- %s: -->", f, m)
				}
			}
			if !runnable(f.lang) {
				continue
			}
			if reason, ok := f.marks["not-run"]; ok {
				if reason == "" {
					t.Errorf("%s: <!-- not-run: --> needs a reason", f)
				}
				continue
			}
			switch {
			case generated(page):
				if _, ok := examples[strings.TrimSpace(f.body)]; !ok {
					t.Errorf("%s: a %s block of a generated page is not an examples/ file verbatim (run make docs), nor marked <!-- not-run: reason -->", f, f.lang)
				}
			case f.lang == "hcl" && f.marks["file"] == "":
				t.Errorf("%s: an HCL block needs <!-- file: NAME --> (written to the page's working directory and run by its shell blocks) or <!-- not-run: reason -->", f)
			case f.lang == "go" && f.marks["go-example"] == "":
				t.Errorf("%s: a Go block needs <!-- go-example: FUNC... --> (its lines in those functions of ipam/example_test.go) or <!-- not-run: reason -->", f)
			}
		}
	}
	t.Run("go", func(t *testing.T) {
		var snippets []fence
		for _, page := range sortedKeys(pages) {
			for _, f := range pages[page] {
				if name := f.marks["go-example"]; f.lang == "go" && name != "" && f.marks["not-run"] == "" {
					checkGoExample(t, root, f, name)
					snippets = append(snippets, f)
				}
			}
		}
		compileGoSnippets(t, root, snippets)
	})
	t.Run("examples", func(t *testing.T) {
		t.Parallel()
		runExamples(t, root)
	})
	for _, page := range sortedKeys(pages) {
		if generated(page) || !hasRunnable(pages[page]) {
			continue
		}
		fs := pages[page]
		t.Run(page, func(t *testing.T) {
			t.Parallel()
			runPage(t, root, page, fs)
		})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func hasRunnable(fs []fence) bool {
	for _, f := range fs {
		if _, skip := f.marks["not-run"]; !skip && (f.lang == "shell" || f.lang == "hcl") {
			return true
		}
	}
	return false
}

// checkGoExample checks that every line of a Go block is in the Example.
func checkGoExample(t *testing.T, root string, f fence, name string) {
	t.Helper()
	path := filepath.Join(root, "ipam", "example_test.go")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]bool{}
	for _, im := range file.Imports {
		imports[strings.TrimSpace(string(src[fset.Position(im.Pos()).Offset:fset.Position(im.End()).Offset]))] = true
	}
	// The bodies of the functions named, one after the other.
	var body []string
	for _, fname := range strings.Fields(name) {
		found := false
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == fname && fn.Body != nil {
				found = true
				text := string(src[fset.Position(fn.Body.Pos()).Offset:fset.Position(fn.Body.End()).Offset])
				for _, l := range strings.Split(text, "\n") {
					body = append(body, strings.TrimSpace(l))
				}
			}
		}
		if !found {
			t.Errorf("%s: <!-- go-example: %s -->: ipam/example_test.go has no function %s", f, name, fname)
			return
		}
	}
	inImport := false
	next := 0
	for i, l := range strings.Split(f.body, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
		case l == "import (":
			inImport = true
		case inImport && l == ")":
			inImport = false
		case inImport:
			if !imports[l] {
				t.Errorf("%s:%d: the import %s is not among ipam/example_test.go's imports", f.file, f.line+1+i, l)
			}
		default:
			found := false
			for ; next < len(body); next++ {
				if body[next] == l {
					found, next = true, next+1
					break
				}
			}
			if !found {
				t.Errorf("%s:%d: this line is not in %s of ipam/example_test.go (in this order): %s", f.file, f.line+1+i, name, l)
				return
			}
		}
	}
}

// A Go block is pasted into a function of the scheduler's returning an
// error, with a context, the database URL, its pool and its IPAM client in
// scope (those the block does not declare itself: goSnippetScope), in a
// file importing the packages the API needs (and those the block imports).
var goSnippetScope = []struct{ name, typ string }{
	{"ctx", "context.Context"}, {"databaseURL", "string"}, {"db", "*pgxpool.Pool"}, {"client", "*ipam.Client"},
}

// declaredRE finds a block's top-level short variable declarations.
var declaredRE = regexp.MustCompile(`(?m)^([A-Za-z_][A-Za-z0-9_]*(?:, *[A-Za-z_][A-Za-z0-9_]*)*) :=`)

var goSnippetImports = []string{`"context"`, `"errors"`, `"fmt"`, `"net/netip"`, `"github.com/jackc/pgx/v5"`,
	`"github.com/jackc/pgx/v5/pgxpool"`, `"github.com/overlayipam/terraform-provider-ipam/ipam"`}

// compileGoSnippets compiles every Go block as a reader pastes it: each in
// a function of its own (goSnippetImports), with //line directives so that
// an error names the page's line. A block that declares a variable it never
// uses, or calls what the API does not have, fails here; checkGoExample only
// says that its lines are among the tested Example's.
func compileGoSnippets(t *testing.T, root string, snippets []fence) {
	t.Helper()
	if len(snippets) == 0 {
		t.Fatal("no Go blocks found: the scan is broken")
	}
	imports := slices.Clone(goSnippetImports)
	var funcs strings.Builder
	for i, f := range snippets {
		var declared []string
		for _, m := range declaredRE.FindAllStringSubmatch(f.body, -1) {
			for _, n := range strings.Split(m[1], ",") {
				declared = append(declared, strings.TrimSpace(n))
			}
		}
		var params, names []string
		for _, v := range goSnippetScope {
			if !slices.Contains(declared, v.name) {
				params, names = append(params, v.name+" "+v.typ), append(names, v.name)
			}
		}
		fmt.Fprintf(&funcs, "\nfunc snippet%d(%s) error {\n", i, strings.Join(params, ", "))
		if len(names) > 0 {
			fmt.Fprintf(&funcs, "\t%s = %s\n", strings.TrimSuffix(strings.Repeat("_, ", len(names)), ", "), strings.Join(names, ", "))
		}
		inImport := false
		for j, l := range strings.Split(strings.TrimRight(f.body, "\n"), "\n") {
			trimmed := strings.TrimSpace(l)
			switch {
			case trimmed == "import (":
				inImport = true
				continue
			case inImport && trimmed == ")":
				inImport = false
				continue
			case inImport:
				if trimmed != "" && !slices.Contains(imports, trimmed) {
					imports = append(imports, trimmed)
				}
				continue
			}
			fmt.Fprintf(&funcs, "//line %s:%d\n%s\n", f.file, f.line+1+j, l)
		}
		funcs.WriteString("\treturn nil\n}\n")
	}
	var src strings.Builder
	src.WriteString("// Code generated by TestDocs from the documentation's Go blocks. DO NOT EDIT.\n\npackage docsgo\n\nimport (\n")
	for _, im := range imports {
		src.WriteString("\t" + im + "\n")
	}
	src.WriteString(")\n\nvar _, _, _, _, _ = errors.Is, fmt.Sprint, netip.ParseAddr, pgx.ReadCommitted, pgxpool.New\n")
	src.WriteString(funcs.String())

	// An overlay adds the file to a package directory that does not exist,
	// inside the module: built with its go.mod, nothing is written to the tree.
	dir := t.TempDir()
	file := filepath.Join(dir, "snippets.go")
	if err := os.WriteFile(file, []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, "internal", "e2e", "docsgo_snippets")
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, []byte(fmt.Sprintf(`{"Replace":{%q:%q}}`, filepath.Join(pkg, "snippets.go"), file)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", overlay, "-o", os.DevNull, "./internal/e2e/docsgo_snippets")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the documentation's Go blocks do not compile as pasted into a function (%v):\n%s", err, out)
	}
}

// shellEnv is a reader's environment for the shell blocks of a page.
type shellEnv struct {
	t   *testing.T
	dir string // the working directory
	url string // the database
	env []string
}

var (
	toolBinOnce sync.Once
	toolBin     string
)

// toolDir is a directory with `terraform` (the tests' CLI) and `ipamctl`.
func toolDir(t *testing.T) string {
	t.Helper()
	ctl := ipamctl(t)
	toolBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ipam-docs-bin-")
		if err != nil {
			t.Fatal(err)
		}
		for name, target := range map[string]string{"terraform": terraformBin, "ipamctl": ctl} {
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		toolBin = dir
	})
	if toolBin == "" {
		t.Fatal("no tool directory")
	}
	return toolBin
}

func newShellEnv(t *testing.T, url, dir string) *shellEnv {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); {
		case k == "PATH", k == "IPAM_DATABASE_URL", k == "TF_CLI_CONFIG_FILE", k == "TF_LOG", k == "DEMO_DIR",
			strings.HasPrefix(k, "PG"):
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+toolDir(t)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"IPAM_DATABASE_URL="+url, "TF_CLI_CONFIG_FILE="+cliConfig, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1",
		// Failures read better without colour codes.
		"TF_CLI_ARGS_plan=-no-color", "TF_CLI_ARGS_apply=-no-color", "TF_CLI_ARGS_import=-no-color", "TF_CLI_ARGS_destroy=-no-color")
	return &shellEnv{t: t, dir: dir, url: url, env: env}
}

// run runs a shell script (bash -e) in the environment, answering "yes" to
// every question, and returns its combined output.
func (s *shellEnv) run(dir, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = s.env
	cmd.Stdin = strings.NewReader(strings.Repeat("yes\n", 20))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// emptyPlan fails the test, naming f, unless `terraform plan` finds nothing to do.
func (s *shellEnv) emptyPlan(f fence) {
	s.t.Helper()
	out, err := s.run(s.dir, "terraform plan -input=false -no-color -detailed-exitcode")
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		s.t.Errorf("%s: after this block, terraform plan is not empty:\n%s", f, out)
	default:
		s.t.Errorf("%s: after this block, terraform plan failed: %v\n%s", f, err, out)
	}
}

// pageSetups prepare the database and working directory of a page before its
// blocks run, for what the page assumes exists (given as IPAM_DATABASE_URL,
// the working directory and the shell environment).
var pageSetups = map[string]func(t *testing.T, s *shellEnv){
	// What the operations guide looks at: cluster prod, an instance on node
	// fra1-node-01 (which has instance blocks) and one whose instance is gone,
	// and the inventory of the live ones.
	"docs/guides/operations.md": func(t *testing.T, s *shellEnv) {
		c, ctx := s.client(t, "scheduler")
		s.must(t, "cluster", c.CreateClusterErr(ctx, "prod", "2001:db8::/48"))
		_, err := c.ScaleNodeBlocks(ctx, "prod", "fra1-node-01", ipam.BlockScaling{PrefixLength: 124, MinFree: 0.5, MaxFree: 1.5, MaxBlocks: 4})
		s.must(t, "node blocks", err)
		for _, inst := range []string{"web-1", "web-2"} {
			_, err := c.AllocateInstance(ctx, nil, ipam.InstanceRequest{ClusterID: "prod", InstanceID: inst, OrgID: "acme", EnvID: "shop-prod", NodeID: "fra1-node-01"})
			s.must(t, inst, err)
		}
		s.write(t, "live-instances.txt", "web-1\n")
	},
	// Addresses allocated outside the configuration that the guide imports.
	"docs/guides/plan-time-reservations.md": func(t *testing.T, s *shellEnv) {
		c, ctx := s.client(t, "scheduler")
		s.must(t, "cluster", c.CreateClusterErr(ctx, "prod", "2001:db8::/48"))
		_, err := c.CreatePool(ctx, ipam.Pool{ClusterID: "prod", Name: "public-v4", CIDRs: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}})
		s.must(t, "pool", err)
		_, err = c.AllocateNode(ctx, nil, ipam.NodeRequest{ClusterID: "prod", NodeID: "node-1"})
		s.must(t, "node-1", err)
		_, err = c.AllocateNode(ctx, nil, ipam.NodeRequest{ClusterID: "prod", NodeID: "node-2", Address: netip.MustParseAddr("2001:db8::2")})
		s.must(t, "node-2", err)
		_, err = c.AllocateEnvIPv4(ctx, nil, ipam.EnvIPv4Request{ClusterID: "prod", Pool: "public-v4", OrgID: "acme", EnvID: "shop", Address: netip.MustParseAddr("198.51.100.7")})
		s.must(t, "env shop", err)
	},
}

// client opens the page's database through the core, closed at the end of the test.
func (s *shellEnv) client(t *testing.T, actor string) (*docClient, context.Context) {
	t.Helper()
	ctx := context.Background()
	c, err := ipam.Open(ctx, ipam.Config{DatabaseURL: s.url, Actor: actor})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &docClient{c}, ctx
}

type docClient struct{ *ipam.Client }

// CreateClusterErr creates a cluster with the default settings.
func (c *docClient) CreateClusterErr(ctx context.Context, id, prefix string) error {
	_, err := c.CreateCluster(ctx, ipam.Cluster{ID: id, Prefix: netip.MustParsePrefix(prefix),
		NodeCooldown: ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown})
	return err
}

func (s *shellEnv) must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("page setup: %s: %v", what, err)
	}
}

func (s *shellEnv) write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

var applyRE = regexp.MustCompile(`(?m)^\s*terraform (apply|import)\b`)

// runPage runs the blocks of a guide (or README.md) in order.
func runPage(t *testing.T, root, page string, fs []fence) {
	url := testdb.New(t)
	s := newShellEnv(t, url, t.TempDir())
	if setup := pageSetups[page]; setup != nil {
		setup(t, s)
	}
	// A page that shows resources but not the terraform block gets the one
	// every configuration has.
	own := false
	for _, f := range fs {
		own = own || (f.marks["file"] != "" && strings.Contains(f.body, "required_providers"))
	}
	if !own {
		s.write(t, "versions.tf", "terraform {\n  required_providers {\n    ipam = { source = \"overlayipam/ipam\" }\n  }\n}\n\nprovider \"ipam\" {}\n")
	}
	for _, f := range fs {
		if _, skip := f.marks["not-run"]; skip {
			continue
		}
		if cmd := f.marks["test-setup"]; cmd != "" {
			if out, err := s.run(s.dir, cmd); err != nil {
				t.Fatalf("%s: the test-setup command failed: %v\n%s", f, err, out)
			}
		}
		if cmd := f.marks["sample-of"]; cmd != "" {
			out, err := s.run(s.dir, cmd)
			if err != nil {
				t.Fatalf("%s: %s (whose output the block shows) failed: %v\n%s", f, cmd, err, out)
			}
			checkSample(t, f, out)
			continue
		}
		switch f.lang {
		case "hcl":
			if err := os.WriteFile(filepath.Join(s.dir, f.marks["file"]), []byte(f.body), 0o600); err != nil {
				t.Fatal(err)
			}
		case "shell":
			if f.marks["run"] == "demo" {
				runDemoBlock(t, root, s, f)
				continue
			}
			out, err := s.run(s.dir, f.body)
			if err != nil {
				t.Fatalf("%s: the shell block failed (%v):\n%s\noutput:\n%s", f, err, f.body, out)
			}
			if applyRE.MatchString(f.body) {
				s.emptyPlan(f)
			}
		}
	}
}

var sampleTimeRE = regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b`)

// checkSample checks that the lines of a sample output block, but for lines
// "...", appear in out in the same order (leading and trailing blanks aside;
// a time, RFC 3339 in UTC to the second, stands for any such time).
func checkSample(t *testing.T, f fence, out string) {
	t.Helper()
	got := strings.Split(out, "\n")
	next := 0
	for i, l := range strings.Split(f.body, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l == "..." {
			continue
		}
		found := false
		for ; next < len(got); next++ {
			if sampleTimeRE.ReplaceAllString(strings.TrimSpace(got[next]), "TIME") == sampleTimeRE.ReplaceAllString(l, "TIME") {
				found, next = true, next+1
				break
			}
		}
		if !found {
			t.Errorf("%s:%d: the sample line is not in the output of %s (in this order): %s\noutput:\n%s", f.file, f.line+1+i, f.marks["sample-of"], l, out)
			return
		}
	}
}

// runDemoBlock runs README's `make demo` block line by line from the
// repository root, as a newcomer would: with neither IPAM_DATABASE_URL nor
// TF_CLI_CONFIG_FILE set, so the demo starts its own PostgreSQL, and with the
// demo in a temporary directory (DEMO_DIR) instead of .demo/. After `make
// demo` it pastes the commands the demo printed.
func runDemoBlock(t *testing.T, root string, s *shellEnv, f fence) {
	// Short: the server's unix socket lives under it.
	demoDir, err := os.MkdirTemp("", "demo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("bash", filepath.Join(root, "scripts", "pg.sh"), "stop", filepath.Join(demoDir, "pg")).Run()
		_ = os.RemoveAll(demoDir)
	})
	env := s.env[:0:0]
	for _, kv := range s.env {
		if k, _, _ := strings.Cut(kv, "="); k != "IPAM_DATABASE_URL" && k != "TF_CLI_CONFIG_FILE" {
			env = append(env, kv)
		}
	}
	s = &shellEnv{t: t, dir: s.dir, env: append(env, "DEMO_DIR="+demoDir)}
	for _, line := range strings.Split(f.body, "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		if cmd = strings.TrimSpace(cmd); cmd == "" {
			continue
		}
		out, err := s.run(root, cmd)
		if err != nil {
			t.Fatalf("%s: %s failed (%v):\n%s", f, cmd, err, out)
		}
		if cmd != "make demo" {
			continue
		}
		hints := demoHints(out)
		if len(hints) == 0 {
			t.Fatalf("%s: make demo printed no commands to paste:\n%s", f, out)
		}
		// Pasted into the shell that ran make demo, in the same directory.
		paste := "trap 'echo \"FAILED: $BASH_COMMAND\" >&2' ERR\n" + strings.Join(hints, "\n")
		if hout, err := s.run(root, paste); err != nil {
			t.Fatalf("%s: the commands make demo printed fail when pasted (%v):\n%s\nmake demo printed:\n%s", f, err, hout, out)
		} else if !strings.Contains(hout, "No changes.") {
			t.Errorf("%s: the pasted terraform plan of the demo is not empty:\n%s", f, hout)
		}
	}
}

// demoHints returns the commands scripts/demo.sh prints after "Paste these"
// (lines indented by two spaces, comments dropped).
func demoHints(out string) []string {
	var hints []string
	on := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.Contains(l, "Paste these"):
			on = true
		case on && strings.HasPrefix(l, "  "):
			if cmd, _, _ := strings.Cut(l, "  #"); strings.TrimSpace(cmd) != "" {
				hints = append(hints, strings.TrimSpace(cmd))
			}
		case on:
			on = false
		}
	}
	return hints
}

// cliVersion is the version of the tests' terraform.
func cliVersion(t *testing.T) *version.Version {
	t.Helper()
	out, err := exec.Command(terraformBin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`v(\d+\.\d+\.\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("cannot read the version of %s: %s", terraformBin, out)
	}
	return version.Must(version.NewVersion(string(m[1])))
}

// shown counts the values a Terraform output shows: what is not null or
// empty, in it and in its elements.
func shown(v any) int {
	switch v := v.(type) {
	case nil:
		return 0
	case string:
		if v == "" {
			return 0
		}
	case map[string]any:
		n := 0
		for _, e := range v {
			n += shown(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range v {
			n += shown(e)
		}
		return n
	}
	return 1
}

// runExamples applies the examples/ files that the generated pages show.
func runExamples(t *testing.T, root string) {
	url := testdb.New(t)
	ex := func(p string) string { return filepath.Join(root, "examples", p) }
	glob := func(pattern string) []string {
		m, err := filepath.Glob(ex(pattern))
		if err != nil || len(m) == 0 {
			t.Fatalf("no examples match %s", pattern)
		}
		sort.Strings(m)
		return m
	}
	copyTo := func(dir string, files ...string) {
		for _, p := range files {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(ex(""), p)
			name := strings.NewReplacer("/", "_").Replace(rel)
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	rel := func(p string) string { r, _ := filepath.Rel(root, p); return r }
	must := func(s *shellEnv, what []string, script string) string {
		t.Helper()
		out, err := s.run(s.dir, script)
		if err != nil {
			t.Fatalf("%s: %s failed (%v):\n%s", strings.Join(what, ", "), script, err, out)
		}
		return out
	}

	// The resources, the provider block and the functions: one configuration.
	resources := append([]string{ex("provider/provider.tf")}, glob("resources/*/resource.tf")...)
	if why := lacks(t, featureFunctions); why != "" {
		tfcli.NoteSkip(t, why+": examples/functions not applied")
	} else {
		resources = append(resources, glob("functions/*/function.tf")...)
	}
	names := make([]string, len(resources))
	for i, p := range resources {
		names[i] = rel(p)
	}
	a := newShellEnv(t, url, t.TempDir())
	copyTo(a.dir, resources...)
	must(a, names, "terraform apply -input=false -no-color -auto-approve")
	checkEmptyPlan(t, a, names)

	// Import: each resource forgotten and imported again, by its import.sh and
	// by its import block (by string id, and by identity on Terraform 1.12+).
	imports := glob("resources/*/import.sh")
	var addrs []string
	for _, p := range imports {
		addrs = append(addrs, addrOf(t, p))
	}
	names = make([]string, len(imports))
	for i, p := range imports {
		names[i] = rel(p)
	}
	for i, p := range imports { // as a user would: forget one, import it again
		must(a, []string{rel(p)}, "terraform state rm "+addrs[i]+" >/dev/null\n"+mustRead(t, p))
	}
	checkEmptyPlan(t, a, names)
	importBlocks := map[string][]string{"string id": glob("resources/*/import-by-string-id.tf")}
	if why := lacks(t, featureIdentity); why != "" {
		tfcli.NoteSkip(t, why+": examples/resources/*/import-by-identity.tf not applied")
	} else {
		importBlocks["identity"] = glob("resources/*/import-by-identity.tf")
	}
	for _, kind := range sortedKeys(importBlocks) {
		files := importBlocks[kind]
		names := make([]string, len(files))
		for i, p := range files {
			names[i] = rel(p)
		}
		must(a, names, "terraform state rm "+strings.Join(addrs, " ")+" >/dev/null")
		copyTo(a.dir, files...)
		out := must(a, names, "terraform apply -input=false -no-color -auto-approve")
		if want := fmt.Sprintf("%d imported", len(files)); !strings.Contains(out, want) {
			t.Errorf("%s: the apply did not say %q:\n%s", strings.Join(names, ", "), want, out)
		}
		checkEmptyPlan(t, a, names)
		for _, p := range files {
			rel, _ := filepath.Rel(ex(""), p)
			if err := os.Remove(filepath.Join(a.dir, strings.NewReplacer("/", "_").Replace(rel))); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The data sources read what the resources made, from a second configuration.
	data := append([]string{ex("provider/provider.tf")}, glob("data-sources/*/data-source.tf")...)
	names = make([]string, len(data))
	for i, p := range data {
		names[i] = rel(p)
	}
	d := newShellEnv(t, url, t.TempDir())
	copyTo(d.dir, data...)
	must(d, names, "terraform apply -input=false -no-color -auto-approve")
	checkEmptyPlan(t, d, names)
	// What they show a reader is what the resources made: no output is
	// empty (a filter that matches nothing, an address nobody holds).
	var outputs map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(must(d, names, "terraform output -json")), &outputs); err != nil || len(outputs) == 0 {
		t.Fatalf("%s: terraform output -json: %v (%d outputs)", strings.Join(names, ", "), err, len(outputs))
	}
	for name, o := range outputs {
		if shown(o.Value) == 0 {
			t.Errorf("%s: the output %q shows nothing: %v", strings.Join(names, ", "), name, o.Value)
		}
		if m, ok := o.Value.(map[string]any); ok && m["state"] != nil && m["state"] != "active" {
			t.Errorf("%s: the output %q shows an address in state %v, not one the resources hold", strings.Join(names, ", "), name, m["state"])
		}
	}

	// The list resources find them.
	if why := lacks(t, featureQuery); why != "" {
		tfcli.NoteSkip(t, why+": examples/list-resources not run")
	} else {
		q := newShellEnv(t, url, t.TempDir())
		copyTo(q.dir, ex("provider/provider.tf"))
		for _, p := range glob("list-resources/*/list-resource.tfquery.hcl") {
			_ = os.Remove(filepath.Join(q.dir, "query.tfquery.hcl"))
			if err := os.WriteFile(filepath.Join(q.dir, "query.tfquery.hcl"), []byte(mustRead(t, p)), 0o600); err != nil {
				t.Fatal(err)
			}
			out := must(q, []string{rel(p)}, "terraform query -no-color")
			if strings.TrimSpace(out) == "" {
				t.Errorf("%s: terraform query found nothing", rel(p))
			}
		}
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// addrOf is the resource address an import.sh imports to.
func addrOf(t *testing.T, importSh string) string {
	t.Helper()
	m := regexp.MustCompile(`terraform import ('[^']+'|\S+) `).FindStringSubmatch(mustRead(t, importSh))
	if m == nil {
		t.Fatalf("%s: no terraform import command", importSh)
	}
	return m[1]
}

func checkEmptyPlan(t *testing.T, s *shellEnv, what []string) {
	t.Helper()
	out, err := s.run(s.dir, "terraform plan -input=false -no-color -detailed-exitcode")
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		t.Errorf("%s: the plan after apply is not empty:\n%s", strings.Join(what, ", "), out)
	default:
		t.Errorf("%s: terraform plan failed: %v\n%s", strings.Join(what, ", "), err, out)
	}
}
