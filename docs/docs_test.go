// Package docs_test keeps the documentation honest: every YAML example in
// docs/*.md decodes strictly into the Go type of its kind (an unknown or
// misspelt field fails), every kustomization renders against deploy/, and
// every reason, gRPC code, metric and flag the docs name exists in the code
// (and every reason and metric the code defines is documented). help_test.go
// holds the docs to the built binaries: their --help, what keymount convert
// reads, and every "has no equivalent" line. The
// integration test (docs_integration_test.go) applies the examples to a real
// API server with server-side dry run.
package docs_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	mirrorsv1alpha1 "github.com/keymount/keymount/apis/mirrors/v1alpha1"
	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	pushv1alpha1 "github.com/keymount/keymount/apis/push/v1alpha1"
	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	secretsstorev1alpha1 "github.com/keymount/keymount/apis/v1alpha1"
)

// foreignGroups are API groups of other projects whose manifests the
// migration guide shows as "before" examples. keymount has none of their Go
// types, so they are checked as YAML with an apiVersion, a kind and a name
// only, never applied, and only in the guide that compares them.
var foreignGroups = map[string]string{
	"external-secrets.io":            "migrating-from-external-secrets.md",
	"kubernetes-client.io":           "migrating-from-external-secrets.md",
	"generators.external-secrets.io": "migrating-from-external-secrets.md",
}

// kustomizeGroup is the group of kustomizations and components: they are
// decoded into kustomize's types and rendered (see TestKustomizationsRender).
const kustomizeGroup = "kustomize.config.k8s.io"

// example is one YAML document of a ```yaml block.
type example struct {
	file string // base name under docs/
	line int    // line of the block's opening fence
	doc  []byte
	kind string
	api  string
}

func (e example) String() string { return fmt.Sprintf("%s:%d (%s %s)", e.file, e.line, e.api, e.kind) }

func (e example) group() string {
	g, _, found := strings.Cut(e.api, "/")
	if !found {
		return ""
	}
	return g
}

// docFiles returns the Markdown files of docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Markdown files in docs/")
	}
	slices.Sort(files)
	return files
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// block is a fenced code block.
type block struct {
	file, lang string
	line       int
	body       string
}

// codeBlocks returns the fenced code blocks of a Markdown file.
func codeBlocks(t *testing.T, file string) []block {
	t.Helper()
	var out []block
	var cur *block
	var body strings.Builder
	sc := bufio.NewScanner(strings.NewReader(readDoc(t, file)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{file: file, lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: n}
			body.Reset()
		case cur != nil && trimmed == "```":
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: a code block is not closed", file, cur.line)
	}
	return out
}

// examples returns every document of every ```yaml block of docs/*.md.
func examples(t *testing.T) []example {
	t.Helper()
	var out []example
	for _, f := range docFiles(t) {
		for _, b := range codeBlocks(t, f) {
			if b.lang != "yaml" {
				continue
			}
			r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(b.body)))
			for {
				doc, err := r.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("%s:%d: %v", f, b.line, err)
				}
				if len(bytes.TrimSpace(stripComments(doc))) == 0 {
					continue
				}
				var tm struct {
					APIVersion string `json:"apiVersion"`
					Kind       string `json:"kind"`
				}
				if err := yaml.Unmarshal(doc, &tm); err != nil {
					t.Errorf("%s:%d: not YAML: %v", f, b.line, err)
					continue
				}
				out = append(out, example{file: f, line: b.line, doc: doc, kind: tm.Kind, api: tm.APIVersion})
			}
		}
	}
	return out
}

func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for l := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out.Write(l)
		}
	}
	return out.Bytes()
}

// scheme knows every kind an example may have: client-go's built-in types
// CustomResourceDefinitions and keymount's API.
func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, secretsstorev1.AddToScheme, secretsstorev1alpha1.AddToScheme,
		secretsyncv1alpha1.AddToScheme, mirrorsv1alpha1.AddToScheme, mirrorsv1alpha2.AddToScheme, pushv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// decodeStrict decodes a Kubernetes object, failing on unknown and
// duplicate fields.
func decodeStrict(t *testing.T, s *runtime.Scheme, e example) (runtime.Object, error) {
	t.Helper()
	obj, _, err := serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer().Decode(e.doc, nil, nil)
	return obj, err
}

// TestExamplesDecodeStrictly: every YAML example is an object of a known
// kind whose every field exists in that kind's Go type.
func TestExamplesDecodeStrictly(t *testing.T) {
	exs := examples(t)
	if len(exs) < 10 {
		t.Fatalf("found %d YAML examples in docs/*.md; the docs have more: is the extraction broken?", len(exs))
	}
	s := scheme(t)
	for _, e := range exs {
		switch {
		case e.api == "" || e.kind == "":
			t.Errorf("%s: an example without apiVersion and kind cannot be checked: show whole objects", e)
		case foreignGroups[e.group()] != "":
			checkForeign(t, e)
		case e.group() == kustomizeGroup:
			if _, err := decodeKustomization(e); err != nil {
				t.Errorf("%s: %v", e, err)
			}
		default:
			obj, err := decodeStrict(t, s, e)
			if err != nil {
				t.Errorf("%s: %v", e, err)
				continue
			}
			if name := objectName(obj); name == "" {
				t.Errorf("%s: metadata.name is empty", e)
			}
		}
	}
}

// checkForeign checks an example of another project's API: only where its
// guide compares it, YAML with a name.
func checkForeign(t *testing.T, e example) {
	t.Helper()
	if want := foreignGroups[e.group()]; e.file != want {
		t.Errorf("%s: examples of %s belong in %s only", e, e.group(), want)
	}
	var o struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(e.doc, &o); err != nil {
		t.Errorf("%s: %v", e, err)
		return
	}
	if o.Metadata.Name == "" || len(o.Spec) == 0 {
		t.Errorf("%s: want a named object with a spec", e)
	}
}

// decodeKustomization decodes a kustomization or component strictly.
func decodeKustomization(e example) (*types.Kustomization, error) {
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(e.doc, &k); err != nil {
		return nil, err
	}
	if k.Kind != types.KustomizationKind && k.Kind != types.ComponentKind {
		return nil, fmt.Errorf("kind %q: want %s or %s", k.Kind, types.KustomizationKind, types.ComponentKind)
	}
	return &k, nil
}

func objectName(obj runtime.Object) string {
	if m, ok := obj.(interface{ GetName() string }); ok {
		return m.GetName()
	}
	return ""
}

// backticked returns the set of `...` spans of a Markdown text.
var backtickSpan = regexp.MustCompile("`([^`\n]+)`")

func backticked(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range backtickSpan.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}
