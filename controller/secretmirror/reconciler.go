package secretmirror

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/fanout"
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
	sources *sourceWatches
	// vault reads Vault sources.
	vault *vaultReader
}

// New checks deps and returns a Reconciler; SetupWithManager starts it.
func New(deps Deps) (*Reconciler, error) {
	if deps.Client == nil || deps.Live == nil || deps.Copies == nil || deps.Events == nil {
		return nil, errors.New("mirror: Client, Live, Copies and Events are required")
	}
	var (
		writes     = deps.Client
		writesLive = deps.Live
	)
	if deps.Writes != nil {
		writes, writesLive = deps.Writes, deps.Writes
	}
	return &Reconciler{
		client: deps.Client, live: deps.Live, events: deps.Events, copies: deps.Copies,
		writer: fanout.Writer{Name: Writer, Client: writes, Live: writesLive, Events: deps.Events, Volatile: volatile,
			Recent: fanout.NewRecent()},
		vault: newVaultReader(deps.Live, deps.Tokens, deps.Audiences),
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
			r.sources.forget(req.NamespacedName)
			r.vault.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	s, specErr := parseSpec(m)
	if !m.DeletionTimestamp.IsZero() {
		r.sources.forget(req.NamespacedName)
		r.vault.forget(req.NamespacedName)
		return ctrl.Result{}, r.finalize(ctx, m, s)
	}
	if !controllerutil.ContainsFinalizer(m, Finalizer) {
		patch := client.MergeFrom(m.DeepCopy())
		controllerutil.AddFinalizer(m, Finalizer)
		if err := r.client.Patch(ctx, m, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	switch {
	case s.vaultDestination:
		r.sources.forget(req.NamespacedName)
		r.events.Eventf(m, nil, corev1.EventTypeWarning, EventMirrorVaultError, "Sync", VaultDestinationMessage)
		return ctrl.Result{}, r.setStatus(ctx, m, outcome{status: mirrorsv1alpha2.MirrorStatusError, message: VaultDestinationMessage})
	case specErr != nil:
		r.sources.forget(req.NamespacedName)
		r.events.Eventf(m, nil, corev1.EventTypeWarning, EventMirrorInvalidSpec, "Sync", "%s", specErr.Error())
		return ctrl.Result{}, r.setStatus(ctx, m, outcome{status: mirrorsv1alpha2.MirrorStatusError, message: specErr.Error()})
	}
	var (
		o   outcome
		err error
	)
	if s.vaultSource {
		r.sources.forget(req.NamespacedName)
		o, err = r.syncVault(ctx, m, s)
	} else {
		src := types.NamespacedName{Namespace: m.Namespace, Name: s.sourceName}
		if err := r.sources.watch(ctx, req.NamespacedName, src); err != nil {
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
