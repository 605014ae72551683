package restart

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// SyncLabel marks the Secrets a SecretSync writes (the sync controller's
// label, value ""): the only Secrets a Secret restart watches.
const SyncLabel = "secrets-store.sync.x-k8s.io"

// SecretRolloutPrefix starts the pod-template annotation a change of a
// consumed Secret sets: keymount.io/rollout-secret-<Secret name>.
const SecretRolloutPrefix = RolloutAnnotationPrefix + "secret-"

// hashDomain separates this digest from every other use of the key.
const hashDomain = "keymount restart-on-change secret content v1\x00"

// SecretAnnotationKey returns the pod-template annotation a change of the
// Secret name sets: keymount.io/rollout-secret-<name>, or the first 16 hex
// digits of the SHA-256 of name in its place when the annotation name
// would exceed 63 characters.
func SecretAnnotationKey(name string) string {
	return annotationKey(rolloutName+"secret-", name)
}

// secretAnnotationValue returns the annotation's value for a Secret of
// type typ holding data: the first 16 bytes, in hex, of HMAC-SHA256 keyed
// with key over the type and every key and value (length-prefixed, keys
// sorted). Keyed, so the workload's annotation, readable by whoever reads
// the Deployment, tells nothing about the values offline; deterministic,
// so every replica with the same key agrees and a change restarts once.
func secretAnnotationValue(key []byte, typ corev1.SecretType, data map[string][]byte) string {
	sum := secretSum(key, typ, data)
	return hex.EncodeToString(sum[:])
}

// sumSize is the size of a Secret's digest: the first 16 bytes of the
// HMAC-SHA256.
const sumSize = 16

// secretSum is secretAnnotationValue before its hex encoding.
func secretSum(key []byte, typ corev1.SecretType, data map[string][]byte) [sumSize]byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(hashDomain)) // a hash.Hash never fails to write
	write := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	write([]byte(typ))
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		write([]byte(k))
		write(data[k])
	}
	var sum [sumSize]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// secretTrimmer is the cache transform of synced Secrets when the Secret
// reconciler keeps its own cache: their digest and write time go to d,
// the cached copy keeps the metadata that names them.
func secretTrimmer(d *SecretDigests) func(any) (any, error) {
	return func(obj any) (any, error) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return obj, nil
		}
		d.Record(s)
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
		}}, nil
	}
}

// lastWrite is the latest time of s's managedFields: when the API server
// last saw a manager write it.
func lastWrite(s *corev1.Secret) time.Time {
	var last time.Time
	for _, m := range s.ManagedFields {
		if m.Time != nil && m.Time.After(last) {
			last = m.Time.Time
		}
	}
	return last
}

// secretReconciler restarts the opted-in workloads that consume a synced
// Secret whose content changed.
type secretReconciler struct {
	secrets client.Reader // synced Secrets, whose digests Record put in digests
	digests *SecretDigests
	cache   client.Reader // trimmed workloads
	r       *Restarter
}

// secretEvents enqueues a synced Secret's events, and drops its digest
// when the informer tells it left the cache (deleted or unlabelled): a
// handler runs after the cache's store changed, in the order of the
// Secret's events.
func secretEvents(d *SecretDigests) handler.TypedEventHandler[*corev1.Secret, reconcile.Request] {
	enqueue := &handler.TypedEnqueueRequestForObject[*corev1.Secret]{}
	return handler.TypedFuncs[*corev1.Secret, reconcile.Request]{
		CreateFunc:  enqueue.Create,
		UpdateFunc:  enqueue.Update,
		GenericFunc: enqueue.Generic,
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*corev1.Secret], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.Object != nil {
				d.forget(types.NamespacedName{Namespace: e.Object.Namespace, Name: e.Object.Name}, e.Object.UID)
			}
			enqueue.Delete(ctx, e, q)
		},
	}
}

// Reconcile makes every opted-in workload that consumes the Secret carry
// SecretAnnotationKey = its current value, restarting it once per change.
// A workload whose template has no such annotation yet is restarted only
// for a change the cache recorded (SecretDigests: the content before it
// was recorded too, however late this reconcile runs) and only when the
// workload was created no later than the second of that change (both as
// the API server dates them): the pods of one created in a later second
// started with the new content.
func (s *secretReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sec := &corev1.Secret{}
	if err := s.secrets.Get(ctx, req.NamespacedName, sec); err != nil {
		// NotFound is no deletion: the transform may have recorded the
		// Secret's creation before the cache's store holds it. Its entry
		// goes when the informer tells it left (secretEvents).
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	value, changedAt, ok := s.digests.observe(req.NamespacedName)
	if !ok {
		return ctrl.Result{}, fmt.Errorf("restart: Secret %s is cached but its digest was never recorded: the cache's transform must call SecretDigests.Record", req.NamespacedName)
	}
	consumers, err := s.consumers(ctx, req.Namespace, req.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	for _, w := range consumers {
		res, err := s.r.restartForSecret(ctx, w, req.Name, value, changedAt)
		switch {
		case err != nil:
			errs = append(errs, err)
		case res.Patched:
			klog.InfoS("restarting workload: a Secret it consumes changed", "secret", klog.KObj(sec),
				"workload", res.Workload.String(), "annotation", res.Key, "value", res.Value, "generation", res.Generation)
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// consumedBy is a trimmed workload with its creation time.
type consumedBy struct {
	w       Workload
	created time.Time
}

// consumers lists the opted-in workloads of namespace that consume the
// Secret name.
func (s *secretReconciler) consumers(ctx context.Context, namespace, name string) ([]consumedBy, error) {
	var out []consumedBy
	opts := []client.ListOption{client.InNamespace(namespace), client.MatchingFields{indexConsumes: name}}
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &appsv1.DaemonSetList{}} {
		if err := s.cache.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("list the workloads that consume Secret %s/%s: %w", namespace, name, err)
		}
		var items []client.Object
		switch l := list.(type) {
		case *appsv1.DeploymentList:
			for i := range l.Items {
				items = append(items, &l.Items[i])
			}
		case *appsv1.StatefulSetList:
			for i := range l.Items {
				items = append(items, &l.Items[i])
			}
		case *appsv1.DaemonSetList:
			for i := range l.Items {
				items = append(items, &l.Items[i])
			}
		}
		for _, o := range items {
			out = append(out, consumedBy{w: workloadOf(o), created: o.GetCreationTimestamp().Time})
		}
	}
	return out, nil
}

// startedWithCurrent reports whether a workload created at created, never
// restarted for a Secret, started with the Secret's current content: no
// change was seen (changedAt zero), or the workload was created in a later
// second than the change. Both are the API server's times, to the second;
// in the same second either content may have started.
func startedWithCurrent(created, changedAt time.Time) bool {
	return changedAt.IsZero() || created.After(changedAt)
}

// restartForSecret makes c's pod template carry SecretAnnotationKey(secret)
// = value, unless the template has no such annotation and no change was
// seen since c was created: changedAt zero, or in a later second than
// c's creation. Both times are the API server's, to the second: a
// workload created in the second of the change may have started with
// either content, so it is restarted (one restart too many at worst,
// never a pod left on the old content).
func (r *Restarter) restartForSecret(ctx context.Context, c consumedBy, secret, value string, changedAt time.Time) (Result, error) {
	res := Result{Workload: c.w, Key: SecretAnnotationKey(secret), Value: value}
	baseline := func(current string) string {
		if current == "" && startedWithCurrent(c.created, changedAt) {
			return "its pods started with the Secret's current content"
		}
		return ""
	}
	for attempt := 1; ; attempt++ {
		_, err := r.ensure(ctx, &res, baseline)
		switch {
		case errors.Is(err, ErrNoWorkload):
			return Result{}, nil // deleted since the cache saw it
		case apierrors.IsConflict(err) && attempt < maxAttempts:
			continue
		case err != nil:
			return Result{}, fmt.Errorf("restart %s for the change of Secret %s: %w", c.w, secret, err)
		}
		if res.Patched {
			r.event(c.w.Reference(), corev1.EventTypeNormal, ReasonRestarting,
				fmt.Sprintf("restarting: Secret %s, which the pod template consumes, changed (pod template annotation %s=%s)",
					secret, res.Key, res.Value))
		}
		return res, nil
	}
}
