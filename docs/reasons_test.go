package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sourceFiles parses the module's Go files outside tests, hack/ and tests/.
func sourceFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	out := map[string]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch filepath.ToSlash(p) {
			case "../hack", "../tests", "../.git", "../bin", "../docs":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(strings.TrimPrefix(p, "../"))] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// constant is a string constant of the code.
type constant struct {
	file, name, value string
}

// stringConstants returns the string constants of the files whose names
// match keep.
func stringConstants(files map[string]*ast.File, keep func(file, name string) bool) []constant {
	var out []constant
	for path, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !keep(path, name.Name) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err == nil {
						out = append(out, constant{file: path, name: name.Name, value: v})
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b constant) int { return strings.Compare(a.file+a.name, b.file+b.name) })
	return out
}

// isReason reports whether a constant is a condition or event reason: an
// exported Reason* or Event* constant (see cluster,
// cluster/podstatus, controller/restart, cluster/secretobjects).
func isReason(_, name string) bool {
	for _, p := range []string{"Reason", "Event"} {
		if rest, ok := strings.CutPrefix(name, p); ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
			return true
		}
	}
	return false
}

// TestEveryReasonDocumented: every condition reason and event reason the
// code defines, and every condition type of the pod status, is named in
// troubleshooting.md.
func TestEveryReasonDocumented(t *testing.T) {
	doc := backticked(readDoc(t, "troubleshooting.md"))
	files := sourceFiles(t)
	reasons := stringConstants(files, isReason)
	if len(reasons) < 15 {
		t.Fatalf("found %d reason constants in the code, fewer than the 20 or so it has: is the parsing broken?", len(reasons))
	}
	conditions := stringConstants(files, func(file, name string) bool {
		return file == "apis/v1/secretproviderclasspodstatus_types.go" && strings.HasPrefix(name, "Condition")
	})
	if len(conditions) < 4 {
		t.Fatalf("found %d condition types in apis/v1, want at least 4", len(conditions))
	}
	for _, c := range append(reasons, conditions...) {
		if !doc[c.value] {
			t.Errorf("troubleshooting.md does not name `%s` (%s in %s)", c.value, c.name, c.file)
		}
	}
}

// grpcCodes returns the codes.X names a function of a file mentions.
func grpcCodes(t *testing.T, files map[string]*ast.File, file, fn string) []string {
	t.Helper()
	f := files[file]
	if f == nil {
		t.Fatalf("%s not found", file)
	}
	var out []string
	found := false
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn {
			continue
		}
		found = true
		ast.Inspect(fd, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				// codes.Code is the type, the rest are codes.
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "codes" && sel.Sel.Name != "Code" && !slices.Contains(out, sel.Sel.Name) {
					out = append(out, sel.Sel.Name)
				}
			}
			return true
		})
	}
	if !found {
		t.Fatalf("%s has no func %s", file, fn)
	}
	return out
}

// TestEveryGRPCCodeDocumented: every gRPC code the driver's one error
// mapping (driver/errors.go codeOf) and the provider kit's mapping
// (provider/server/errors.go codeOf) return is explained in
// troubleshooting.md.
func TestEveryGRPCCodeDocumented(t *testing.T) {
	doc := backticked(readDoc(t, "troubleshooting.md"))
	files := sourceFiles(t)
	for _, src := range []struct{ file, fn string }{
		{"driver/errors.go", "codeOf"},
		{"provider/server/errors.go", "codeOf"},
	} {
		cs := grpcCodes(t, files, src.file, src.fn)
		if len(cs) < 5 {
			t.Fatalf("%s %s returns %d codes, want more: is the parsing broken?", src.file, src.fn, len(cs))
		}
		for _, c := range cs {
			if !doc[c] {
				t.Errorf("troubleshooting.md does not explain `%s`, which %s (%s) returns", c, src.fn, src.file)
			}
		}
	}
}

// TestErrorTypesDocumented: every error_type of node_publish_error_total
// and rotation_reconcile_error_total (the errorType constants of
// driver/errortype.go) is in metrics.md.
func TestErrorTypesDocumented(t *testing.T) {
	doc := backticked(readDoc(t, "metrics.md"))
	types := stringConstants(sourceFiles(t), func(file, name string) bool {
		return file == "driver/errortype.go" && strings.HasPrefix(name, "errorType")
	})
	if len(types) < 8 {
		t.Fatalf("driver/errortype.go defines %d error types, want more: is the parsing broken?", len(types))
	}
	for _, c := range types {
		v := c.value
		if v == "" {
			v = `""` // the empty error_type is written as ""
		}
		if !doc[v] {
			t.Errorf("metrics.md does not name the error_type `%s` (%s)", v, c.name)
		}
	}
}

// TestReasonNamesUnambiguous: no two reason, event or condition constants
// share a name with different values anywhere in the code, so a name read
// in one package means the same string in every other.
func TestReasonNamesUnambiguous(t *testing.T) {
	consts := stringConstants(sourceFiles(t), func(_, name string) bool {
		return isReason("", name) || strings.HasPrefix(name, "Condition")
	})
	first := map[string]constant{}
	for _, c := range consts {
		if f, ok := first[c.name]; ok && f.value != c.value {
			t.Errorf("%s is %q in %s and %q in %s: give one of them the name of its value", c.name, f.value, f.file, c.value, c.file)
			continue
		}
		first[c.name] = c
	}
	if len(first) < 15 {
		t.Fatalf("found %d reason and condition names, fewer than the code has: is the parsing broken?", len(first))
	}
}
