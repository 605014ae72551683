package k8senv

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// Applier applies objects of any kind the API server serves with
// server-side apply, as kubectl apply --server-side does.
type Applier struct {
	// Dynamic reads and writes any resource.
	Dynamic dynamic.Interface
	mapper  meta.RESTMapper
}

// NewApplier returns an Applier of the kinds e's API server serves now (a
// CRD installed later is not known to it).
func (e *Env) NewApplier() (*Applier, error) {
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, fmt.Errorf("k8senv: discover the API: %w", err)
	}
	return &Applier{Dynamic: dyn, mapper: restmapper.NewDiscoveryRESTMapper(groups)}, nil
}

// Apply applies obj as manager (forcing conflicts) with strict field
// validation; a namespaced object without a namespace goes to
// defaultNamespace. dryRun has the API server validate, default and admit
// it without storing it.
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured, manager, defaultNamespace string, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = a.Dynamic.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = defaultNamespace
		}
		ri = a.Dynamic.Resource(m.Resource).Namespace(ns)
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: manager, Force: &force, FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
	return err
}
