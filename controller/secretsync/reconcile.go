package secretsync

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
)

// minRequeue is the least wait before a SecretSync is looked at again.
const minRequeue = time.Second

// ctrlOptions: workers reconciles at once, on client-go's rate-limited
// work queue rather than controller-runtime's priority queue (its default):
// every SecretSync waits in the queue for its next refresh, and the
// priority queue keeps some 300 bytes an item for that (its btree entry
// and its latency metric's start time) where the delaying queue keeps 140
// (tests/bench BenchmarkController measures the controller's memory at
// 10,000 SecretSyncs). What the priority queue adds, lower priority for the
// initial list's items, matters little here: a refresh that changes
// nothing costs well under a millisecond.
func ctrlOptions(workers int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: max(workers, 1), UsePriorityQueue: new(false)}
}

// Reconcile brings one SecretSync's Secret and status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	now := r.Clock.Now()
	loaded, wait, err := r.load(ctx, req, now)
	if loaded == nil {
		return wait, err
	}
	ss := *loaded
	pol, polErr := policiesOf(&ss)
	if polErr == nil && pol.creation == CreationNone {
		return retryConflict(r.notWritten(ctx, &ss, now))
	}
	st := r.stateOf(&ss)
	existing, conflict, err := r.ownSecret(ctx, &ss, pol)
	if err != nil {
		return ctrl.Result{}, err
	}
	class, classErr := r.class(ctx, &ss)
	policy, policyErrs := r.policyFor(&ss, class)
	for _, e := range policyErrs {
		klog.V(2).InfoS("refresh policy annotation ignored", "secretSync", klog.KObj(&ss), "err", e)
	}
	upToDate := polErr == nil && conflict == "" && classErr == nil && existing != nil && readyFor(&ss) &&
		r.currentHash(ctx, &ss, class, existing) == ss.Status.SyncHash
	p := r.decide(&ss, policy, st, upToDate, now)
	if p.why == "" {
		if p.after > 0 {
			return ctrl.Result{RequeueAfter: max(p.after, minRequeue)}, nil
		}
		return ctrl.Result{}, nil
	}
	handled := ss.Status.HandledRefresh
	if p.why == whyTriggered {
		handled = ss.Annotations[rotation.RefreshAnnotation]
	}
	var f *failure
	var out *synced
	switch {
	case polErr != nil: // before any store call
		f = newFailure(existing != nil, ss1.ReasonControllerSyncError, ResultInvalid, "%v", polErr)
	case conflict != "":
		f = newFailure(false, ss1.ReasonSecretConflict, ResultConflict, "%s", conflict)
	case classErr != nil:
		f = newFailure(existing != nil, ss1.ReasonSecretProviderClassMisconfigured, ResultClass,
			ss1.MessageFormatClassNotFound, ss.Spec.SecretProviderClassName, classErr)
	default:
		out, f = r.sync(ctx, &ss, pol, class, existing)
	}
	if f != nil {
		return retryConflict(r.failed(ctx, &ss, st, f, p.why == whyTriggered, handled, now))
	}
	return retryConflict(r.succeeded(ctx, &ss, st, policy, out, handled, now))
}

// load reads the SecretSync to reconcile from the cache; nil, with what to
// return, when there is nothing to do now: it is gone or being deleted, or
// the cache does not show the status this controller wrote yet (its watch
// event reconciles again when it does).
func (r *Reconciler) load(ctx context.Context, req ctrl.Request, now time.Time) (*ss1.SecretSync, ctrl.Result, error) {
	var ss ss1.SecretSync
	if err := r.Client.Get(ctx, req.NamespacedName, &ss); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ctrl.Result{}, nil // its Secret goes with it (owner reference)
		}
		return nil, ctrl.Result{}, err
	}
	if !ss.DeletionTimestamp.IsZero() {
		r.state.forget(ss.UID)
		r.pending.forget(ss.UID)
		return nil, ctrl.Result{}, nil
	}
	if r.pending.behind(ss.UID, ss.Status.SyncHash, now) {
		return nil, ctrl.Result{RequeueAfter: pendingRecheck}, nil
	}
	return &ss, ctrl.Result{}, nil
}

// currentHash is the syncHash of the Secret as it is; "" when the key is
// not available (the sync then reports it).
func (r *Reconciler) currentHash(ctx context.Context, ss *ss1.SecretSync, class *secretsstorev1.SecretProviderClass, s *corev1.Secret) string {
	h, err := r.Hashes.Hasher(ctx)
	if err != nil {
		return ""
	}
	return h.Sum(hashContent(ss, class, currentContent(ss, s)))
}

// stateOf is the remembered refresh state of ss; a SecretSync this process
// has not synced starts from its status.
func (r *Reconciler) stateOf(ss *ss1.SecretSync) refreshState {
	if st, ok := r.state.get(ss.UID); ok {
		return st
	}
	var st refreshState
	if t := ss.Status.LastSuccessfulSyncTime; t != nil {
		st.lastRefresh = t.Time
	}
	return st
}

// class reads the SecretSync's class from its namespace.
func (r *Reconciler) class(ctx context.Context, ss *ss1.SecretSync) (*secretsstorev1.SecretProviderClass, error) {
	var c secretsstorev1.SecretProviderClass
	key := types.NamespacedName{Namespace: ss.Namespace, Name: ss.Spec.SecretProviderClassName}
	if err := r.Client.Get(ctx, key, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// ownSecret returns the SecretSync's Secret when it exists and creation
// policy p lets the SecretSync write it (policies.owns: one it created, or
// any with Merge); a message naming the conflict when a Secret of that
// name exists that it may not write. A Secret without the label is not in
// the cache and is read live.
func (r *Reconciler) ownSecret(ctx context.Context, ss *ss1.SecretSync, p policies) (*corev1.Secret, string, error) {
	var s corev1.Secret
	key := types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name}
	err := r.Client.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		err = r.Live.Get(ctx, key, &s)
		_, _ = trimSecret(&s) // as the cache holds it
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", nil
	case err != nil:
		return nil, "", fmt.Errorf("read Secret %s: %w", key, err)
	}
	if p.owns(ss, &s) {
		return &s, "", nil
	}
	return nil, conflictMessage(ss, &s), nil
}

// conflictMessage names a Secret the SecretSync must not write and its
// owners, and the ways out.
func conflictMessage(ss *ss1.SecretSync, s *corev1.Secret) string {
	owner := "no owner reference"
	if len(s.OwnerReferences) > 0 {
		owner = "owned by"
		for i, ref := range s.OwnerReferences {
			if i > 0 {
				owner += ","
			}
			owner += fmt.Sprintf(" %s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
		}
	}
	return fmt.Sprintf("Secret %q already exists and is not owned by this SecretSync (%s); "+
		"keymount-controller writes only Secrets it created: delete or rename that Secret, rename the SecretSync, "+
		"set annotation %s: Merge to write only this SecretSync's keys into it, "+
		"or hand the Secret over once no other tool writes it and it has no owner: annotate it %s=%s", s.Name, owner, AnnotationCreationPolicy,
		AnnotationSecretSyncUID, ss.UID)
}

// failed records a failed sync: status, event, metric, backoff.
func (r *Reconciler) failed(ctx context.Context, ss *ss1.SecretSync, st refreshState, f *failure, triggered bool, handled string, now time.Time) (ctrl.Result, error) {
	r.Metrics.Sync(f.result)
	if triggered && r.cfg.Backoff.Left(st.failures, st.lastFailure, now) > 0 {
		st.cutBackoff = st.failures + 1
	}
	if st.failures == 0 {
		st.failingSince = now
	}
	st.failures++
	st.lastFailure = now
	st.failedGeneration = ss.Generation
	r.state.put(ss.UID, st)
	r.Events.Eventf(ss, nil, corev1.EventTypeWarning, f.reason, "Sync", "%s", f.message)
	klog.V(2).InfoS("secretsync failed", "secretSync", klog.KObj(ss), "reason", f.reason, "failures", st.failures)
	next := func(old ss1.SecretSyncStatus) ss1.SecretSyncStatus {
		return failureStatus(old, ss.Generation, f, handled)
	}
	if err := r.writeStatus(ctx, ss, next, false, now); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: max(r.cfg.Backoff.After(st.failures), minRequeue)}, nil
}

// succeeded records a successful sync: status (only when it changed),
// events, metric, and when the SecretSync is next due.
func (r *Reconciler) succeeded(ctx context.Context, ss *ss1.SecretSync, st refreshState, p rotation.Policy, out *synced, handled string, now time.Time) (ctrl.Result, error) {
	created := out.written != nil && out.old == nil
	if out.written != nil || !unchangedBySuccess(ss, out.hash, out.objects, handled) {
		next := func(old ss1.SecretSyncStatus) ss1.SecretSyncStatus {
			return successStatus(old, ss.Generation, out.hash, out.objects, handled, created)
		}
		if err := r.writeStatus(ctx, ss, next, out.written != nil, now); err != nil {
			return ctrl.Result{}, err
		}
	}
	r.state.put(ss.UID, refreshState{lastRefresh: now})
	r.Metrics.SyncSucceeded(now)
	r.emitWritten(ss, out)
	if after := afterSuccess(ss, p); after > 0 {
		return ctrl.Result{RequeueAfter: max(after, minRequeue)}, nil
	}
	return ctrl.Result{}, nil
}

// emitWritten counts the sync and emits the event of a write.
func (r *Reconciler) emitWritten(ss *ss1.SecretSync, out *synced) {
	switch {
	case out.written == nil:
		r.Metrics.Sync(ResultUnchanged)
	case out.old == nil:
		r.Metrics.Sync(ResultCreated)
		r.Events.Eventf(ss, nil, corev1.EventTypeNormal, ss1.ReasonCreateSuccessful, "Sync",
			"created Secret %s with keys %s", ss.Name, keyList(out.written.data))
	default:
		r.Metrics.Sync(ResultUpdated)
		added, changed, removed := out.written.changedKeys(out.old)
		r.Events.Eventf(ss, nil, corev1.EventTypeNormal, ReasonSecretUpdated, "Sync",
			"updated Secret %s: %s", ss.Name, describeChange(added, changed, removed))
	}
}

// writeStatus writes next(status) as ss's status unless it says what the
// status says already and the Secret was not written.
// lastSuccessfulSyncTime moves only with a write. ss may be the cache's
// trimmed form: the status is then read live first, so that next sees
// and keeps all of it.
func (r *Reconciler) writeStatus(ctx context.Context, ss *ss1.SecretSync, next func(ss1.SecretSyncStatus) ss1.SecretSyncStatus, wroteSecret bool, now time.Time) error {
	full, err := r.fullSecretSync(ctx, ss)
	if err != nil {
		return err
	}
	st := next(full.Status)
	if !wroteSecret && statusEqual(full.Status, st) {
		return nil
	}
	if st.SyncHash != "" && readyTrue(st) {
		t := metav1.NewTime(now)
		st.LastSuccessfulSyncTime = &t
	}
	full.Status = st
	if err := r.Client.Status().Update(ctx, full); err != nil {
		return fmt.Errorf("update the status of SecretSync %s/%s: %w", ss.Namespace, ss.Name, err)
	}
	if st.SyncHash != ss.Status.SyncHash {
		r.pending.wrote(ss.UID, st.SyncHash, now)
	}
	return nil
}

// fullSecretSync is ss whole: a copy of ss when it is, else read live. A
// SecretSync that changed since the cache saw it (another generation, or
// another object of that name) is a conflict: its new version is queued
// already.
func (r *Reconciler) fullSecretSync(ctx context.Context, ss *ss1.SecretSync) (*ss1.SecretSync, error) {
	if !isTrimmed(ss) {
		return ss.DeepCopy(), nil
	}
	var full ss1.SecretSync
	if err := r.Live.Get(ctx, client.ObjectKeyFromObject(ss), &full); err != nil {
		return nil, fmt.Errorf("read SecretSync %s/%s before writing its status: %w", ss.Namespace, ss.Name, err)
	}
	if full.UID != ss.UID || full.Generation != ss.Generation {
		return nil, apierrors.NewConflict(ss1.GroupVersion.WithResource("secretsyncs").GroupResource(), ss.Name,
			fmt.Errorf("SecretSync %s/%s changed since it was read", ss.Namespace, ss.Name))
	}
	full.ManagedFields = nil
	return &full, nil
}

// retryConflict turns a conflict (the SecretSync changed since the cache
// saw it; its new version is queued already) into a quiet requeue.
func retryConflict(res ctrl.Result, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: minRequeue}, nil
	}
	return res, err
}

// notWritten records creation policy None: no provider call, no Secret
// written; Ready=True says so. syncHash is cleared, so that another
// policy syncs at once.
func (r *Reconciler) notWritten(ctx context.Context, ss *ss1.SecretSync, now time.Time) (ctrl.Result, error) {
	r.state.forget(ss.UID)
	next := func(old ss1.SecretSyncStatus) ss1.SecretSyncStatus {
		st := *old.DeepCopy()
		initConditions(&st, ss.Generation)
		keepGenerations(&st, ss.Generation)
		setCondition(&st, ss.Generation, ss1.ConditionReady, metav1.ConditionTrue, ReasonCreationPolicyNone, MessageCreationPolicyNone)
		st.ObservedGeneration = ss.Generation
		st.SyncHash = ""
		st.Objects = nil
		return st
	}
	return ctrl.Result{}, r.writeStatus(ctx, ss, next, false, now)
}
