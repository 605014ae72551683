package secretsync

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// The cache holds each SecretSync trimmed to what deciding a refresh
// needs (trimSecretSync): 10,000 SecretSyncs cost their spec and a few
// status fields, not their whole objects (tests/bench BenchmarkController
// measures the controller's memory). A status write reads the SecretSync
// live first (fullSecretSync), except where the trimmed form proves that
// the status would not change: the steady state of a refresh round with
// nothing changed, which writes nothing and so reads nothing.
//
// The form is marked in metadata.generateName, which the reconciler never
// reads: the markers hold a ':', which the API server refuses in a
// generateName, so an object read from it never carries one.
const (
	// trimmedMark: the status keeps its Ready condition only.
	trimmedMark = "keymount:trimmed"
	// steadyMark: trimmedMark, and the full status was what a successful
	// sync that wrote nothing would make of it with its own syncHash,
	// objects and handledRefresh (successStatus left it unchanged).
	steadyMark = "keymount:trimmed-steady"
)

// trimSecretSync returns the cache's form of ss: a new object with its
// name, namespace, UID, resourceVersion, generation, deletion timestamp,
// annotations (the refresh policy and trigger, templates), spec, and of
// its status syncHash, observedGeneration, objects, handledRefresh,
// lastSuccessfulSyncTime and the Ready condition. Labels, owner
// references, finalizers, managedFields and the other conditions are
// left out. Idempotent.
func trimSecretSync(ss *ss1.SecretSync) *ss1.SecretSync {
	if isTrimmed(ss) {
		return ss
	}
	internSecretSync(ss)
	out := &ss1.SecretSync{TypeMeta: ss.TypeMeta, Spec: ss.Spec}
	out.Name, out.Namespace, out.UID = ss.Name, ss.Namespace, ss.UID
	out.ResourceVersion, out.Generation = ss.ResourceVersion, ss.Generation
	out.DeletionTimestamp = ss.DeletionTimestamp
	out.Annotations = withoutLastApplied(ss.Annotations)
	st := &ss.Status
	out.Status = ss1.SecretSyncStatus{
		SyncHash: st.SyncHash, LastSuccessfulSyncTime: st.LastSuccessfulSyncTime,
		ObservedGeneration: st.ObservedGeneration, Objects: st.Objects, HandledRefresh: st.HandledRefresh,
	}
	if c := meta.FindStatusCondition(st.Conditions, ss1.ConditionReady); c != nil {
		out.Status.Conditions = []metav1.Condition{*c}
	}
	out.GenerateName = trimmedMark
	if steadyStatus(ss) {
		out.GenerateName = steadyMark
	}
	return out
}

// steadyStatus reports whether a successful sync that wrote nothing, with
// ss's own syncHash, objects and handledRefresh, would leave its status as
// it is.
func steadyStatus(ss *ss1.SecretSync) bool {
	st := ss.Status
	if st.SyncHash == "" {
		return false
	}
	next := successStatus(st, ss.Generation, st.SyncHash, st.Objects, st.HandledRefresh, false)
	return statusEqual(st, next)
}

// isTrimmed reports whether ss is the cache's trimmed form.
func isTrimmed(ss *ss1.SecretSync) bool {
	return ss.GenerateName == trimmedMark || ss.GenerateName == steadyMark
}

// unchangedBySuccess reports whether the trimmed form alone proves that a
// successful sync that wrote nothing, giving hash, objects and handled,
// leaves the status as it is, so that nothing need be read or written.
func unchangedBySuccess(ss *ss1.SecretSync, hash string, objects []ss1.SecretSyncObject, handled string) bool {
	st := &ss.Status
	return ss.GenerateName == steadyMark && st.ObservedGeneration == ss.Generation && st.SyncHash == hash &&
		st.HandledRefresh == handled && slices.Equal(st.Objects, objects)
}

// withoutLastApplied is a without kubectl's last-applied-configuration
// annotation (a copy of the whole manifest that kubectl apply and Argo CD
// leave on every object; the reconciler never reads it), its keys and
// short values interned.
func withoutLastApplied(a map[string]string) map[string]string {
	delete(a, corev1.LastAppliedConfigAnnotation)
	if len(a) == 0 {
		return nil
	}
	return internMap(a)
}
