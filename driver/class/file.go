package class

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// FileResolver reads SecretProviderClass manifests from YAML files, so the
// publish pipeline runs without an API server. Each path is a file or a
// directory of *.yaml / *.yml / *.json files; a file may hold several
// documents separated by "---". Files are read on every Resolve, so edits
// take effect on the next publish.
//
// A class without metadata.namespace matches every namespace: a manifest
// written for `kubectl apply -n team` works unchanged.
type FileResolver struct {
	Paths []string
}

var _ Resolver = (*FileResolver)(nil)

// Resolve returns the class named name for a pod in namespace.
func (r *FileResolver) Resolve(ctx context.Context, namespace, name string) (*secretsstorev1.SecretProviderClass, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	classes, err := r.Load()
	if err != nil {
		return nil, err
	}
	for _, c := range classes {
		if c.Name == name && (c.Namespace == "" || c.Namespace == namespace) {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: %q in namespace %q (searched %s)", ErrNotFound, name, namespace, strings.Join(r.Paths, ", "))
}

// Load reads every class from the resolver's paths.
func (r *FileResolver) Load() ([]*secretsstorev1.SecretProviderClass, error) {
	files, err := r.files()
	if err != nil {
		return nil, err
	}
	var out []*secretsstorev1.SecretProviderClass
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read class file: %w", err)
		}
		classes, err := Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, classes...)
	}
	return out, nil
}

func (r *FileResolver) files() ([]string, error) {
	var files []string
	for _, p := range r.Paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("class path: %w", err)
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("class directory: %w", err)
		}
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
		}
	}
	sort.Strings(files)
	return files, nil
}

// Parse decodes every SecretProviderClass in a YAML or JSON stream of
// documents separated by "---". Documents of other kinds are ignored, so a
// whole application manifest can be given; a SecretProviderClass document
// that does not decode, or lacks a name or provider, is an error.
func Parse(data []byte) ([]*secretsstorev1.SecretProviderClass, error) {
	var out []*secretsstorev1.SecretProviderClass
	for i, doc := range splitDocuments(data) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("%w: document %d: %w", ErrInvalid, i+1, err)
		}
		if meta.Kind != "SecretProviderClass" {
			continue
		}
		if !strings.HasPrefix(meta.APIVersion, secretsstorev1.GroupName+"/") {
			return nil, fmt.Errorf("%w: document %d: apiVersion %q: want %s/v1", ErrInvalid, i+1, meta.APIVersion, secretsstorev1.GroupName)
		}
		c := &secretsstorev1.SecretProviderClass{}
		if err := yaml.UnmarshalStrict(doc, c); err != nil {
			return nil, fmt.Errorf("%w: document %d: %w", ErrInvalid, i+1, err)
		}
		if err := validate(c); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func validate(c *secretsstorev1.SecretProviderClass) error {
	switch {
	case c.Name == "":
		return fmt.Errorf("%w: metadata.name is empty: give the class a name", ErrInvalid)
	case c.Spec.Provider == "":
		return fmt.Errorf("%w: %s: spec.provider is empty: name the provider plugin, such as aws or local", ErrInvalid, c.Name)
	}
	return nil
}

func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if len(bytes.TrimSpace(cur.Bytes())) > 0 {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if bytes.Equal(bytes.TrimRight(line, " \t\r\n"), []byte("---")) {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	return docs
}
