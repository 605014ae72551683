//go:build integration

package docs_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/keymount/keymount/tests/k8senv"
)

// exampleNamespace is where namespaced examples without a namespace go.
const exampleNamespace = "default"

// TestExamplesApplyDryRun applies every YAML example, and every object the
// kustomization examples render, to a real kube-apiserver (with deploy/'s
// CRDs) with server-side apply, dry run and strict field validation: the
// API server's own validation and defaulting accept them. Examples of other
// projects' APIs (foreignGroups) are not applied.
func TestExamplesApplyDryRun(t *testing.T) {
	// Own control plane: the package's only one with keymount's CRDs (Shared would save nothing).
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"../deploy/crds"}})
	ctx := t.Context()
	applier, err := env.NewApplier()
	if err != nil {
		t.Fatal(err)
	}
	core, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	type object struct {
		from example
		obj  *unstructured.Unstructured
	}
	var objs []object
	for _, e := range examples(t) {
		switch {
		case foreignGroups[e.group()] != "":
		case e.group() == kustomizeGroup:
			if e.kind != "Kustomization" {
				continue
			}
			rendered, err := renderKustomization(t, e)
			if err != nil {
				t.Errorf("%s: kustomize: %v", e, err)
				continue
			}
			for _, y := range rendered {
				objs = append(objs, object{from: e, obj: toUnstructured(t, e, y)})
			}
		default:
			objs = append(objs, object{from: e, obj: toUnstructured(t, e, e.doc)})
		}
	}
	if len(objs) < 10 {
		t.Fatalf("%d objects to apply: the docs have more", len(objs))
	}

	// Namespaces the examples use exist for real: a dry run into a missing
	// namespace fails.
	for _, o := range objs {
		if ns := o.obj.GetNamespace(); ns != "" {
			ensureNamespace(ctx, t, core, ns)
		}
	}
	applied := 0
	for _, o := range objs {
		if err := applier.Apply(ctx, o.obj, "docs-test", exampleNamespace, true); err != nil {
			t.Errorf("%s: %s %q: server-side dry run: %v", o.from, o.obj.GetKind(), o.obj.GetName(), err)
			continue
		}
		applied++
	}
	t.Logf("applied %d objects with server-side dry run", applied)
}

func toUnstructured(t *testing.T, e example, doc []byte) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(doc, &m); err != nil {
		t.Fatalf("%s: %v", e, err)
	}
	return &unstructured.Unstructured{Object: m}
}

func ensureNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}
