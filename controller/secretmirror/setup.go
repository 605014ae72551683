package secretmirror

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/fanout"
)

// SetupWithManager registers the reconciler with mgr: SecretMirrors,
// namespace metadata (a new namespace requeues the SecretMirrors matching
// it), the copies (an edited or deleted copy requeues its SecretMirror),
// both from the fan-out cache, and one metadata watch per source Secret.
// mgr's scheme must hold mirrorsv1alpha2.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	meta, err := metadata.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	r.sources = newSourceWatches(meta)
	if err := mgr.Add(r.sources); err != nil {
		return err
	}
	newOnly := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		UpdateFunc: func(event.UpdateEvent) bool { return false },
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("secretmirror").
		For(&mirrorsv1alpha2.SecretMirror{}, builder.WithPredicates(specOrDeletion())).
		WatchesRawSource(source.Kind(r.copies, client.Object(fanout.NamespaceMeta()),
			handler.EnqueueRequestsFromMapFunc(r.mirrorsMatching), newOnly)).
		WatchesRawSource(source.Kind(r.copies, client.Object(&corev1.Secret{}), fanout.CopyHandler(r.writer.Recent, ownerOf))).
		WatchesRawSource(source.Channel(r.sources.events, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)}).
		Complete(r)
}

// specOrDeletion passes a SecretMirror's creation, a new generation, a
// deletion mark and finalizer changes; not its own status writes.
func specOrDeletion() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.GetGeneration() != n.GetGeneration() ||
				o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() ||
				len(o.GetFinalizers()) != len(n.GetFinalizers())
		},
	}
}

// ownerOf maps a copy of this writer to the SecretMirror named by its
// owner annotation.
func ownerOf(o client.Object) []reconcile.Request {
	if !fanout.IsCopy(o, Writer) {
		return nil
	}
	ns, name, ok := strings.Cut(o.GetAnnotations()[fanout.AnnotationOwner], "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// mirrorsMatching maps a new namespace to the SecretMirrors whose
// destination matches its name.
func (r *Reconciler) mirrorsMatching(ctx context.Context, o client.Object) []reconcile.Request {
	list := &mirrorsv1alpha2.SecretMirrorList{}
	if err := r.client.List(ctx, list); err != nil {
		klog.ErrorS(err, "list SecretMirrors for a new namespace", "namespace", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		m := &list.Items[i]
		s, err := parseSpec(m)
		if err != nil || s.vaultDestination || !s.match.matches(o.GetName()) {
			continue
		}
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(m)})
	}
	return out
}
