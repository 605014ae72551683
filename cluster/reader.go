package cluster

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/keymount/keymount/internal/kube"
)

// syncedReader reads from the node-scoped cache once it has synced, and from
// the API server directly until then: a cache read before the sync would
// miss objects, and the driver must serve kubelet while it waits.
type syncedReader struct {
	cache  kube.Reader
	live   kube.Reader
	synced func() bool
}

var _ kube.Reader = (*syncedReader)(nil)

func (r *syncedReader) reader() kube.Reader {
	if r.synced() {
		return r.cache
	}
	return r.live
}

func (r *syncedReader) Get(ctx context.Context, key types.NamespacedName, obj kube.Object) error {
	return r.reader().Get(ctx, key, obj)
}

func (r *syncedReader) List(ctx context.Context, list kube.ObjectList, opts kube.ListOptions) error {
	return r.reader().List(ctx, list, opts)
}
