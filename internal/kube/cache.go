package kube

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/keymount/keymount/internal/panics"
)

// Watch is one kind a Cache serves, and its scope.
type Watch struct {
	// Object is an empty object of the kind, such as &corev1.Pod{}.
	Object Object
	// Labels and Fields, when set, scope the watch: the cache holds only
	// the objects they select.
	Labels labels.Selector
	Fields fields.Selector
	// Transform, when set, replaces each object before it is stored (to
	// drop what the driver never reads).
	Transform toolscache.TransformFunc
}

// ListOptions are the watch's scope as list options.
func (w Watch) ListOptions() ListOptions {
	return ListOptions{Labels: w.Labels, Fields: w.Fields}
}

// Cache serves reads of the watched kinds from informers, which list and
// watch the API server in the background. A read of any other kind fails:
// no code path can start a cluster-wide watch by accident. Reads copy: a
// caller may change what it read.
type Cache struct {
	informers map[schema.GroupKind]*informer
}

var _ Reader = (*Cache)(nil)

type informer struct {
	gvk      schema.GroupVersionKind
	resource schema.GroupResource
	informer toolscache.SharedIndexInformer
}

// NewCache returns a cache of watches, read through api. Start runs it.
func NewCache(api *API, watches []Watch) (*Cache, error) {
	c := &Cache{informers: map[schema.GroupKind]*informer{}}
	for _, w := range watches {
		gk, err := kindOf(w.Object)
		if err != nil {
			return nil, err
		}
		rc, ok := api.clients[gk]
		if !ok {
			return nil, fmt.Errorf("kube: no client for %s", gk)
		}
		if _, dup := c.informers[gk]; dup {
			return nil, fmt.Errorf("kube: %s is watched twice", gk)
		}
		inf, err := newInformer(api, rc.gvk, w)
		if err != nil {
			return nil, err
		}
		c.informers[gk] = &informer{gvk: rc.gvk, resource: rc.GroupResource(), informer: inf}
	}
	return c, nil
}

func newInformer(api *API, gvk schema.GroupVersionKind, w Watch) (toolscache.SharedIndexInformer, error) {
	scope := w.ListOptions().listOptions()
	listKind := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector, opts.FieldSelector = scope.LabelSelector, scope.FieldSelector
			obj, err := scheme.New(listKind)
			if err != nil {
				return nil, err
			}
			list, ok := obj.(ObjectList)
			if !ok {
				return nil, fmt.Errorf("kube: %T is no list", obj)
			}
			return list, api.list(ctx, list, "", opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector, opts.FieldSelector = scope.LabelSelector, scope.FieldSelector
			opts.AllowWatchBookmarks = true
			return api.watch(ctx, w.Object, "", opts)
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, w.Object, 0,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if w.Transform != nil {
		if err := inf.SetTransform(w.Transform); err != nil {
			return nil, err
		}
	}
	return inf, nil
}

// Start runs the informers until ctx ends; it does not wait for them.
func (c *Cache) Start(ctx context.Context) {
	for _, i := range c.informers {
		go i.informer.RunWithContext(ctx)
	}
}

// WaitForSync waits until every informer has listed its objects once, and
// reports whether they did before ctx ended.
func (c *Cache) WaitForSync(ctx context.Context) bool {
	synced := make([]toolscache.InformerSynced, 0, len(c.informers))
	for _, i := range c.informers {
		synced = append(synced, i.informer.HasSynced)
	}
	return toolscache.WaitForCacheSync(ctx.Done(), synced...)
}

func (c *Cache) informerFor(obj runtime.Object) (*informer, error) {
	gk, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	i, ok := c.informers[gk]
	if !ok {
		return nil, fmt.Errorf("kube: the cache does not watch %s", gk)
	}
	return i, nil
}

// Get implements Reader.
func (c *Cache) Get(_ context.Context, key types.NamespacedName, obj Object) error {
	i, err := c.informerFor(obj)
	if err != nil {
		return err
	}
	k := key.Name
	if key.Namespace != "" {
		k = key.Namespace + "/" + key.Name // as toolscache.MetaNamespaceKeyFunc
	}
	item, ok, err := i.informer.GetIndexer().GetByKey(k)
	if err != nil {
		return err
	}
	if !ok {
		return apierrors.NewNotFound(i.resource, key.Name)
	}
	return i.copyInto(item, obj)
}

// List implements Reader. It selects by namespace and labels; a field
// selector or a limit is refused (the API server's List has them).
func (c *Cache) List(_ context.Context, list ObjectList, opts ListOptions) error {
	if opts.Fields != nil || opts.Limit > 0 {
		return errors.New("kube: the cache lists by namespace and labels only")
	}
	i, err := c.informerFor(list)
	if err != nil {
		return err
	}
	var items []any
	if opts.Namespace != "" {
		items, err = i.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, opts.Namespace)
		if err != nil {
			return err
		}
	} else {
		items = i.informer.GetIndexer().List()
	}
	objs := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		m, err := meta.Accessor(item)
		if err != nil {
			return err
		}
		if opts.Labels != nil && !opts.Labels.Matches(labels.Set(m.GetLabels())) {
			continue
		}
		o, ok := item.(runtime.Object)
		if !ok {
			return fmt.Errorf("kube: cached %T is no object", item)
		}
		o = o.DeepCopyObject()
		o.GetObjectKind().SetGroupVersionKind(i.gvk)
		objs = append(objs, o)
	}
	return meta.SetList(list, objs)
}

// copyInto copies the cached item into obj, of the same type.
func (i *informer) copyInto(item any, obj Object) error {
	src, ok := item.(runtime.Object)
	if !ok {
		return fmt.Errorf("kube: cached %T is no object", item)
	}
	out, in := reflect.ValueOf(obj), reflect.ValueOf(src.DeepCopyObject())
	if out.Type() != in.Type() {
		return fmt.Errorf("kube: cannot read a cached %s into %T", in.Type(), obj)
	}
	out.Elem().Set(in.Elem())
	obj.GetObjectKind().SetGroupVersionKind(i.gvk)
	return nil
}

// StripManagedFields is a Transform that drops the managed fields of an
// object: they are often larger than the rest of it.
func StripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Annotations returns the annotations of the cached object namespace/name
// of sample's kind, nil when it is not cached. The map is the cache's own:
// callers only read it. It copies nothing, for reads on kubelet's path.
func (c *Cache) Annotations(sample Object, key types.NamespacedName) map[string]string {
	i, err := c.informerFor(sample)
	if err != nil {
		return nil
	}
	k := key.Name
	if key.Namespace != "" {
		k = key.Namespace + "/" + key.Name
	}
	item, ok, err := i.informer.GetIndexer().GetByKey(k)
	if err != nil || !ok {
		return nil
	}
	m, err := meta.Accessor(item)
	if err != nil {
		return nil
	}
	return m.GetAnnotations()
}

// OnUpdate calls fn with the old and new object of every later update of
// an object of sample's kind the cache sees, once the cache holds the new
// one. fn must not block and must not modify the objects. A panic in fn is
// recovered (internal/panics): that event is lost, the informer and the
// process go on.
func (c *Cache) OnUpdate(sample Object, fn func(oldObj, newObj Object)) error {
	i, err := c.informerFor(sample)
	if err != nil {
		return err
	}
	_, err = i.informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			defer panics.Recover(panics.Informer, "update handler of "+i.gvk.Kind)
			o, ok1 := oldObj.(Object)
			n, ok2 := newObj.(Object)
			if ok1 && ok2 {
				fn(o, n)
			}
		},
	})
	return err
}
