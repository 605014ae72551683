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
//
// A bad file fails only the volumes of its classes: a class document that
// does not decode or validate fails the volumes naming that class (the
// error names the file, the document and the field); a file that cannot
// be read, or a document whose name cannot be read, fails only the volumes
// whose class no other file defines, naming it as the likely cause.
type FileResolver struct {
	Paths []string
}

var _ Resolver = (*FileResolver)(nil)

// Resolve returns the class named name for a pod in namespace.
func (r *FileResolver) Resolve(ctx context.Context, namespace, name string) (*secretsstorev1.SecretProviderClass, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	files, unreadable := r.files()
	var found *secretsstorev1.SecretProviderClass
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			unreadable = append(unreadable, fmt.Errorf("read class file: %w", err))
			continue
		}
		for _, d := range parseDocuments(data) {
			switch {
			case d.err != nil && !d.named:
				unreadable = append(unreadable, fmt.Errorf("class file %s: %w", f, d.err))
			case !d.matches(namespace, name):
			case d.err != nil:
				return nil, fmt.Errorf("class file %s, %w: fix the file (it is read again at the next publish); volumes of the other classes are not affected", f, d.err)
			case found == nil:
				found = d.class
			}
		}
	}
	if found != nil {
		return found, nil
	}
	err := fmt.Errorf("%w: %q in namespace %q (searched %s)", ErrNotFound, name, namespace, strings.Join(r.Paths, ", "))
	if len(unreadable) > 0 {
		// Their text only: the class is not found, whatever those hold.
		msgs := make([]string, len(unreadable))
		for i, e := range unreadable {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("%w; it may be in what could not be read: %s", err, strings.Join(msgs, "; "))
	}
	return nil, err
}

// files lists the class files of the paths, sorted, and the errors of the
// paths that cannot be read.
func (r *FileResolver) files() ([]string, []error) {
	var files []string
	var errs []error
	for _, p := range r.Paths {
		info, err := os.Stat(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("class path: %w", err))
			continue
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("class directory: %w", err))
			continue
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
	return files, errs
}

// Parse decodes every SecretProviderClass in a YAML or JSON stream of
// documents separated by "---". Documents of other kinds are ignored, so a
// whole application manifest can be given; a SecretProviderClass document
// that does not decode, or lacks a name or provider, is an error.
func Parse(data []byte) ([]*secretsstorev1.SecretProviderClass, error) {
	var out []*secretsstorev1.SecretProviderClass
	for _, d := range parseDocuments(data) {
		if d.err != nil {
			return nil, d.err
		}
		out = append(out, d.class)
	}
	return out, nil
}

// document is one SecretProviderClass document of a stream: its class, or
// the error that it is not a usable class (wrapping ErrInvalid, naming the
// document) and, when named, the name and namespace it was meant to have.
type document struct {
	class           *secretsstorev1.SecretProviderClass
	err             error
	named           bool
	name, namespace string
}

// matches reports whether the document is (or was meant to be) the class
// name for a pod in namespace.
func (d document) matches(namespace, name string) bool {
	return d.name == name && (d.namespace == "" || d.namespace == namespace)
}

// parseDocuments decodes the SecretProviderClass documents of data, and
// the documents that do not decode at all (whatever their kind).
func parseDocuments(data []byte) []document {
	var out []document
	for i, doc := range splitDocuments(data) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			out = append(out, document{err: fmt.Errorf("%w: document %d: %w", ErrInvalid, i+1, err)})
			continue
		}
		if meta.Kind != "SecretProviderClass" {
			continue
		}
		d := document{named: meta.Metadata.Name != "", name: meta.Metadata.Name, namespace: meta.Metadata.Namespace}
		where := fmt.Sprintf("document %d", i+1)
		if d.named {
			where += fmt.Sprintf(" (class %q)", d.name)
		}
		d.class, d.err = decode(doc, meta.APIVersion)
		if d.err != nil {
			d.class, d.err = nil, fmt.Errorf("%s: %w", where, d.err)
		}
		out = append(out, d)
	}
	return out
}

// decode decodes one SecretProviderClass document of apiVersion.
func decode(doc []byte, apiVersion string) (*secretsstorev1.SecretProviderClass, error) {
	if !strings.HasPrefix(apiVersion, secretsstorev1.GroupName+"/") {
		return nil, fmt.Errorf("%w: apiVersion %q: want %s/v1", ErrInvalid, apiVersion, secretsstorev1.GroupName)
	}
	c := &secretsstorev1.SecretProviderClass{}
	if err := yaml.UnmarshalStrict(doc, c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return c, validate(c)
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
