package pushsecret

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	pushv1alpha1 "github.com/keymount/keymount/apis/push/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/push"
	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/provider/keymountv1"
)

// Providers calls the push extension of provider plugins
// (provider/providerclient.Client).
type Providers interface {
	Push(ctx context.Context, provider string, req *keymountv1.PushRequest) ([]*keymountv1.ItemResult, error)
	Remove(ctx context.Context, provider string, req *keymountv1.RemoveRequest) ([]*keymountv1.ItemResult, error)
}

// Tokens mints service-account tokens (controller/tokens.Manager).
type Tokens interface {
	Tokens(ctx context.Context, namespace, serviceAccount string, audiences []string) (string, error)
}

// Deps are the reconciler's collaborators.
type Deps struct {
	// Client reads PushSecrets and SecretProviderClasses from the
	// manager's cache and writes PushSecrets.
	Client client.Client
	// Live reads the source Secrets, uncached.
	Live client.Reader
	// Events records on PushSecrets.
	Events events.EventRecorder
	// Providers pushes through the providers' sockets.
	Providers Providers
	// Tokens mints the ServiceAccount tokens sent with each push, for
	// Audiences (--token-request-audience); none when Audiences is empty.
	Tokens    Tokens
	Audiences []string
	// Pod is the controller's own pod, named in the request's attributes.
	Pod syncrequest.Pod
	// Metrics, when set, count the pushes.
	Metrics *push.Metrics
}

// Options configure SetupWithManager.
type Options struct {
	Deps
	// Workers reconcile PushSecrets at once; 1 when 0.
	Workers int
}

// DefaultRefreshInterval is ESO's: a PushSecret without refreshInterval is
// pushed again every hour (and at once when its Secret changes).
const DefaultRefreshInterval = time.Hour

// retryAfterFailure is the wait before retrying a push that failed or
// conflicted, when the refresh interval is longer.
const retryAfterFailure = 30 * time.Second

// Reconciler serves PushSecrets.
type Reconciler struct {
	Deps
	sources *fanout.NameWatches
	digests *digests
}

// digests keeps, per PushSecret and value, a digest of the value keymount
// last pushed: a value still equal to it is sent as unchanged, and the
// provider only confirms the store's version. Memory only: after a restart
// the first push of each value lets the provider compare.
type digests struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[string][sha256.Size]byte
}

func (d *digests) same(ps types.NamespacedName, item string, sum [sha256.Size]byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	got, ok := d.m[ps][item]
	return ok && got == sum
}

func (d *digests) set(ps types.NamespacedName, item string, sum [sha256.Size]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m[ps] == nil {
		d.m[ps] = map[string][sha256.Size]byte{}
	}
	d.m[ps][item] = sum
}

func (d *digests) forget(ps types.NamespacedName) {
	d.mu.Lock()
	delete(d.m, ps)
	d.mu.Unlock()
}

func newReconciler(deps Deps) (*Reconciler, error) {
	if deps.Client == nil || deps.Live == nil || deps.Events == nil || deps.Providers == nil || deps.Tokens == nil {
		return nil, errors.New("pushsecret: Client, Live, Events, Providers and Tokens are required")
	}
	deps.Metrics.InitPushSecrets()
	return &Reconciler{Deps: deps, digests: &digests{m: map[types.NamespacedName]map[string][sha256.Size]byte{}}}, nil
}

// Reconcile pushes one PushSecret's values, or removes them as it goes.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ps := &pushv1alpha1.PushSecret{}
	if err := r.Client.Get(ctx, req.NamespacedName, ps); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !ps.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, r.finalize(ctx, ps)
	}
	if err := r.holdFinalizer(ctx, ps); err != nil {
		return ctrl.Result{}, err
	}
	src := types.NamespacedName{Namespace: ps.Namespace, Name: ps.Spec.Selector.Secret.Name}
	if err := r.sources.Watch(ctx, req.NamespacedName, src); err != nil {
		return ctrl.Result{}, err
	}
	o, err := r.push(ctx, ps)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.setStatus(ctx, ps, o); err != nil {
		return ctrl.Result{}, err
	}
	after := refreshInterval(ps)
	if o.retry && (after == 0 || after > retryAfterFailure) {
		after = retryAfterFailure
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.sources.Forget(key)
	r.digests.forget(key)
}

// refreshInterval is ps's, ESO's default when unset; 0 pushes on changes
// only.
func refreshInterval(ps *pushv1alpha1.PushSecret) time.Duration {
	if ps.Spec.RefreshInterval == nil {
		return DefaultRefreshInterval
	}
	return max(ps.Spec.RefreshInterval.Duration, 0)
}

// holdFinalizer adds the finalizer while deletionPolicy is Delete, and
// takes it off otherwise.
func (r *Reconciler) holdFinalizer(ctx context.Context, ps *pushv1alpha1.PushSecret) error {
	want := ps.Spec.DeletionPolicy == pushv1alpha1.DeletionPolicyDelete
	if want == controllerutil.ContainsFinalizer(ps, pushv1alpha1.Finalizer) {
		return nil
	}
	patch := client.MergeFrom(ps.DeepCopy())
	if want {
		controllerutil.AddFinalizer(ps, pushv1alpha1.Finalizer)
	} else {
		controllerutil.RemoveFinalizer(ps, pushv1alpha1.Finalizer)
	}
	return r.Client.Patch(ctx, ps, patch)
}

// SetupWithManager checks opts and adds the PushSecret reconciler to mgr:
// PushSecrets (their spec, deletion and finalizers), the classes they
// name, and one metadata watch per source Secret. mgr's scheme must hold pushv1alpha1.
func SetupWithManager(_ context.Context, mgr ctrl.Manager, opts Options) error {
	r, err := newReconciler(opts.Deps)
	if err != nil {
		return err
	}
	meta, err := metadata.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	r.sources = fanout.NewNameWatches(meta, func(n types.NamespacedName) client.Object {
		return &pushv1alpha1.PushSecret{ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: n.Name}}
	})
	if err := mgr.Add(r.sources); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &pushv1alpha1.PushSecret{}, classIndex, func(o client.Object) []string {
		ps, ok := o.(*pushv1alpha1.PushSecret)
		if !ok {
			return nil
		}
		return []string{ps.Spec.SecretProviderClassName}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("pushsecret").
		For(&pushv1alpha1.PushSecret{}, builder.WithPredicates(specOrDeletion())).
		Watches(&secretsstorev1.SecretProviderClass{}, handler.EnqueueRequestsFromMapFunc(r.pushSecretsOfClass)).
		WatchesRawSource(source.Channel(r.sources.Events(), &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.Workers, 1)}).
		Complete(r)
}

// classIndex indexes PushSecrets by the class they name.
const classIndex = "spec.secretProviderClassName"

// pushSecretsOfClass maps a class to the PushSecrets of its namespace
// naming it: a class created or changed pushes them again.
func (r *Reconciler) pushSecretsOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	list := &pushv1alpha1.PushSecretList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{classIndex: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return out
}

// specOrDeletion passes a PushSecret's creation, a new generation, an
// annotation change (keymount.io/push-overwrite), a deletion mark and
// finalizer changes; not its own status writes.
func specOrDeletion() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.GetGeneration() != n.GetGeneration() ||
				o.GetAnnotations()[pushv1alpha1.AnnotationOverwrite] != n.GetAnnotations()[pushv1alpha1.AnnotationOverwrite] ||
				o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero() ||
				len(o.GetFinalizers()) != len(n.GetFinalizers())
		},
	}
}
