package fanout

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// NameWatches watches the Secrets objects of one kind name (a
// SecretMirror's source, a PushSecret's), each by name and metadata only
// (one watch per Secret, shared by the objects naming it), and requeues
// those objects when their Secret is created, changed or deleted: never a
// watch of every Secret. It runs with the manager (Start).
type NameWatches struct {
	meta metadata.Interface
	// newObject is the object to requeue for a name, of the watching
	// controller's kind.
	newObject func(types.NamespacedName) client.Object
	events    chan event.GenericEvent

	started chan struct{} // closed when run has set base
	base    context.Context

	mu       sync.Mutex
	bySource map[types.NamespacedName]*sourceWatch
	byMirror map[types.NamespacedName]types.NamespacedName
}

type sourceWatch struct {
	stop    context.CancelFunc
	mirrors map[types.NamespacedName]struct{} // the objects naming the Secret
}

// NewNameWatches returns watches through meta that requeue objects made by
// newObject.
func NewNameWatches(meta metadata.Interface, newObject func(types.NamespacedName) client.Object) *NameWatches {
	return &NameWatches{
		meta: meta, newObject: newObject, events: make(chan event.GenericEvent, 64), started: make(chan struct{}),
		bySource: map[types.NamespacedName]*sourceWatch{}, byMirror: map[types.NamespacedName]types.NamespacedName{},
	}
}

// Start runs until ctx ends (manager.Runnable); the watches stop with it.
func (w *NameWatches) Start(ctx context.Context) error {
	w.base = ctx
	close(w.started)
	<-ctx.Done()
	return nil
}

// Events are the requeues, for the controller's source.Channel.
func (w *NameWatches) Events() <-chan event.GenericEvent { return w.events }

// Watch makes sure mirror's Secret src is watched, and no other Secret for
// mirror.
func (w *NameWatches) Watch(ctx context.Context, mirror, src types.NamespacedName) error {
	if w == nil {
		return nil
	}
	select {
	case <-w.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur, ok := w.byMirror[mirror]; ok {
		if cur == src {
			return nil
		}
		w.forgetLocked(mirror)
	}
	sw := w.bySource[src]
	if sw == nil {
		sw = &sourceWatch{mirrors: map[types.NamespacedName]struct{}{}}
		sw.stop = w.start(src)
		w.bySource[src] = sw
	}
	sw.mirrors[mirror] = struct{}{}
	w.byMirror[mirror] = src
	return nil
}

// Forget stops watching mirror's Secret, unless another object names it.
func (w *NameWatches) Forget(mirror types.NamespacedName) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(mirror)
}

func (w *NameWatches) forgetLocked(mirror types.NamespacedName) {
	src, ok := w.byMirror[mirror]
	if !ok {
		return
	}
	delete(w.byMirror, mirror)
	sw := w.bySource[src]
	delete(sw.mirrors, mirror)
	if len(sw.mirrors) == 0 {
		sw.stop()
		delete(w.bySource, src)
	}
}

// start runs a metadata-only informer on the one Secret src.
func (w *NameWatches) start(src types.NamespacedName) context.CancelFunc {
	secrets := w.meta.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(src.Namespace)
	byName := fields.OneTermEqualSelector("metadata.name", src.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return secrets.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return secrets.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &metav1.PartialObjectMetadata{}, 0, nil)
	notify := func() { w.notify(src) }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) {
			if !initial {
				notify()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(metav1.Object)
			n, okNew := newObj.(metav1.Object)
			if okOld && okNew && o.GetResourceVersion() != n.GetResourceVersion() {
				notify()
			}
		},
		DeleteFunc: func(any) { notify() },
	})
	ctx, stop := context.WithCancel(w.base)
	go inf.RunWithContext(ctx)
	return stop
}

// notify requeues the objects naming src.
func (w *NameWatches) notify(src types.NamespacedName) {
	w.mu.Lock()
	var mirrors []types.NamespacedName
	if sw := w.bySource[src]; sw != nil {
		for m := range sw.mirrors {
			mirrors = append(mirrors, m)
		}
	}
	ctx := w.base
	w.mu.Unlock()
	for _, m := range mirrors {
		select {
		case w.events <- event.GenericEvent{Object: w.newObject(m)}:
		case <-ctx.Done():
			return
		}
	}
}
