package restart

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/kube"
)

// DefaultDriverName is the CSI driver name pods' volumes use by default.
const DefaultDriverName = "secrets-store.csi.k8s.io"

// EventSource is the component name of the controller's events.
const EventSource = "keymount-controller"

// MinHashKeySize is the shortest Options.HashKey accepted.
const MinHashKeySize = 32

// Options configure the restart reconcilers of keymount-controller.
type Options struct {
	// DriverName is the CSI driver name of keymount's volumes in pods;
	// DefaultDriverName when empty.
	DriverName string
	// HashKey keys the digest of a synced Secret's content that the
	// pod-template annotation keymount.io/rollout-secret-<name> carries
	// (secretAnnotationValue). It must be the same on every replica and
	// across restarts — keymount-controller's syncHash key — or a new key
	// restarts every opted-in consumer once. At least MinHashKeySize
	// bytes; empty turns Secret restarts off (volume restarts still run).
	HashKey []byte
	// Recorder records the events; the manager's, for EventSource, when nil.
	Recorder record.EventRecorder
	// SecretCache, when set, is the cache the Secret reconciler reads and
	// watches synced Secrets in, instead of a cache of its own: it must
	// hold the Secrets labelled SyncLabel, and its transform must call
	// SecretDigests.Record on each before trimming its data
	// (keymount-controller shares the SecretSync reconciler's cache, so
	// each synced Secret is watched and held once).
	SecretCache cache.Cache
	// SecretDigests is the table SecretCache's transform records into,
	// made by NewSecretDigests(HashKey); required with SecretCache,
	// ignored without it.
	SecretDigests *SecretDigests
}

// workloadAccess are the rules both reconcilers need (deploy/components/
// restart-on-change): without any of them nothing is set up.
var workloadAccess = []authorizationv1.ResourceAttributes{
	{Group: "apps", Version: "v1", Resource: "deployments", Verb: "patch"},
	{Group: "apps", Version: "v1", Resource: "deployments", Verb: "watch"},
	{Group: "apps", Version: "v1", Resource: "replicasets", Verb: "get"},
	{Version: "v1", Resource: "pods", Verb: "get"},
	{Group: secretsstorev1.GroupName, Version: "v1", Resource: "secretproviderclasspodstatuses", Verb: "watch"},
	{Version: "v1", Resource: "secrets", Verb: "watch"},
}

// SetupWithManager adds to mgr the two restart reconcilers (package
// documentation): one on pod statuses that report a change of a mounted
// volume, one (with opts.HashKey) on Secrets labelled SyncLabel and the
// workloads that consume them. They keep their own trimmed cache, added to
// mgr as a runnable, and run on the leader only. When the controller's
// RBAC lacks the rules of RBACComponent, it logs which and adds nothing:
// restart on change stays off, the rest of the controller runs.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.DriverName == "" {
		opts.DriverName = DefaultDriverName
	}
	if len(opts.HashKey) > 0 && len(opts.HashKey) < MinHashKeySize {
		return fmt.Errorf("restart: Options.HashKey has %d bytes, want at least %d", len(opts.HashKey), MinHashKeySize)
	}
	if refused, err := mayRestart(ctx, mgr); err != nil {
		return err
	} else if refused != "" {
		klog.InfoS("restart on change off: the controller may not "+refused+"; install "+RBACComponent+
			" (chart: restartOnChange.enabled) to turn it on", "refused", refused)
		return nil
	}
	digests := opts.SecretDigests
	if opts.SecretCache == nil {
		digests = NewSecretDigests(opts.HashKey)
	} else if digests == nil && len(opts.HashKey) > 0 {
		return errors.New("restart: Options.SecretCache needs Options.SecretDigests, the table its transform records into")
	}
	c, err := newCache(mgr, opts.HashKey, digests, opts.SecretCache == nil)
	if err != nil {
		return err
	}
	if err := mgr.Add(c); err != nil {
		return err
	}
	apps, err := kube.NewRESTClient(mgr.GetConfig(), GroupVersion)
	if err != nil {
		return fmt.Errorf("restart: apps client: %w", err)
	}
	rec := opts.Recorder
	if rec == nil {
		rec = mgr.GetEventRecorderFor(EventSource) //nolint:staticcheck // the Restarter records core/v1 events, as the driver does
	}
	r := New(apps, rec)
	// Names are checked for uniqueness per process; a test runs several
	// managers in one.
	copts := crcontroller.Options{SkipNameValidation: new(true)}
	err = ctrl.NewControllerManagedBy(mgr).Named("restart-podstatus").WithOptions(copts).
		WatchesRawSource(source.Kind(c, &secretsstorev1.SecretProviderClassPodStatus{},
			&handler.TypedEnqueueRequestForObject[*secretsstorev1.SecretProviderClassPodStatus]{}, changeReports())).
		Complete(&podStatusReconciler{cache: c, live: mgr.GetAPIReader(), r: r, driverName: opts.DriverName})
	if err != nil || len(opts.HashKey) == 0 {
		return err
	}
	secrets := opts.SecretCache
	if secrets == nil {
		secrets = c
	}
	sr := &secretReconciler{secrets: secrets, digests: digests, cache: c, r: r}
	return ctrl.NewControllerManagedBy(mgr).Named("restart-secret").WithOptions(copts).
		WatchesRawSource(source.Kind(secrets, &corev1.Secret{}, secretEvents(digests))).
		WatchesRawSource(source.Kind(c, &appsv1.Deployment{}, handler.TypedEnqueueRequestsFromMapFunc(consumed[*appsv1.Deployment]))).
		WatchesRawSource(source.Kind(c, &appsv1.StatefulSet{}, handler.TypedEnqueueRequestsFromMapFunc(consumed[*appsv1.StatefulSet]))).
		WatchesRawSource(source.Kind(c, &appsv1.DaemonSet{}, handler.TypedEnqueueRequestsFromMapFunc(consumed[*appsv1.DaemonSet]))).
		Complete(sr)
}

// consumed maps a workload event to its consumed Secrets.
func consumed[T client.Object](_ context.Context, w T) []reconcile.Request {
	names := secretsOf(w)
	out := make([]reconcile.Request, 0, len(names))
	for _, n := range names {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.GetNamespace(), Name: n}})
	}
	return out
}

// newCache returns the reconcilers' own cache, every type trimmed as it
// enters (trimPodStatus, trimWorkload, secretTrimmer into digests),
// Secrets (when withSecrets) only with SyncLabel; workloads and Secrets only with a key.
func newCache(mgr ctrl.Manager, key []byte, digests *SecretDigests, withSecrets bool) (cache.Cache, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, secretsstorev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	byObject := map[client.Object]cache.ByObject{
		&secretsstorev1.SecretProviderClassPodStatus{}: {Transform: trimPodStatus},
	}
	if len(key) > 0 {
		synced, err := labels.NewRequirement(SyncLabel, selection.Exists, nil)
		if err != nil {
			return nil, err
		}
		if withSecrets {
			byObject[&corev1.Secret{}] = cache.ByObject{Label: labels.NewSelector().Add(*synced), Transform: secretTrimmer(digests)}
		}
		for _, w := range []client.Object{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}} {
			byObject[w] = cache.ByObject{Transform: trimWorkload}
		}
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: scheme, Mapper: mgr.GetRESTMapper(), ByObject: byObject,
	})
	if err != nil {
		return nil, fmt.Errorf("restart: cache: %w", err)
	}
	if len(key) == 0 {
		return c, nil
	}
	for _, w := range []client.Object{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}} {
		if err := c.IndexField(context.Background(), w, indexConsumes, secretsOf); err != nil {
			return nil, fmt.Errorf("restart: index %T: %w", w, err)
		}
	}
	return c, nil
}

// mayRestart asks the API server (SelfSubjectAccessReview, which every
// authenticated user may create) whether the controller holds every rule
// of workloadAccess in all namespaces; it returns the first refused, ""
// when none is.
func mayRestart(ctx context.Context, mgr ctrl.Manager) (string, error) {
	c, err := authorizationclient.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return "", err
	}
	for _, a := range workloadAccess {
		review, err := c.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a},
		}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("restart: ask whether the controller may %s %s: %w", a.Verb, a.Resource, err)
		}
		if !review.Status.Allowed {
			return a.Verb + " " + a.Resource, nil
		}
	}
	return "", nil
}
