package ipam_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The public packages name the engine's API: every name the engine exports
// is declared, under the same name, in exactly one of ipam (the client,
// requests and results, errors) and ipam/operator (the operator's reads and
// writes), as that engine name. A name the engine exports and neither
// facade names is unreachable for callers (or exported by accident); a name
// in both makes two homes for one thing.
func TestFacadeNamesEveryExport(t *testing.T) {
	engine := declared(t, filepath.Join("internal", "engine"), false)
	ipam := declared(t, ".", true)
	operator := declared(t, "operator", true)
	if len(engine) < 150 {
		t.Fatalf("the engine exports only %d names: is the test running in the package directory?", len(engine))
	}
	// The operator's view is the one name the facades give another name.
	renamed := map[string]string{"Operator": "Client", "OperatorOf": "New"}
	for name := range engine {
		want := name
		if r, ok := renamed[name]; ok {
			if operator[r] != name {
				t.Errorf("operator.%s names engine.%s, want engine.%s", r, operator[r], name)
			}
			continue
		}
		inIpam, inOp := ipam[want] == name, operator[want] == name
		switch {
		case !inIpam && !inOp:
			t.Errorf("engine.%s is named by neither ipam nor ipam/operator", name)
		case inIpam && inOp:
			t.Errorf("engine.%s is named by both ipam and ipam/operator", name)
		}
	}
	for _, f := range []map[string]string{ipam, operator} {
		for name, target := range f {
			if _, ok := engine[target]; !ok {
				t.Errorf("%s names engine.%s, which the engine does not export", name, target)
			}
		}
	}
}

// declared returns the exported package-level names of the non-test files
// in dir. For a facade (viaEngine), each maps to the engine name it stands
// for (engine.X in its alias, constant, variable or the call its function
// body returns); the engine's own names map to themselves.
func declared(t *testing.T, dir string, viaEngine bool) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	add := func(name string, target ast.Expr) {
		if !ast.IsExported(name) {
			return
		}
		if !viaEngine {
			out[name] = name
			return
		}
		if call, ok := target.(*ast.CallExpr); ok {
			target = call.Fun
		}
		if sel, ok := target.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "engine" {
				out[name] = sel.Sel.Name
				return
			}
		}
		t.Errorf("%s: %s is not an engine name under its own", dir, name)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					if d.Name.IsExported() && viaEngine {
						t.Errorf("%s: method %s: a facade declares no methods (they are the engine's)", f, d.Name.Name)
					}
					continue
				}
				var target ast.Expr
				if viaEngine && d.Body != nil && len(d.Body.List) == 1 {
					if r, ok := d.Body.List[0].(*ast.ReturnStmt); ok && len(r.Results) == 1 {
						target = r.Results[0]
					}
				}
				add(d.Name.Name, target)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if viaEngine && !s.Assign.IsValid() && s.Name.IsExported() {
							t.Errorf("%s: type %s is not an alias of the engine's", f, s.Name.Name)
						}
						add(s.Name.Name, s.Type)
					case *ast.ValueSpec:
						for i, n := range s.Names {
							var v ast.Expr
							if i < len(s.Values) {
								v = s.Values[i]
							}
							add(n.Name, v)
						}
					}
				}
			}
		}
	}
	return out
}
