package fanout

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Recent remembers the copies a Writer has just written until the copies
// cache has seen them, so that keymount's own writes cause no work:
//
//   - a copy event that is the echo of the write (same resourceVersion)
//     requeues nothing (CopyHandler), where 1,000 copies written would
//     otherwise reconcile their source again and again while they arrive;
//   - until that echo arrives, a copy the cache still shows as it was
//     before the write is not written again (Writer.Apply).
//
// Any other event of the copy (a hand edit, a delete, a relist) forgets
// the write and requeues as before. Records live from a write to its
// echo: a few per copy being written, never one per copy kept. A nil
// *Recent remembers nothing.
type Recent struct {
	mu sync.Mutex
	m  map[recentKey]recentWrite
}

// maxRecent bounds the records (writes whose echo never came, e.g. a
// watch that restarted meanwhile): past it, they are all forgotten, which
// costs at most one write again each.
const maxRecent = 100000

type recentKey struct{ kind, namespace, name string }

type recentWrite struct {
	resourceVersion, digest string
	at                      time.Time
}

// recentTTL is how long a write counts as pending without its echo: an
// echo comes in far less, unless the copies watch missed it (a copy
// created and deleted while the watch restarted leaves no event at all);
// past it, the copy is compared and written as if never written.
const recentTTL = 30 * time.Second

// NewRecent returns an empty Recent, to share between a Writer and the
// CopyHandler of its copies.
func NewRecent() *Recent { return &Recent{m: map[recentKey]recentWrite{}} }

func keyOf(o client.Object) recentKey {
	return recentKey{kindOf(o), o.GetNamespace(), o.GetName()}
}

// remember records that the copy at key was written with digest and is
// now at resourceVersion.
func (r *Recent) remember(key recentKey, resourceVersion, digest string) {
	if r == nil || resourceVersion == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= maxRecent {
		clear(r.m)
	}
	r.m[key] = recentWrite{resourceVersion: resourceVersion, digest: digest, at: time.Now()}
}

// pending reports whether the copy at key was written with digest less
// than recentTTL ago and the cache's object (existing, nil when the cache
// has none) does not show that write yet.
func (r *Recent) pending(key recentKey, digest string, existing client.Object) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.m[key]
	return ok && w.digest == digest && time.Since(w.at) < recentTTL &&
		(existing == nil || existing.GetResourceVersion() != w.resourceVersion)
}

// Echo reports whether o, from a copy's create or update event, is what
// the last write of it left; either way, the write is forgotten.
func (r *Recent) Echo(o client.Object) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := keyOf(o)
	w, ok := r.m[key]
	delete(r.m, key)
	return ok && w.resourceVersion == o.GetResourceVersion()
}

// Forget drops the record of o's last write (it was deleted).
func (r *Recent) Forget(o client.Object) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, keyOf(o))
}

// CopyHandler queues fn's requests for a copy's events, but for the
// echoes of the writes recent remembers.
func CopyHandler(recent *Recent, fn func(client.Object) []reconcile.Request) handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	add := func(q queue, o client.Object) {
		for _, r := range fn(o) {
			q.Add(r)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) {
			if !recent.Echo(e.Object) {
				add(q, e.Object)
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			if !recent.Echo(e.ObjectNew) {
				add(q, e.ObjectNew)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			recent.Forget(e.Object)
			add(q, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q queue) { add(q, e.Object) },
	}
}
