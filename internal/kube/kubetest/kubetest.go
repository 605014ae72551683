// Package kubetest adapts controller-runtime's clients (its fake client with
// interceptors, a client of envtest's API server, its cache) to kube's
// Reader and Client, for tests: the driver itself links no
// controller-runtime.
package kubetest

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/internal/kube"
)

// Reader returns r as a kube.Reader.
func Reader(r client.Reader) kube.Reader { return reader{r} }

type reader struct{ r client.Reader }

func (a reader) Get(ctx context.Context, key types.NamespacedName, obj kube.Object) error {
	return a.r.Get(ctx, key, obj)
}

func (a reader) List(ctx context.Context, list kube.ObjectList, opts kube.ListOptions) error {
	return a.r.List(ctx, list, &client.ListOptions{
		Namespace: opts.Namespace, LabelSelector: opts.Labels, FieldSelector: opts.Fields, Limit: opts.Limit,
	})
}

// Client returns c as a kube.Client. Each call is the one call of c that
// does the same, so interceptors and wrappers of c see every request: an
// Apply is c.Apply.
func Client(c client.Client) kube.Client { return adapter{reader{c}, c} }

type adapter struct {
	kube.Reader
	c client.Client
}

func (a adapter) Create(ctx context.Context, obj kube.Object, fieldManager string) error {
	var opts []client.CreateOption
	if fieldManager != "" {
		opts = append(opts, client.FieldOwner(fieldManager))
	}
	return a.c.Create(ctx, obj, opts...)
}

func (a adapter) Update(ctx context.Context, obj kube.Object) error {
	return a.c.Update(ctx, obj)
}

func (a adapter) Delete(ctx context.Context, obj kube.Object, pre *metav1.Preconditions) error {
	var opts []client.DeleteOption
	if pre != nil {
		opts = append(opts, client.Preconditions(*pre))
	}
	return a.c.Delete(ctx, obj, opts...)
}

func (a adapter) Patch(ctx context.Context, obj kube.Object, pt types.PatchType, data []byte, fieldManager string) error {
	var opts []client.PatchOption
	if fieldManager != "" {
		opts = append(opts, client.FieldOwner(fieldManager))
	}
	return a.c.Patch(ctx, obj, client.RawPatch(pt, data), opts...)
}

func (a adapter) Apply(ctx context.Context, obj kube.Object, config []byte, fieldManager string) error {
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(config, &u.Object); err != nil {
		return err
	}
	if err := a.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.ForceOwnership, client.FieldOwner(fieldManager)); err != nil {
		return err
	}
	// u now holds the object as applied.
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}
