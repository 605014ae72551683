// Package crreader reads through a controller-runtime client as a
// kube.Reader: for the keymount CLI, whose discovery-backed client tells a
// missing CRD from a missing object, and for tests. The driver links no
// controller-runtime.
package crreader

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/internal/kube"
)

// New returns r as a kube.Reader.
func New(r client.Reader) kube.Reader { return reader{r} }

type reader struct{ r client.Reader }

func (a reader) Get(ctx context.Context, key types.NamespacedName, obj kube.Object) error {
	return a.r.Get(ctx, key, obj)
}

func (a reader) List(ctx context.Context, list kube.ObjectList, opts kube.ListOptions) error {
	return a.r.List(ctx, list, &client.ListOptions{
		Namespace: opts.Namespace, LabelSelector: opts.Labels, FieldSelector: opts.Fields, Limit: opts.Limit,
	})
}
