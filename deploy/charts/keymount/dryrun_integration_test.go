//go:build integration

package keymount_test

import (
	"context"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/keymount/keymount/tests/k8senv"
)

// applier applies objects of any kind with server-side apply.
type applier struct {
	*k8senv.Applier
}

func newApplier(t *testing.T, env *k8senv.Env) *applier {
	t.Helper()
	a, err := env.NewApplier()
	if err != nil {
		t.Fatal(err)
	}
	return &applier{a}
}

// apply applies obj as manager, with strict field validation; dryRun asks
// the API server to validate, default and admit it without storing it.
func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured, manager string, dryRun bool) error {
	return a.Apply(ctx, obj, manager, "", dryRun)
}

// crdNames lists the CustomResourceDefinitions on the API server.
func (a *applier) crdNames(ctx context.Context, t *testing.T) []string {
	t.Helper()
	list, err := a.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, crd := range list.Items {
		names = append(names, crd.GetName())
	}
	return names
}

// ensureNamespace creates the release's namespace (envtest's API server
// has only default).
func ensureNamespace(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", namespace, err)
	}
}

// chartCRDs returns the chart's crds/ as objects.
func chartCRDs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var crds []*unstructured.Unstructured
	for _, f := range loadChart(t).CRDObjects() {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(f.File.Data, &u.Object); err != nil {
			t.Fatalf("%s: %v", f.Filename, err)
		}
		crds = append(crds, u)
	}
	return crds
}

// sharedWithCRDs is the package's shared control plane with the chart's
// CRDs installed. Its tests store nothing cluster-scoped but namespaces of
// their own (TestServerSideDryRun's objects are dry runs; it creates the
// release namespace if missing) and assert on nothing another test creates.
func sharedWithCRDs(t *testing.T) *k8senv.Env {
	t.Helper()
	return k8senv.Shared(t, k8senv.Options{CRDDirectoryPaths: []string{"crds"}})
}

// TestServerSideDryRun applies everything the chart installs (its CRDs and
// every rendered object) with each values file to a real kube-apiserver
// with the chart's CRDs installed, with server-side apply, dry run and
// strict field validation: the API server's validation, defaulting and
// admission accept them all.
func TestServerSideDryRun(t *testing.T) {
	env := sharedWithCRDs(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ensureNamespace(ctx, t, cs)
	// Rendered for the API server's version, as helm install renders.
	sv, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	kv := chartutil.KubeVersion{Version: sv.GitVersion, Major: sv.Major, Minor: sv.Minor}
	a := newApplier(t, env)
	crds := chartCRDs(t)
	for _, file := range valuesFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			objs := append(append([]*unstructured.Unstructured{}, crds...), renderValuesAt(t, readValues(t, file), kv).objects...)
			for _, obj := range objs {
				if ns := obj.GetNamespace(); ns != "" && ns != namespace {
					t.Errorf("%s %s is in namespace %q, want the release's %q", obj.GetKind(), obj.GetName(), ns, namespace)
				}
				if err := a.apply(ctx, obj, "helm", true); err != nil {
					t.Errorf("%s %s: server-side dry run: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
			t.Logf("applied %d objects with server-side dry run", len(objs))
		})
	}
}
