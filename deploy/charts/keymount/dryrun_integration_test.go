package keymount_test

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/keymount/keymount/tests/k8senv"
)

// TestServerSideDryRun applies everything the chart installs (its CRDs and
// every rendered object) with each values file to a real kube-apiserver
// with the chart's CRDs installed, with server-side apply, dry run and
// strict field validation: the API server's validation, defaulting and
// admission accept them all.
func TestServerSideDryRun(t *testing.T) {
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"crds"}})
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	core, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", namespace, err)
	}

	var crds []*unstructured.Unstructured
	for _, f := range loadChart(t).CRDObjects() {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(f.File.Data, &u.Object); err != nil {
			t.Fatalf("%s: %v", f.Filename, err)
		}
		crds = append(crds, u)
	}
	for _, file := range valuesFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			objs := append(append([]*unstructured.Unstructured{}, crds...), render(t, file).objects...)
			for _, obj := range objs {
				gvk := obj.GroupVersionKind()
				m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Errorf("%s %s: %v", gvk, obj.GetName(), err)
					continue
				}
				var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
				if m.Scope.Name() == meta.RESTScopeNameNamespace {
					if obj.GetNamespace() != namespace {
						t.Errorf("%s %s is in namespace %q, want the release's %q", gvk.Kind, obj.GetName(), obj.GetNamespace(), namespace)
					}
					ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
				}
				data, err := obj.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
					FieldManager: "helm", Force: new(true), DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict",
				})
				if err != nil {
					t.Errorf("%s %s: server-side dry run: %v", gvk.Kind, obj.GetName(), err)
				}
			}
			t.Logf("applied %d objects with server-side dry run", len(objs))
		})
	}
}
