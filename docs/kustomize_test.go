package docs_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// overlayDir is where a kustomization example is rendered: the docs write
// them for a directory beside deploy/ (resources: [../deploy]).
const overlayDir = "/overlay"

// renderKustomization renders a kustomization example as `kubectl apply -k`
// would, in an in-memory copy of the repository's deploy/ at /deploy, and
// returns each rendered object as YAML.
func renderKustomization(t *testing.T, e example) ([][]byte, error) {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir("../deploy", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		rel, err := filepath.Rel("..", p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/", filepath.ToSlash(rel)), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.WriteFile(path.Join(overlayDir, "kustomization.yaml"), e.doc); err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, overlayDir)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		out = append(out, y)
	}
	return out, nil
}

// kustomizations are the Kustomization examples (components are rendered
// only through a kustomization that lists them).
func kustomizations(t *testing.T) []example {
	t.Helper()
	var out []example
	for _, e := range examples(t) {
		if e.group() == kustomizeGroup && e.kind == "Kustomization" {
			out = append(out, e)
		}
	}
	return out
}

// TestKustomizationsRender: every kustomization example renders against
// the repository's deploy/, and every object it renders decodes strictly.
func TestKustomizationsRender(t *testing.T) {
	ks := kustomizations(t)
	if len(ks) == 0 {
		t.Fatal("no kustomization example found: the quick start has one")
	}
	s := scheme(t)
	for _, e := range ks {
		objs, err := renderKustomization(t, e)
		if err != nil {
			t.Errorf("%s: kustomize: %v", e, err)
			continue
		}
		if len(objs) == 0 {
			t.Errorf("%s renders nothing", e)
		}
		for _, y := range objs {
			r := example{file: e.file, line: e.line, doc: y}
			if _, err := decodeStrict(t, s, r); err != nil {
				t.Errorf("%s: rendered object: %v", e, err)
			}
		}
	}
}
