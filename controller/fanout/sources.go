package fanout

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
)

// ListPageSize is how many objects' metadata one page of a source list
// carries: the list's transient memory is one page, whatever the cluster
// holds.
const ListPageSize = 500

// Keep decides whether an object is a source worth remembering, from its
// metadata alone.
type Keep func(*metav1.PartialObjectMetadata) bool

// NewSourceInformer returns an informer over the metadata of the objects
// of resource (secrets, configmaps) in every namespace that keep accepts,
// and of nothing else. Sources are marked by annotations (reflector's),
// which the API server cannot select on; so the informer lists and
// watches every object's metadata (never its data), page by page, and
// drops at once whatever keep refuses: its store, and the memory it
// holds, grow with the sources only. An object that stops being kept
// (its annotations removed) leaves the store as if deleted.
func NewSourceInformer(md metadata.Interface, resource schema.GroupVersionResource, keep Keep) toolscache.SharedIndexInformer {
	lw := &sourceListWatch{client: md.Resource(resource), keep: keep}
	return toolscache.NewSharedIndexInformerWithOptions(lw, &metav1.PartialObjectMetadata{}, toolscache.SharedIndexInformerOptions{
		Indexers: toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc},
	})
}

// sourceListWatch lists and watches through the filter.
type sourceListWatch struct {
	client metadata.Getter
	keep   Keep
}

var (
	_ toolscache.ListerWatcherWithContext = (*sourceListWatch)(nil)
	_ toolscache.ListerWatcher            = (*sourceListWatch)(nil)
)

// List is ListWithContext without a context (client-go's older interface,
// which the informer constructor still takes).
func (lw *sourceListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch is WatchWithContext without a context.
func (lw *sourceListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported turns client-go's streaming list off
// for this informer: the paged list below bounds its transient memory
// and filters page by page.
func (*sourceListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// ListWithContext lists every page (a consistent snapshot: the pages
// share the first one's resource version) and keeps what keep accepts.
func (lw *sourceListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	out := &metav1.PartialObjectMetadataList{}
	page := metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector, Limit: ListPageSize}
	for {
		l, err := lw.client.List(ctx, page)
		if err != nil {
			return nil, fmt.Errorf("list sources: %w", err)
		}
		if out.ResourceVersion == "" {
			out.ResourceVersion = l.ResourceVersion
		}
		for i := range l.Items {
			if lw.keep(&l.Items[i]) {
				out.Items = append(out.Items, *trim(&l.Items[i]))
			}
		}
		if l.Continue == "" {
			return out, nil
		}
		page.Continue = l.Continue
	}
}

// WatchWithContext watches every object's metadata and lets through what
// keep accepts; a modified object keep refuses arrives as deleted (a
// no-op for one never kept).
func (lw *sourceListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := lw.client.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, lw.filter), nil
}

func (lw *sourceListWatch) filter(in watch.Event) (watch.Event, bool) {
	m, ok := in.Object.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, true // bookmarks, errors
	}
	switch in.Type {
	case watch.Added:
		if !lw.keep(m) {
			return in, false
		}
	case watch.Modified:
		if !lw.keep(m) {
			return watch.Event{Type: watch.Deleted, Object: trim(m)}, true
		}
	}
	in.Object = trim(m)
	return in, true
}

// trim drops the managed fields, the largest part of most metadata.
func trim(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	m.ManagedFields = nil
	return m
}
