package reflector

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/keymount/keymount/controller/fanout"
)

// writeParallelism bounds the copy writes of one source in flight: with
// requests of 20 to 60 ms, enough to use --fanout-kube-api-qps (500).
const writeParallelism = 32

// Reconcile brings the copies of one source, or one manual mirror, in
// step with what reflector's annotations ask.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	o, ok, err := r.sources.GetIndexer().GetByKey(req.String())
	if err != nil {
		return reconcile.Result{}, err
	}
	m, isMeta := o.(*metav1.PartialObjectMetadata)
	if !ok || !isMeta {
		// Gone, or no longer annotated: its automatic copies go.
		return reconcile.Result{}, r.removeCopies(ctx, req.NamespacedName, nil)
	}
	p := PropertiesOf(m.Annotations)
	if p.Reflects != nil {
		return r.reconcileMirror(ctx, req.NamespacedName, *p.Reflects)
	}
	return r.reconcileSource(ctx, req.NamespacedName)
}

// reconcileSource writes the automatic copies of a source into every
// namespace it asks for, and removes keymount's copies from the others.
func (r *Reconciler) reconcileSource(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
	src := r.kind.newObj()
	if err := r.live.Get(ctx, key, src); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.removeCopies(ctx, key, nil)
		}
		return reconcile.Result{}, fmt.Errorf("read %s %s: %w", r.kind.name, key, err)
	}
	p := PropertiesOf(src.GetAnnotations())
	if p.Err != nil {
		r.events.Eventf(src, nil, corev1.EventTypeWarning, fanout.ReasonInvalidNamespaces, "Reflect", "%v", p.Err)
	}
	namespaces := fanout.NamespaceMetaList()
	if err := r.cache.List(ctx, namespaces); err != nil {
		return reconcile.Result{}, err
	}
	want := map[string]bool{}
	if p.IsAutoSource() {
		for _, ns := range namespaces.Items {
			if ns.Name != key.Namespace && ns.DeletionTimestamp == nil && p.CanAutoReflectTo(ns.Name, ns.Labels) {
				want[ns.Name] = true
			}
		}
	}
	copies, err := r.copiesOf(ctx, key)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.removeCopies(ctx, key, want); err != nil {
		return reconcile.Result{}, err
	}
	return r.writeCopies(ctx, src, want, copies)
}

// writeCopies writes src's automatic copy into each namespace of want,
// a few at once. A conflict is retried after ConflictRetry, a failure
// with the controller's backoff.
func (r *Reconciler) writeCopies(ctx context.Context, src client.Object, want map[string]bool, copies map[string]client.Object) (reconcile.Result, error) {
	ref := client.ObjectKeyFromObject(src).String()
	w := *r.writer
	w.Adopt = func(o client.Object) bool { return o.GetAnnotations()[AnnotationReflects] == ref }
	// One content for every namespace, encoded once.
	desired := r.kind.content(src, "", src.GetName())
	desired.SetAnnotations(map[string]string{
		AnnotationReflects: ref, AnnotationAutoReflects: formatBool(true),
		AnnotationReflectedVersion: src.GetResourceVersion(), AnnotationReflectedAt: ReflectedAt(r.clock.Now()),
	})
	batch, err := w.Batch(src, desired)
	if err != nil {
		return reconcile.Result{}, err
	}
	var mu sync.Mutex
	var errs []error
	conflicts, written, stale := 0, 0, 0
	sem := make(chan struct{}, writeParallelism)
	var wg sync.WaitGroup
	for ns := range want {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res, err := batch.Apply(ctx, ns, copies[ns])
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, fanout.ErrNotOurs):
				conflicts++
			case err != nil:
				errs = append(errs, err)
			case res != fanout.Unchanged:
				written++
				if fanout.Stale(copies[ns], desired, AnnotationReflectedVersion) {
					stale++
				}
			}
		})
	}
	wg.Wait()
	if len(errs) == 0 && stale > 0 {
		// The source's change reached its last copy.
		w.Metrics.Propagated(WriterName, fanout.ChangedAt(src), r.clock.Now())
	}
	if written > 0 {
		klog.V(2).InfoS("reflected", "kind", r.kind.name, "source", klog.KObj(src), "written", written, "namespaces", len(want))
	}
	if err := errors.Join(errs...); err != nil {
		r.events.Eventf(src, nil, corev1.EventTypeWarning, fanout.ReasonCopyFailed, "Reflect", "%d of %d copies not written: %v", len(errs), len(want), err)
		return reconcile.Result{}, err
	}
	if conflicts > 0 {
		return reconcile.Result{RequeueAfter: ConflictRetry}, nil
	}
	return reconcile.Result{}, nil
}

// copiesOf returns the automatic copies keymount wrote for a source, by
// namespace (manual mirrors it keeps in step are not among them).
func (r *Reconciler) copiesOf(ctx context.Context, src types.NamespacedName) (map[string]client.Object, error) {
	l := r.kind.newList()
	if err := fanout.CopiesOf(ctx, r.cache, l, WriterName, src.Namespace, src.Name); err != nil {
		return nil, err
	}
	out := map[string]client.Object{}
	for _, c := range r.kind.items(l) {
		a := c.GetAnnotations()
		if c.GetName() == src.Name && parseBool(a[AnnotationAutoReflects]) && a[AnnotationReflects] == src.String() {
			out[c.GetNamespace()] = c
		}
	}
	return out, nil
}

// removeCopies deletes the automatic copies keymount wrote for src outside
// the namespaces of keep (all of them when keep is nil). Manual mirrors
// are never deleted, as reflector never deletes them.
func (r *Reconciler) removeCopies(ctx context.Context, src types.NamespacedName, keep map[string]bool) error {
	copies, err := r.copiesOf(ctx, src)
	if err != nil {
		return err
	}
	var errs []error
	for ns, c := range copies {
		if keep[ns] {
			continue
		}
		if err := r.writer.Delete(ctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reconcileMirror keeps a manual mirror (an object whose reflects
// annotation names its source) in step with the source, when the source
// allows the mirror's namespace.
func (r *Reconciler) reconcileMirror(ctx context.Context, key, ref types.NamespacedName) (reconcile.Result, error) {
	mirror := r.kind.newObj()
	if err := r.live.Get(ctx, key, mirror); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	src := r.kind.newObj()
	if err := r.live.Get(ctx, ref, src); err != nil {
		if apierrors.IsNotFound(err) {
			r.events.Eventf(mirror, nil, corev1.EventTypeWarning, ReasonSourceNotFound, "Reflect",
				"%s %s named by %s does not exist", r.kind.name, ref, AnnotationReflects)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("read %s %s: %w", r.kind.name, ref, err)
	}
	ns := fanout.NamespaceMeta()
	if err := r.cache.Get(ctx, types.NamespacedName{Name: key.Namespace}, ns); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !PropertiesOf(src.GetAnnotations()).CanReflectTo(key.Namespace, ns.Labels) {
		r.events.Eventf(mirror, nil, corev1.EventTypeWarning, ReasonReflectionDenied, "Reflect",
			"%s %s does not allow reflection into namespace %s (%s, %s)", r.kind.name, ref, key.Namespace,
			AnnotationAllowed, AnnotationAllowedNamespaces)
		return reconcile.Result{}, nil
	}
	desired := r.kind.content(src, key.Namespace, key.Name)
	desired.SetAnnotations(map[string]string{
		AnnotationReflects: ref.String(), AnnotationAutoReflects: formatBool(false),
		AnnotationReflectedVersion: src.GetResourceVersion(), AnnotationReflectedAt: ReflectedAt(r.clock.Now()),
	})
	w := *r.writer
	w.Adopt = func(o client.Object) bool { return o.GetAnnotations()[AnnotationReflects] == ref.String() }
	res, err := w.Apply(ctx, src, desired, mirror)
	if err != nil {
		r.events.Eventf(mirror, nil, corev1.EventTypeWarning, fanout.ReasonCopyFailed, "Reflect", "%v", err)
		return reconcile.Result{}, err
	}
	if res != fanout.Unchanged && fanout.Stale(mirror, desired, AnnotationReflectedVersion) {
		w.Metrics.Propagated(WriterName, fanout.ChangedAt(src), r.clock.Now())
	}
	return ctrl.Result{}, nil
}
