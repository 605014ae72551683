package harness

import (
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// WriteClass writes a SecretProviderClass named name for the local provider
// whose "objects" parameter is objectsYAML, a YAML list of
// {objectName, objectAlias, filePermission}. The driver reads it on the next
// publish.
func (h *Harness) WriteClass(name, objectsYAML string) {
	h.tb.Helper()
	h.WriteClassFor(name, ProviderName, map[string]string{"objects": objectsYAML})
}

// WriteClassFor writes a SecretProviderClass named name for any provider,
// with the given parameters.
func (h *Harness) WriteClassFor(name, provider string, parameters map[string]string) {
	h.tb.Helper()
	manifest := map[string]any{
		"apiVersion": "secrets-store.csi.x-k8s.io/v1",
		"kind":       "SecretProviderClass",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"provider": provider, "parameters": parameters},
	}
	data, err := yaml.Marshal(manifest)
	if err != nil {
		h.tb.Fatalf("encode class %s: %v", name, err)
	}
	h.writeFile(filepath.Join(h.ClassDir, name+".yaml"), data)
}

// RemoveClass deletes the manifest WriteClass wrote for name.
func (h *Harness) RemoveClass(name string) {
	h.tb.Helper()
	if err := os.Remove(filepath.Join(h.ClassDir, name+".yaml")); err != nil {
		h.tb.Fatalf("remove class %s: %v", name, err)
	}
}

// WriteObject writes an object of the local provider: the file name (a
// slash-separated path) under Root. The file is replaced atomically, so a
// concurrent provider call reads the old or the new contents.
func (h *Harness) WriteObject(name, contents string) {
	h.tb.Helper()
	h.writeFile(filepath.Join(h.Root, filepath.FromSlash(name)), []byte(contents))
}

// RemoveObject deletes an object of the local provider.
func (h *Harness) RemoveObject(name string) {
	h.tb.Helper()
	if err := os.Remove(filepath.Join(h.Root, filepath.FromSlash(name))); err != nil {
		h.tb.Fatalf("remove object %s: %v", name, err)
	}
}

// ObjectsYAML is the "objects" parameter listing names with their default
// alias and mode.
func ObjectsYAML(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString("- objectName: " + n + "\n")
	}
	return b.String()
}

func (h *Harness) writeFile(path string, data []byte) {
	h.tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		h.tb.Fatalf("create dir for %s: %v", path, err)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		h.tb.Fatalf("write %s: %v", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		h.tb.Fatalf("write %s: %v", path, err)
	}
}
