package secretmirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/push"
)

// Deps are the reconciler's collaborators.
type Deps struct {
	// Client reads SecretMirrors from the manager's cache and writes.
	Client client.Client
	// Live reads what the caches do not hold: source Secrets and a
	// same-named Secret in the way of a copy.
	Live client.Reader
	// Copies is the fan-out cache (fanout.NewCache, shared with the
	// reflector reconciler): namespace metadata and the copies.
	Copies cache.Cache
	// Events records on SecretMirrors (the manager's recorder).
	Events events.EventRecorder
	// Writes, when set, writes the copies and reads, uncached, a
	// same-named Secret in their way (reflector.Options.Writes); Client
	// and Live when nil.
	Writes client.Client
	// Tokens, when set, mints the ServiceAccount tokens of Vault sources
	// with auth.kubernetes (tokens.Manager); without it such a source is
	// an Error.
	Tokens TokenSource
	// Audiences are those Tokens may be asked for (the controller's
	// --token-request-audience); a Vault source naming another is an Error.
	Audiences []string
	// Metrics, when set, count the copies (writer="mirror") and time a
	// source Secret's change to its last copy.
	Metrics *fanout.Metrics
	// PushMetrics, when set, count the writes to Vault destinations and
	// the leases of dynamic Vault sources.
	PushMetrics *push.Metrics
}

// Options configure SetupWithManager.
type Options struct {
	Deps
	// Workers reconcile SecretMirrors at once; 1 when 0.
	Workers int
}

// Reconciler serves SecretMirrors.
type Reconciler struct {
	client client.Client
	live   client.Reader
	events events.EventRecorder
	// copies is Deps.Copies.
	copies cache.Cache
	// writer writes and deletes the copies (fanout.LabelCopy=mirror).
	writer fanout.Writer
	// sources watches the source Secrets by name (SetupWithManager).
	sources *fanout.NameWatches
	// vault reads Vault sources and logs in for Vault destinations.
	vault *vaultReader
	// pushes are what keymount last wrote to Vault destinations.
	pushes *pushes
	// metrics count pushes and leases.
	metrics *push.Metrics
}

// newReconciler checks deps and returns a Reconciler.
func newReconciler(deps Deps) (*Reconciler, error) {
	if deps.Client == nil || deps.Live == nil || deps.Copies == nil || deps.Events == nil {
		return nil, errors.New("secretmirror: Client, Live, Copies and Events are required")
	}
	var (
		writes     = deps.Client
		writesLive = deps.Live
	)
	if deps.Writes != nil {
		writes, writesLive = deps.Writes, deps.Writes
	}
	deps.Metrics.Init(Writer)
	return &Reconciler{
		client: deps.Client, live: deps.Live, events: deps.Events, copies: deps.Copies,
		writer: fanout.Writer{Name: Writer, Client: writes, Live: writesLive, Events: deps.Events, Volatile: volatile,
			Recent: fanout.NewRecent(), Metrics: deps.Metrics},
		vault:  newVaultReader(deps.Live, deps.Tokens, deps.Audiences),
		pushes: newPushes(), metrics: deps.PushMetrics,
	}, nil
}

// retryAfterError is the wait before retrying copies the API server
// refused or a Secret keymount did not write was in the way of, when the
// poll period is longer.
const retryAfterError = 30 * time.Second

// Reconcile brings one SecretMirror's copies and status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &mirrorsv1alpha2.SecretMirror{}
	if err := r.client.Get(ctx, req.NamespacedName, m); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	s, specErr := parseSpec(m)
	if !m.DeletionTimestamp.IsZero() {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, r.finalize(ctx, m, s)
	}
	if !controllerutil.ContainsFinalizer(m, Finalizer) {
		patch := client.MergeFrom(m.DeepCopy())
		controllerutil.AddFinalizer(m, Finalizer)
		if err := r.client.Patch(ctx, m, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	if specErr != nil {
		r.sources.Forget(req.NamespacedName)
		r.events.Eventf(m, nil, corev1.EventTypeWarning, EventMirrorInvalidSpec, "Sync", "%s", specErr.Error())
		return ctrl.Result{}, r.setStatus(ctx, m, outcome{status: mirrorsv1alpha2.MirrorStatusError, message: specErr.Error()})
	}
	var (
		o   outcome
		err error
	)
	if s.vaultSource {
		r.sources.Forget(req.NamespacedName)
		o, err = r.syncVault(ctx, m, s)
	} else {
		src := types.NamespacedName{Namespace: m.Namespace, Name: s.sourceName}
		if err := r.sources.Watch(ctx, req.NamespacedName, src); err != nil {
			return ctrl.Result{}, err
		}
		o, err = r.sync(ctx, m, s, src)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.setStatus(ctx, m, o); err != nil {
		return ctrl.Result{}, err
	}
	after := s.period
	if o.status == mirrorsv1alpha2.MirrorStatusError && o.retry {
		after = min(after, retryAfterError)
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// forget drops what r keeps for a SecretMirror that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.sources.Forget(key)
	r.vault.forget(key)
	r.pushes.forget(key)
}

// finalize removes the copies with deletePolicy delete, then the
// finalizer.
func (r *Reconciler) finalize(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, s spec) error {
	if !controllerutil.ContainsFinalizer(m, Finalizer) {
		return nil
	}
	if s.deletePolicy != mirrorsv1alpha2.DeletePolicyRetain {
		if _, err := r.prune(ctx, m, func(string) bool { return false }); err != nil {
			return err
		}
	}
	patch := client.MergeFrom(m.DeepCopy())
	controllerutil.RemoveFinalizer(m, Finalizer)
	return client.IgnoreNotFound(r.client.Patch(ctx, m, patch))
}

// SetupWithManager checks opts and adds the SecretMirror reconciler to mgr:
// SecretMirrors,
// namespace metadata (a new namespace requeues the SecretMirrors matching
// it), the copies (an edited or deleted copy requeues its SecretMirror),
// both from the fan-out cache, and one metadata watch per source Secret.
// mgr's scheme must hold mirrorsv1alpha2.
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
		return &mirrorsv1alpha2.SecretMirror{ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: n.Name}}
	})
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
		WatchesRawSource(source.Channel(r.sources.Events(), &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.Workers, 1)}).
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
