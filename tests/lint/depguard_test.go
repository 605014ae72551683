// Package lint_test proves that the import rules of .golangci.yml (depguard)
// refuse what they are meant to refuse: a copy of the module gains one
// package per rule that imports across a forbidden direction, and the pinned
// golangci-lint must report each of them, and nothing about the imports
// that are allowed.
package lint_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// violations are the packages added to the copy: path → source. Each
// imports one package its folder must not; the allowed ones import what
// their folder may.
var violations = map[string]struct {
	src  string
	rule string // "" when the import is allowed
}{
	"driver/zzviolation":     {src: `import _ "github.com/keymount/keymount/cluster"`, rule: "driver"},
	"driver/zzcontroller":    {src: `import _ "github.com/keymount/keymount/controller/secretsync"`, rule: "driver"},
	"cluster/zzviolation":    {src: `import _ "github.com/keymount/keymount/controller/restart"`, rule: "cluster"},
	"controller/zzviolation": {src: `import _ "github.com/keymount/keymount/driver"`, rule: "controller"},
	"controller/zzcluster":   {src: `import _ "github.com/keymount/keymount/cluster/podstatus"`, rule: "controller"},
	"controller/zzcsi":       {src: `import _ "github.com/container-storage-interface/spec/lib/go/csi"`, rule: "controller"},
	"controller/zzmount":     {src: `import _ "k8s.io/mount-utils"`, rule: "controller"},
	"internal/zzviolation":   {src: `import _ "github.com/keymount/keymount/driver"`, rule: "shared"},
	"internal/zzprovider":    {src: `import _ "github.com/keymount/keymount/provider/server"`, rule: "internal"},
	"provider/zzviolation":   {src: `import _ "github.com/keymount/keymount/cluster/podstatus"`, rule: "shared"},
	"provider/zzcontroller":  {src: `import _ "github.com/keymount/keymount/controller/tokens"`, rule: "shared"},
	"rotation/zzviolation":   {src: `import _ "github.com/keymount/keymount/driver/volume"`, rule: "rotation"},
	"apis/zzviolation":       {src: `import _ "github.com/keymount/keymount/rotation"`, rule: "apis"},
	"cluster/zzallowed":      {src: `import _ "github.com/keymount/keymount/driver"`},
	"controller/zzallowed":   {src: "import (\n\t_ \"github.com/keymount/keymount/provider/providerclient\"\n\t_ \"github.com/keymount/keymount/internal/kube\"\n\t_ \"github.com/keymount/keymount/rotation\"\n)"},
	"provider/zzallowed":     {src: `import _ "github.com/keymount/keymount/internal/atomicwrite"`},
	"apis/zzallowed":         {src: `import _ "github.com/keymount/keymount/apis/v1"`},
	"rotation/zzallowed":     {src: `import _ "github.com/keymount/keymount/apis/v1"`},
}

// TestImportRulesRefuseViolations runs depguard, as `make lint` configures
// it, over the added packages.
func TestImportRulesRefuseViolations(t *testing.T) {
	lint := golangciLint(t)
	root := moduleRoot(t)
	dir := t.TempDir()
	copyModule(t, root, dir)
	var pkgs []string
	for p, v := range violations {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		src := "package " + filepath.Base(p) + "\n\n" + v.src + "\n"
		if err := os.WriteFile(filepath.Join(dir, p, "v.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+p)
	}
	cmd := exec.CommandContext(t.Context(), lint, append([]string{"run", "--allow-parallel-runners", "--enable-only", "depguard"}, pkgs...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		t.Fatalf("golangci-lint found nothing in the violations:\n%s", out.String())
	}
	report := out.String()
	if strings.Contains(report, "typecheck") {
		t.Fatalf("golangci-lint could not load the packages:\n%s", report)
	}
	for p, v := range violations {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(p+"/v.go") + `:\d+:\d+: import '[^']+' is not allowed from list '([a-z]+)'`)
		m := re.FindStringSubmatch(report)
		switch {
		case v.rule == "" && m != nil:
			t.Errorf("%s: an allowed import was refused by rule %q", p, m[1])
		case v.rule != "" && m == nil:
			t.Errorf("%s: the forbidden import was not reported (want rule %q)", p, v.rule)
		case v.rule != "" && m[1] != v.rule:
			t.Errorf("%s: reported by rule %q, want %q", p, m[1], v.rule)
		}
	}
	if t.Failed() {
		t.Logf("golangci-lint said:\n%s", report)
	}
}

// golangciLint is the pinned golangci-lint `make lint` installs (make test
// runs lint first): $GOLANGCI_LINT, else the Makefile's path.
func golangciLint(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GOLANGCI_LINT"); p != "" {
		return p
	}
	mk, err := os.ReadFile(filepath.Join(moduleRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GOLANGCI_LINT_VERSION := (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no GOLANGCI_LINT_VERSION")
	}
	cache := os.Getenv("KEYMOUNT_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, ".cache", "keymount")
	}
	p := filepath.Join(cache, "bin", "golangci-lint-"+string(m[1]))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("golangci-lint %s is not installed (%v): run `make lint` (make test does) first", m[1], err)
	}
	return p
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// copyModule copies what golangci-lint needs: the Go files, go.mod,
// go.sum and .golangci.yml.
func copyModule(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if !strings.HasSuffix(p, ".go") && rel != "go.mod" && rel != "go.sum" && rel != ".golangci.yml" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
