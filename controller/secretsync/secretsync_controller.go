package secretsync

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	corev1 "k8s.io/api/core/v1"

	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/synchash"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// Providers calls provider plugins over the v1alpha1 socket protocol
// (provider/providerclient.Client).
type Providers interface {
	Mount(ctx context.Context, provider string, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error)
}

// Tokens mints service-account tokens (controller/tokens.Manager): the value
// of the csi.storage.k8s.io/serviceAccount.tokens attribute.
type Tokens interface {
	Tokens(ctx context.Context, namespace, serviceAccount string, audiences []string) (string, error)
}

// Hashes gives the keyed hasher of status.syncHash
// (controller/synchash.KeySource): the same content gives the same hash under
// the same key, and the hash tells nothing about the content without it.
type Hashes interface {
	Hasher(ctx context.Context) (*synchash.Hasher, error)
}

// Recorder emits events (client-go's tools/events.EventRecorder, as the
// manager's GetEventRecorder returns it).
type Recorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Deps are the reconciler's collaborators.
type Deps struct {
	// Client reads SecretSyncs, classes and labelled Secrets from the
	// cache and writes.
	Client client.Client
	// Live reads a Secret the cache does not hold (one without the label).
	Live      client.Reader
	Providers Providers
	Tokens    Tokens
	Hashes    Hashes
	Events    Recorder
	// Metrics may be nil: nothing is counted.
	Metrics *Metrics
	// Clock may be nil: the real clock.
	Clock clock.PassiveClock
}

// Reconciler keeps the Secrets of SecretSyncs.
type Reconciler struct {
	Deps
	cfg     Config
	state   *states
	pending *pendingStatuses
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// Options configure SetupWithManager: the reconciler's configuration, its
// collaborators and how many SecretSyncs it reconciles at once.
type Options struct {
	Config
	Deps
	// Workers reconcile SecretSyncs at once; 1 when 0.
	Workers int
}

// newReconciler validates cfg and returns a Reconciler.
func newReconciler(cfg Config, deps Deps) (*Reconciler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	switch {
	case deps.Client == nil, deps.Live == nil:
		return nil, errors.New("secretsync: the Kubernetes client and reader are required")
	case deps.Providers == nil, deps.Tokens == nil, deps.Hashes == nil, deps.Events == nil:
		return nil, errors.New("secretsync: the provider client, token manager, hasher and event recorder are required")
	}
	if deps.Clock == nil {
		deps.Clock = clock.RealClock{}
	}
	r := &Reconciler{Deps: deps, cfg: cfg, state: newStates(), pending: newPendingStatuses()}
	deps.Metrics.watchStates(r.state, deps.Clock.Now)
	return r, nil
}

// CacheOptions are the manager cache options the reconciler needs: Secrets
// carrying secretsyncv1alpha1.LabelSecretSync only (every Secret the
// controller writes carries it), so the cache does not grow with the
// cluster's other Secrets, each data value replaced by its digest
// (trimSecret); SecretSyncs trimmed to what deciding a refresh needs
// (trimSecretSync); classes in full. No object keeps
// its managedFields in the cache: the reconciler never reads them (the
// Secret is written by server-side apply, the status by an update that
// leaves them to the server), and they are a large part of a cached
// SecretSync or Secret (tests/bench BenchmarkController measures the
// controller's memory).
//
// annotate, when not nil, is called on each Secret as it enters the cache,
// before its data and managedFields are trimmed, to record what another
// reader of the same cache needs of them (restart.SecretDigests.Record).
func CacheOptions(annotate func(*corev1.Secret)) (cache.Options, error) {
	owned, err := labels.NewRequirement(secretsyncv1alpha1.LabelSecretSync, selection.Exists, nil)
	if err != nil {
		return cache.Options{}, err
	}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.NewSelector().Add(*owned), Transform: secretTransform(annotate)},
		},
		DefaultTransform: trimObject,
	}, nil
}

// trimObject is the cache's transform of SecretSyncs and classes: a
// SecretSync trimmed to what deciding a refresh needs (trimSecretSync); a
// class without managedFields or the
// kubectl.kubernetes.io/last-applied-configuration annotation (a copy of
// the whole manifest that kubectl apply and Argo CD leave on every
// object; the reconciler never reads it). Idempotent.
func trimObject(obj any) (any, error) {
	if ss, ok := obj.(*secretsyncv1alpha1.SecretSync); ok {
		return trimSecretSync(ss), nil
	}
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a != nil {
			if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
				delete(a, corev1.LastAppliedConfigAnnotation)
				o.SetAnnotations(a)
			}
		}
	}
	return obj, nil
}

// classIndex indexes SecretSyncs by spec.secretProviderClassName.
const classIndex = "spec.secretProviderClassName"

// SetupWithManager validates opts and adds the SecretSync reconciler to
// mgr: it watches SecretSyncs (a new generation or annotation), the Secrets
// they write (by name: an Orphan or Merge Secret has no owner reference)
// and the classes they name. The manager's cache must hold Secrets
// with secretsyncv1alpha1.LabelSecretSync only (CacheOptions).
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	r, err := newReconciler(opts.Config, opts.Deps)
	if err != nil {
		return err
	}
	err = mgr.GetFieldIndexer().IndexField(ctx, &secretsyncv1alpha1.SecretSync{}, classIndex, func(o client.Object) []string {
		ss, ok := o.(*secretsyncv1alpha1.SecretSync)
		if !ok {
			return nil
		}
		return []string{ss.Spec.SecretProviderClassName}
	})
	if err != nil {
		return err
	}
	changed := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).
		Named("secretsync").
		For(&secretsyncv1alpha1.SecretSync{}, builder.WithPredicates(changed)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(namesake)).
		Watches(&secretsstorev1.SecretProviderClass{}, handler.EnqueueRequestsFromMapFunc(r.syncsOfClass),
			builder.WithPredicates(changed)).
		WithOptions(ctrlOptions(opts.Workers)).
		Complete(r)
}

// namesake names the SecretSync a cached Secret (one with the label)
// belongs to: the SecretSync of its name and namespace, whether it owns
// the Secret by owner reference (creation policy Owner), by
// AnnotationSecretSyncUID (Orphan) or merges into it (Merge). A Secret of
// no SecretSync names one that does not exist, which the reconcile finds
// gone.
func namesake(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
}

// syncsOfClass names the SecretSyncs of a class's namespace that use it.
func (r *Reconciler) syncsOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	var list secretsyncv1alpha1.SecretSyncList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{classIndex: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
	}
	return out
}
