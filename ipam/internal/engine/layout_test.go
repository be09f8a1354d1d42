package engine

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The package's files stand in layers (DESIGN.md, "The ipam package's
// files"): a file uses only what files below it define, so that a reader
// can take the package from the bottom up (config, types and errors; the
// SQL; the connection and the Client; the address space; the engine; the
// public calls) and a change low down has no surprise above it. The test
// type-checks the package, draws an arrow from each file to each other
// file whose names it uses, and fails on any circle of arrows, naming the
// files and the names that close it.
func TestFilesAreLayered(t *testing.T) {
	uses, err := fileUses(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(uses) < 20 {
		t.Fatalf("only %d files use another: is the test running in the package directory?", len(uses))
	}
	for _, circle := range fileCircles(uses) {
		var why []string
		for _, a := range circle {
			for _, b := range circle {
				if names := uses[a][b]; len(names) > 0 {
					why = append(why, fmt.Sprintf("%s uses %s of %s", a, strings.Join(names, ", "), b))
				}
			}
		}
		t.Errorf("files in a circle (move what closes it down to the lower file): %s\n\t%s",
			strings.Join(circle, ", "), strings.Join(why, "\n\t"))
	}
}

// fileUses type-checks the package in dir (without its tests) and returns,
// per file, the other files whose package-level names (and methods and
// fields of its types) it uses, with those names, sorted.
func fileUses(dir string) (map[string]map[string][]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("engine", fset, files, info)
	if err != nil {
		return nil, err
	}
	set := map[string]map[string]map[string]bool{}
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != pkg || !declaredAtTop(pkg, obj) {
			continue
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if from == to {
			continue
		}
		if set[from] == nil {
			set[from] = map[string]map[string]bool{}
		}
		if set[from][to] == nil {
			set[from][to] = map[string]bool{}
		}
		set[from][to][obj.Name()] = true
	}
	out := map[string]map[string][]string{}
	for from, tos := range set {
		out[from] = map[string][]string{}
		for to, names := range tos {
			for n := range names {
				out[from][to] = append(out[from][to], n)
			}
			slices.Sort(out[from][to])
		}
	}
	return out, nil
}

// declaredAtTop: a package-level name, or a method or field (of a type
// declared at the package level), as opposed to a local.
func declaredAtTop(pkg *types.Package, obj types.Object) bool {
	if obj.Parent() == pkg.Scope() {
		return true
	}
	switch o := obj.(type) {
	case *types.Func:
		return o.Type().(*types.Signature).Recv() != nil
	case *types.Var:
		return o.IsField()
	}
	return false
}

// fileCircles are the strongly connected components of more than one file
// (Tarjan), each sorted.
func fileCircles(uses map[string]map[string][]string) [][]string {
	var nodes []string
	for a := range uses {
		nodes = append(nodes, a)
	}
	sort.Strings(nodes)
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	var visit func(string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		var next []string
		for w := range uses[v] {
			next = append(next, w)
		}
		sort.Strings(next)
		for _, w := range next {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var c []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				c = append(c, w)
				if w == v {
					break
				}
			}
			if len(c) > 1 {
				sort.Strings(c)
				out = append(out, c)
			}
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return out
}
