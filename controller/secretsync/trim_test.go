package secretsync

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/rotation"
)

// trimCases are SecretSyncs in every state the reconciler tells apart,
// each as the API server holds it (labels, owner references, managedFields,
// last-applied-configuration and all three conditions).
func trimCases() map[string]*ss1.SecretSync {
	full := func(ann map[string]string) *ss1.SecretSync {
		ss := spec("Opaque", "obj", "value")
		ss.UID = "0b6f3a52-57b0-4a3b-9f07-8b4f2c1d0e11"
		ss.ResourceVersion, ss.Generation = "42", 2
		ss.Labels = map[string]string{"team": "a"}
		ss.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "u"}}
		ss.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		ss.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: "{}"}
		for k, v := range ann {
			ss.Annotations[k] = v
		}
		ss.Status = successStatus(ss.Status, 2, "hash-1", []ss1.SecretSyncObject{{ID: "obj", Version: "v1"}}, "t0", true)
		ss.Status = successStatus(ss.Status, 2, "hash-1", []ss1.SecretSyncObject{{ID: "obj", Version: "v1"}}, "t0", false)
		t := metav1.NewTime(time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC))
		ss.Status.LastSuccessfulSyncTime = &t
		return ss
	}
	created := full(nil)
	created.Status = successStatus(ss1.SecretSyncStatus{}, 2, "hash-1", created.Status.Objects, "t0", true)
	failing := full(nil)
	failing.Status = failureStatus(failing.Status, 2, newFailure(true, ss1.ReasonProviderError, ResultProvider, "down"), "t0")
	newGen := full(nil)
	newGen.Generation = 3
	return map[string]*ss1.SecretSync{
		"steady":               full(nil),
		"just created":         created,
		"failing":              failing,
		"new generation":       newGen,
		"refresh trigger":      full(map[string]string{rotation.RefreshAnnotation: "t1"}),
		"own policy":           full(map[string]string{rotation.PolicyAnnotation: "Periodic", rotation.IntervalAnnotation: "30s"}),
		"template":             full(map[string]string{"keymount.io/template.extra": "{{ .obj }}"}),
		"forceSynchronization": func() *ss1.SecretSync { s := full(nil); s.Spec.ForceSynchronization = "f1"; return s }(),
		"not synced yet": func() *ss1.SecretSync {
			s := full(nil)
			s.Status = ss1.SecretSyncStatus{}
			return s
		}(),
	}
}

func trimmedCopy(t *testing.T, ss *ss1.SecretSync) *ss1.SecretSync {
	t.Helper()
	o, err := trimObject(ss.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := o.(*ss1.SecretSync)
	if !ok {
		t.Fatalf("transform returned %T", o)
	}
	if !isTrimmed(tr) {
		t.Fatalf("trimObject did not trim %s", ss.Name)
	}
	return tr
}

// TestTrimmedSecretSyncDecidesAsFull: every decision the reconciler takes
// from a cached SecretSync comes out the same from the trimmed form as from
// the whole object: the refresh policy, the plan, Ready, the versions sent,
// the syncHash input, and whether a successful sync that wrote nothing must
// write the status. It fails when the trimmed cache loses a field the
// reconciler reads.
func TestTrimmedSecretSyncDecidesAsFull(t *testing.T) {
	now := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	r := &Reconciler{cfg: Config{PollInterval: time.Hour, Backoff: rotation.Backoff{Initial: 10 * time.Second, Max: time.Minute}}, state: newStates(), pending: newPendingStatuses()}
	class := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{UID: "c1", Generation: 4}}
	secret := &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"value": digest([]byte("x")), "extra": digest([]byte("y"))},
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{ss1.LabelSecretSync: ""}}}
	states := []refreshState{
		{}, {lastRefresh: now.Add(-time.Minute)}, {lastRefresh: now.Add(-2 * time.Hour)},
		{lastRefresh: now.Add(-time.Minute), failures: 2, lastFailure: now.Add(-5 * time.Second), failedGeneration: 2},
	}
	for name, full := range trimCases() {
		t.Run(name, func(t *testing.T) {
			tr := trimmedCopy(t, full)
			pFull, _ := r.policyFor(full, class)
			pTrim, _ := r.policyFor(tr, class)
			if pFull != pTrim {
				t.Errorf("policy %+v from the trimmed form, %+v from the whole", pTrim, pFull)
			}
			if readyFor(full) != readyFor(tr) {
				t.Errorf("readyFor %v from the trimmed form, %v from the whole", readyFor(tr), readyFor(full))
			}
			if r.stateOf(full) != r.stateOf(tr) {
				t.Errorf("stateOf differs: %+v, whole %+v", r.stateOf(tr), r.stateOf(full))
			}
			for _, st := range states {
				for _, up := range []bool{true, false} {
					if a, b := r.decide(full, pFull, st, up, now), r.decide(tr, pTrim, st, up, now); a != b {
						t.Errorf("decide(%+v, upToDate %v) = %+v from the trimmed form, %+v from the whole", st, up, b, a)
					}
				}
			}
			if !equality.Semantic.DeepEqual(currentVersions(full), currentVersions(tr)) {
				t.Errorf("current versions %v, whole %v", currentVersions(tr), currentVersions(full))
			}
			if a, b := hashContent(full, class, currentContent(full, secret)), hashContent(tr, class, currentContent(tr, secret)); !equality.Semantic.DeepEqual(a, b) {
				t.Errorf("syncHash input %+v, whole %+v", b, a)
			}
			if full.Status.SyncHash != tr.Status.SyncHash || full.Status.HandledRefresh != tr.Status.HandledRefresh {
				t.Errorf("syncHash or handledRefresh lost")
			}
			// A success that changed nothing: the trimmed form may skip
			// the status only when the whole status would not change.
			st := full.Status
			for _, handled := range []string{st.HandledRefresh, "t1"} {
				skip := unchangedBySuccess(tr, st.SyncHash, st.Objects, handled)
				unchanged := statusEqual(st, successStatus(st, full.Generation, st.SyncHash, st.Objects, handled, false))
				if skip && !unchanged {
					t.Errorf("handled %q: the trimmed form skips a status write the whole object needs", handled)
				}
				if unchanged && !skip && name != "not synced yet" {
					t.Errorf("handled %q: the trimmed form reads the SecretSync for a write that the whole proves needless", handled)
				}
			}
		})
	}
}

// TestStatusWrittenFromTrimmed: a status write from the trimmed form reads
// the SecretSync whole first, so what it writes keeps every condition and
// field, as the write from the whole object does.
func TestStatusWrittenFromTrimmed(t *testing.T) {
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	objects := []ss1.SecretSyncObject{{ID: "obj", Version: "v2"}}
	for name, full := range trimCases() {
		t.Run(name, func(t *testing.T) {
			written := map[bool]ss1.SecretSyncStatus{}
			for _, trim := range []bool{false, true} {
				obj := full.DeepCopy()
				obj.ManagedFields = nil
				c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(obj).WithStatusSubresource(obj).Build()
				var stored ss1.SecretSync
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), &stored); err != nil {
					t.Fatal(err)
				}
				ss := &stored
				if trim {
					ss = trimmedCopy(t, ss)
				}
				r := &Reconciler{Deps: Deps{Client: c, Live: c}, pending: newPendingStatuses()}
				next := func(old ss1.SecretSyncStatus) ss1.SecretSyncStatus {
					return successStatus(old, ss.Generation, "hash-2", objects, "t1", false)
				}
				if err := r.writeStatus(context.Background(), ss, next, true, now); err != nil {
					t.Fatal(err)
				}
				var got ss1.SecretSync
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), &got); err != nil {
					t.Fatal(err)
				}
				// A condition that changes takes the wall clock's time as its
				// LastTransitionTime: the two writes may fall in different seconds.
				for i := range got.Status.Conditions {
					got.Status.Conditions[i].LastTransitionTime = metav1.Time{}
				}
				written[trim] = got.Status
				if !equality.Semantic.DeepEqual(got.Labels, full.Labels) || len(got.OwnerReferences) != 1 {
					t.Errorf("trimmed %v: the status write changed the metadata: %+v", trim, got.ObjectMeta)
				}
			}
			if !equality.Semantic.DeepEqual(written[true], written[false]) {
				t.Errorf("status written from the trimmed form\n%+v\nfrom the whole\n%+v", written[true], written[false])
			}
			if len(written[true].Conditions) < 3 {
				t.Errorf("status written from the trimmed form has %d conditions, want SecretCreated, SecretUpdated and Ready", len(written[true].Conditions))
			}
		})
	}
}
