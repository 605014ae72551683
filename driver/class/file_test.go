package class

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const twoClasses = `apiVersion: v1
kind: ConfigMap
metadata:
  name: ignored
---
apiVersion: secrets-store.csi.x-k8s.io/v1
kind: SecretProviderClass
metadata:
  name: db
  namespace: shop
spec:
  provider: aws
  parameters:
    region: eu-west-1
    objects: |
      - objectName: "db-password"
        objectType: "secretsmanager"
  secretObjects:
  - secretName: db
    type: Opaque
    data:
    - objectName: db-password
      key: password
---
apiVersion: secrets-store.csi.x-k8s.io/v1alpha1
kind: SecretProviderClass
metadata:
  name: anywhere
spec:
  provider: local
`

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFileResolver(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "classes.yaml", twoClasses)
	writeFile(t, dir, "notes.txt", "not a manifest")
	r := &FileResolver{Paths: []string{dir}}

	c, err := r.Resolve(t.Context(), "shop", "db")
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.Provider != "aws" || c.Spec.Parameters["region"] != "eu-west-1" {
		t.Fatalf("class = %+v", c.Spec)
	}
	if len(c.Spec.SecretObjects) != 1 || c.Spec.SecretObjects[0].Data[0].Key != "password" {
		t.Fatalf("secretObjects = %+v", c.Spec.SecretObjects)
	}
	if _, err := r.Resolve(t.Context(), "other", "db"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("class in another namespace: err = %v, want ErrNotFound", err)
	}
	if c, err := r.Resolve(t.Context(), "any", "anywhere"); err != nil || c.Spec.Provider != "local" {
		t.Fatalf("class without namespace: %v, %v", c, err)
	}
	_, err = r.Resolve(t.Context(), "shop", "missing")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"missing"`) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("err = %v, want ErrNotFound naming the class and the searched path", err)
	}
}

func TestFileResolverSingleFileAndMissingPath(t *testing.T) {
	f := writeFile(t, t.TempDir(), "spc.yml", twoClasses)
	if _, err := (&FileResolver{Paths: []string{f}}).Resolve(t.Context(), "shop", "db"); err != nil {
		t.Fatal(err)
	}
	_, err := (&FileResolver{Paths: []string{filepath.Join(t.TempDir(), "nope")}}).Resolve(t.Context(), "shop", "db")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "nope: no such file or directory") {
		t.Fatalf("missing path: err = %v", err)
	}
	// A path that is missing does not hide the classes of the others.
	if _, err := (&FileResolver{Paths: []string{filepath.Join(t.TempDir(), "nope"), f}}).Resolve(t.Context(), "shop", "db"); err != nil {
		t.Fatalf("a class beside a missing path: %v", err)
	}
}

// TestFileResolverBadFileFailsOnlyItsClasses: in a directory of class
// files, a file with an invalid class fails only that class, with an
// ErrInvalid naming the file, the document, the class, the field and the
// fix; a file that does not parse at all fails only the classes no other
// file defines, naming it; every other class resolves.
func TestFileResolverBadFileFailsOnlyItsClasses(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a-good.yaml", twoClasses)
	badField := writeFile(t, dir, "b-typo.yaml", "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\n"+
		"metadata:\n  name: cache\n  namespace: shop\nspec:\n  provider: aws\n  params:\n    region: eu-west-1\n")
	noProvider := writeFile(t, dir, "c-noprovider.yaml", "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\n"+
		"metadata:\n  name: queue\n")
	broken := writeFile(t, dir, "d-broken.yaml", "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata: [\n")
	r := &FileResolver{Paths: []string{dir}}

	for _, name := range []string{"db", "anywhere"} {
		if c, err := r.Resolve(t.Context(), "shop", name); err != nil || c.Name != name {
			t.Errorf("Resolve(%s) beside bad files: %v, %v; want the class", name, c, err)
		}
	}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"cache", []string{badField, `document 1 (class "cache")`, `unknown field "params"`, "fix the file"}},
		{"queue", []string{noProvider, `class "queue"`, "spec.provider is empty", "name the provider plugin"}},
	} {
		_, err := r.Resolve(t.Context(), "shop", tc.name)
		if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotFound) {
			t.Errorf("Resolve(%s): %v, want ErrInvalid", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Resolve(%s) error %q lacks %q", tc.name, err, w)
			}
		}
		if strings.Contains(err.Error(), broken) {
			t.Errorf("Resolve(%s) error %q blames an unrelated file", tc.name, err)
		}
	}
	// A class no readable file defines: not found, and the file that could
	// not be read is named as where it may be.
	_, err := r.Resolve(t.Context(), "shop", "nowhere")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), broken) || !strings.Contains(err.Error(), "document 1") {
		t.Errorf("Resolve(nowhere): %v, want ErrNotFound naming %s", err, broken)
	}
	// The class in another namespace is a different class: the typo does
	// not fail it.
	if _, err := r.Resolve(t.Context(), "other", "cache"); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) {
		t.Errorf("Resolve(other/cache): %v, want ErrNotFound only", err)
	}
	if _, err := r.Resolve(t.Context(), "shop", "nowhere"); errors.Is(err, ErrInvalid) {
		t.Errorf("Resolve(nowhere): %v, want ErrNotFound only", err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"no name", "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nspec:\n  provider: aws\n", "metadata.name"},
		{"no provider", "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: x\n", "spec.provider"},
		{"wrong group", "apiVersion: example.com/v1\nkind: SecretProviderClass\nmetadata:\n  name: x\n", "apiVersion"},
		{"unknown field", "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: x\nspec:\n  provider: aws\n  provder: typo\n", "provder"},
		{"bad yaml", "apiVersion: [\n", "document 1"},
		{"parameter not a string", "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: x\nspec:\n  provider: aws\n  parameters:\n    objects:\n    - a\n", "document 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(twoClasses))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("kind: SecretProviderClass\napiVersion: secrets-store.csi.x-k8s.io/v1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		classes, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		for _, c := range classes {
			if c.Name == "" || c.Spec.Provider == "" {
				t.Fatalf("accepted a class without name or provider: %+v", c)
			}
		}
	})
}
