package docs_test

import (
	"go/ast"
	"path"
	"slices"
	"strings"
	"testing"
)

// driverEventPackages are the packages of keymount-driver's cluster side,
// which records the events on pods (and on the workloads it restarts)
// that README's "emits events on the pod" lists.
var driverEventPackages = []string{"cluster", "cluster/secretobjects", "controller/restart"}

// emittedEventReasons returns the reasons of the events the files of pkgs
// record: the reason argument (the third) of every Event, Eventf or event
// call, resolved to its constant's value. A reason passed on as a variable
// (a wrapper's parameter) is counted at the wrapper's callers.
func emittedEventReasons(t *testing.T, files map[string]*ast.File, pkgs []string) []string {
	t.Helper()
	inPkgs := func(file string) bool { return slices.Contains(pkgs, path.Dir(file)) }
	values := map[string]string{}
	for _, c := range stringConstants(files, func(file, _ string) bool { return inPkgs(file) }) {
		values[c.name] = c.value
	}
	var out []string
	for file, f := range files {
		if !inPkgs(file) {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 4 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !slices.Contains([]string{"Event", "Eventf", "event"}, sel.Sel.Name) {
				return true
			}
			var name string
			switch r := call.Args[2].(type) {
			case *ast.Ident:
				name = r.Name
			case *ast.SelectorExpr:
				name = r.Sel.Name
			}
			if v, ok := values[name]; ok && !slices.Contains(out, v) {
				out = append(out, v)
			}
			return true
		})
	}
	slices.Sort(out)
	return out
}

// TestREADMEEventListComplete: README's list of the events keymount-driver
// records names every event reason its cluster side emits, and only those.
func TestREADMEEventListComplete(t *testing.T) {
	readme := readDoc(t, "../README.md")
	start := strings.Index(readme, "- **emits events on the pod**")
	if start < 0 {
		t.Fatal(`README.md has no "- **emits events on the pod**" item`)
	}
	item := readme[start+2:]
	if end := strings.Index(item, "\n- **"); end >= 0 {
		item = item[:end]
	}
	listed := backticked(item)
	emitted := emittedEventReasons(t, sourceFiles(t), driverEventPackages)
	if len(emitted) < 8 {
		t.Fatalf("found %d event reasons in %v, fewer than the code emits: is the parsing broken?", len(emitted), driverEventPackages)
	}
	for _, r := range emitted {
		if !listed[r] {
			t.Errorf("README's event list does not name %s, which keymount-driver emits", r)
		}
	}
	for r := range listed {
		if !slices.Contains(emitted, r) {
			t.Errorf("README's event list names %s, which keymount-driver does not emit", r)
		}
	}
}
