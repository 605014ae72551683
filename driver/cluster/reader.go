package cluster

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// syncedReader reads from the node-scoped cache once it has synced, and from
// the API server directly until then: a cache read before the sync would
// wait for it, and the driver must serve kubelet while it waits.
type syncedReader struct {
	cache  client.Reader
	live   client.Reader
	synced func() bool
}

var _ client.Reader = (*syncedReader)(nil)

func (r *syncedReader) reader() client.Reader {
	if r.synced() {
		return r.cache
	}
	return r.live
}

func (r *syncedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return r.reader().Get(ctx, key, obj, opts...)
}

func (r *syncedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.reader().List(ctx, list, opts...)
}
