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
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/rotation"
)

// SyncLabel marks the Secrets a SecretSync writes (the sync controller's
// label, value ""): the only Secrets a Secret restart watches.
const SyncLabel = "secrets-store.sync.x-k8s.io"

// SecretRolloutPrefix starts the pod-template annotation a change of a
// consumed Secret sets: keymount.io/rollout-secret-<Secret name>.
const SecretRolloutPrefix = RolloutAnnotationPrefix + "secret-"

// contentAnnotation carries, on the cache's trimmed copy of a Secret only
// (never written to the API server), the keyed digest of its content.
const contentAnnotation = rotation.AnnotationPrefix + "restart-content"

// writtenAnnotation carries, on the cache's trimmed copy of a Secret only,
// the time of its last write as the API server recorded it (the latest
// managedFields time, RFC 3339, whole seconds as creationTimestamp).
const writtenAnnotation = rotation.AnnotationPrefix + "restart-written"

// hashDomain separates this digest from every other use of the key.
const hashDomain = "keymount restart-on-change secret content v1\x00"

// SecretAnnotationKey returns the pod-template annotation a change of the
// Secret name sets: keymount.io/rollout-secret-<name>, or the first 16 hex
// digits of the SHA-256 of name in its place when the annotation name
// would exceed 63 characters.
func SecretAnnotationKey(name string) string {
	return annotationKey(rolloutName+"secret-", name)
}

// SecretAnnotationValue returns the annotation's value for a Secret of
// type typ holding data: the first 16 bytes, in hex, of HMAC-SHA256 keyed
// with key over the type and every key and value (length-prefixed, keys
// sorted). Keyed, so the workload's annotation, readable by whoever reads
// the Deployment, tells nothing about the values offline; deterministic,
// so every replica with the same key agrees and a change restarts once.
func SecretAnnotationValue(key []byte, typ corev1.SecretType, data map[string][]byte) string {
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
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// secretTrimmer is the cache transform of synced Secrets: metadata to name
// them, and in place of the data its keyed digest (contentAnnotation).
func secretTrimmer(key []byte) func(any) (any, error) {
	return func(obj any) (any, error) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return obj, nil
		}
		t := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
		}}
		AnnotateSecret(key, s, t)
		return t, nil
	}
}

// AnnotateSecret sets on dst, a cached copy of the synced Secret src (it may
// be src itself), the two annotations the Secret reconciler reads in place
// of the data and the managedFields: the keyed digest of src's content and
// the time of its last write. For a cache shared with another reader
// (Options.SecretCache): call it in that cache's transform before the
// data or the managedFields are trimmed. The annotations exist in the
// cache only; a cached Secret is never written back.
func AnnotateSecret(key []byte, src, dst *corev1.Secret) {
	annotations := dst.Annotations // dst is the cache's own: set in place
	if annotations == nil {
		annotations = make(map[string]string, 2)
	}
	annotations[contentAnnotation] = SecretAnnotationValue(key, src.Type, src.Data)
	if w := lastWrite(src); !w.IsZero() {
		annotations[writtenAnnotation] = w.UTC().Format(time.RFC3339)
	}
	dst.Annotations = annotations
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

// secretSeen is what the reconciler remembers of a Secret since it started.
type secretSeen struct {
	value string
	// changedAt is when a change of its content was first seen, zero
	// while none was.
	changedAt time.Time
}

// secretReconciler restarts the opted-in workloads that consume a synced
// Secret whose content changed.
type secretReconciler struct {
	secrets client.Reader // Secrets annotated by AnnotateSecret
	cache   client.Reader // trimmed workloads
	r       *Restarter
	clk     clock.PassiveClock

	mu   sync.Mutex
	seen map[types.NamespacedName]secretSeen
}

// observe records the Secret's current value and returns what is known of
// its changes. A change is dated by the write that made it, as the API
// server recorded it (writtenAnnotation), else by the clock.
func (s *secretReconciler) observe(key types.NamespacedName, value, written string) secretSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.seen[key]
	if ok && prev.value != value {
		at, err := time.Parse(time.RFC3339, written)
		if err != nil {
			at = s.clk.Now().Truncate(time.Second)
		}
		prev.changedAt = at
	}
	prev.value = value
	s.seen[key] = prev
	return prev
}

func (s *secretReconciler) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, key)
}

// Reconcile makes every opted-in workload that consumes the Secret carry
// SecretAnnotationKey = its current value, restarting it once per change.
// A workload whose template has no such annotation yet is restarted only
// for a change seen while this reconciler ran and only when the workload
// was created before the second of that change (both as the API server
// dates them): the pods of a later one started with the new content.
func (s *secretReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sec := &corev1.Secret{}
	if err := s.secrets.Get(ctx, req.NamespacedName, sec); err != nil {
		if apierrors.IsNotFound(err) {
			s.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	value := sec.Annotations[contentAnnotation]
	seen := s.observe(req.NamespacedName, value, sec.Annotations[writtenAnnotation])
	consumers, err := s.consumers(ctx, req.Namespace, req.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	for _, w := range consumers {
		res, err := s.r.restartForSecret(ctx, w, req.Name, value, seen.changedAt)
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

// restartForSecret makes c's pod template carry SecretAnnotationKey(secret)
// = value, unless the template has no such annotation and no change was
// seen since c was created (changedAt zero or not after its creation).
func (r *Restarter) restartForSecret(ctx context.Context, c consumedBy, secret, value string, changedAt time.Time) (Result, error) {
	res := Result{Workload: c.w, Key: SecretAnnotationKey(secret), Value: value}
	baseline := func(current string) string {
		if current == "" && (changedAt.IsZero() || !c.created.Before(changedAt)) {
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
