package docs_test

import (
	"flag"
	"go/ast"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// otherTools are the flags of other tools (kubectl) that the docs' shell
// examples use; keymount's flags come from the code.
var otherTools = map[string]string{
	"all-namespaces":   "kubectl",
	"cascade":          "kubectl delete",
	"field-manager":    "kubectl apply",
	"field-selector":   "kubectl",
	"for":              "kubectl wait",
	"force-conflicts":  "kubectl apply",
	"ignore-not-found": "kubectl delete",
	"install":          "helm upgrade",
	"set":              "helm",
	"overwrite":        "kubectl annotate",
	"server-side":      "kubectl apply",
	"wait":             "kubectl delete",
	"all":              "crane/skopeo copy",
	"platform":         "docker buildx build",
	"build-arg":        "docker buildx build",
	"push":             "docker buildx build",
	"cluster-name":     "aws eks create-pod-identity-association",
}

// flagMethods are the flag.FlagSet methods that define a flag, with the
// index of the flag's name among their arguments.
var flagMethods = map[string]int{
	"BoolVar": 1, "StringVar": 1, "IntVar": 1, "Int64Var": 1, "UintVar": 1, "Uint64Var": 1,
	"Float64Var": 1, "DurationVar": 1, "Var": 1, "TextVar": 1,
	"Bool": 0, "String": 0, "Int": 0, "Int64": 0, "Uint": 0, "Uint64": 0, "Float64": 0, "Duration": 0,
	"Func": 0, "BoolFunc": 0,
}

// keymountFlags returns every flag a keymount binary defines: the flag
// definitions of cmd/ (also in maps of ignored upstream flags, which the
// binaries accept) and of provider/providercmd (--probe, which the
// provider binaries bind), and klog's flags, which every binary registers.
func keymountFlags(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for path, f := range sourceFiles(t) {
		if !strings.HasPrefix(path, "cmd/") && !strings.HasPrefix(path, "provider/providercmd/") {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if i, ok := flagMethods[sel.Sel.Name]; ok && i < len(n.Args) {
					if lit, ok := n.Args[i].(*ast.BasicLit); ok {
						if v, err := strconv.Unquote(lit.Value); err == nil {
							out[v] = true
						}
					}
				}
			case *ast.CompositeLit:
				// map[string]ignoredflags.Flag{"name": {...}}
				mt, ok := n.Type.(*ast.MapType)
				if !ok {
					return true
				}
				if sel, ok := mt.Value.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Flag" {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if lit, ok := kv.Key.(*ast.BasicLit); ok {
							if v, err := strconv.Unquote(lit.Value); err == nil {
								out[v] = true
							}
						}
					}
				}
			}
			return true
		})
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	fs.VisitAll(func(f *flag.Flag) { out[f.Name] = true })
	// The flag package answers -h and --help in every binary
	// (internal/cliflag prints the usage then).
	out["help"] = true
	return out
}

// docFlag is a --flag in the docs: after a space, backtick, bracket, quote
// or the start of a line, so that an em dash written as "--" in prose does
// not count (the docs use "—").
var docFlag = regexp.MustCompile("(?m)(?:^|[\\s`(\\[\"'])--([a-z][a-z0-9-]*[a-z0-9])")

// TestFlagsInDocsExist: every --flag the docs mention is a flag of a
// keymount binary (keymount-driver's, the providers', the CLI's, klog's)
// or of a tool in otherTools.
func TestFlagsInDocsExist(t *testing.T) {
	have := keymountFlags(t)
	for _, want := range []string{"enable-secret-rotation", "rotation-poll-interval", "sync-secrets", "metrics-addr", "provider-health-check", "v"} {
		if !have[want] {
			t.Fatalf("the flags found in cmd/ lack --%s: is the parsing broken? found %d", want, len(have))
		}
	}
	for _, f := range append(docFiles(t), "../README.md") {
		seen := map[string]bool{}
		for _, m := range docFlag.FindAllStringSubmatch(readDoc(t, f), -1) {
			name := m[1]
			if seen[name] || have[name] || otherTools[name] != "" {
				continue
			}
			seen[name] = true
			t.Errorf("%s mentions --%s, which no keymount binary defines", f, name)
		}
	}
	var unused []string
	for name := range otherTools {
		if have[name] {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		slices.Sort(unused)
		t.Errorf("otherTools lists keymount's own flags %v: remove them there", unused)
	}
}
