//go:build integration

package secretsync_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	secretsync "github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/poll"
)

// storeProvider is a dirProvider whose data can be deleted from the store:
// while gone, every Mount answers NotFound, as a provider does for an
// object deleted from its store. It counts its calls.
type storeProvider struct {
	dirProvider
	gone  atomic.Bool
	calls atomic.Int64
}

func (p *storeProvider) Mount(ctx context.Context, req *server.MountRequest) (*server.MountResult, error) {
	p.calls.Add(1)
	if p.gone.Load() {
		return nil, fmt.Errorf("object %q: %w", "app", server.ErrNotFound)
	}
	res, err := p.dirProvider.Mount(ctx, req)
	if err == nil && len(res.Versions) == 0 {
		// A find that matches nothing still reports its object.
		res.Versions = []server.ObjectVersion{{ID: "app", Version: "none"}}
	}
	return res, err
}

// otherWriter is the field manager of the other tool that writes the
// Secrets of these tests.
const otherWriter = "other-writer"

// policyNamespace makes a namespace with a service account "app" and a
// class "store" of its own provider, serving db=admin, and returns both.
func policyNamespace(t *testing.T, f *fixture, name string) (string, *storeProvider) {
	t.Helper()
	p := &storeProvider{}
	p.set("db", "admin", "pw", "s3cr3t")
	ctrltest.ServeProvider(t, f.socks, name, p)
	ns := f.namespace(t, name)
	if err := f.c.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	class := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store"},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: secretsstorev1.Provider(name)},
	}
	if err := f.c.Create(t.Context(), class); err != nil {
		t.Fatal(err)
	}
	return ns, p
}

// policySync creates the SecretSync name (db → user, pw → password) with
// the policy annotations (creation, deletion; "" leaves one out).
func policySync(t *testing.T, f *fixture, ns, name, creation, deletion string) types.NamespacedName {
	t.Helper()
	ss := secretSync(ns, name, "db", "user", "pw", "password")
	ss.Spec.SecretObject.Labels = map[string]string{"app": "web"}
	ss.Annotations = map[string]string{}
	if creation != "" {
		ss.Annotations[secretsync.AnnotationCreationPolicy] = creation
	}
	if deletion != "" {
		ss.Annotations[secretsync.AnnotationDeletionPolicy] = deletion
	}
	if err := f.c.Create(t.Context(), ss); err != nil {
		t.Fatal(err)
	}
	return types.NamespacedName{Namespace: ns, Name: name}
}

// writeOther applies, as another tool (field manager otherWriter), the
// key "theirs" and the label example.com/owner to the Secret key (creating
// it when it does not exist).
func writeOther(t *testing.T, f *fixture, key types.NamespacedName) {
	t.Helper()
	other := corev1.SecretTypeOpaque
	cfg := corev1ac.Secret(key.Name, key.Namespace).WithType(other).
		WithData(map[string][]byte{"theirs": []byte("their-value")}).
		WithLabels(map[string]string{"example.com/owner": otherWriter})
	if err := f.c.Apply(t.Context(), cfg, client.FieldOwner(otherWriter)); err != nil {
		t.Fatal(err)
	}
}

// waitData waits until the Secret key holds exactly want.
func waitData(t *testing.T, f *fixture, key types.NamespacedName, what string, want map[string]string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	poll.Until(t, what, func(ctx context.Context) (bool, error) {
		if err := f.c.Get(ctx, key, &s); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return maps.Equal(stringData(&s), want), nil
	})
	return &s
}

// waitCondition waits for Ready=status with reason and returns the
// SecretSync.
func waitCondition(t *testing.T, f *fixture, key types.NamespacedName, status metav1.ConditionStatus, reason string) *ss1.SecretSync {
	t.Helper()
	var got *ss1.SecretSync
	poll.Until(t, fmt.Sprintf("Ready=%s %s of %s", status, reason, key), func(ctx context.Context) (bool, error) {
		got = f.get(t, key)
		return conditionIs(got, ss1.ConditionReady, status, reason), nil
	})
	return got
}

// TestSecretSyncPolicies: on a real API server, with another field
// manager's key and label in the Secret, each of External Secrets'
// creation and deletion policies, as keymount.io/creation-policy and
// keymount.io/deletion-policy, has ESO's outcome.
func TestSecretSyncPolicies(t *testing.T) {
	// Short backoffs: a Merge waiting for its Secret and a sync whose data
	// is gone are retried within the test.
	f := startFixture(t, secretsync.Config{Backoff: rotation.Backoff{Initial: 200 * time.Millisecond, Max: time.Second}})
	t.Run("Orphan", func(t *testing.T) { checkOrphan(t, f) })
	t.Run("Merge", func(t *testing.T) { checkMerge(t, f) })
	t.Run("Delete", func(t *testing.T) { checkDelete(t, f) })
	t.Run("Delete when data-from finds nothing", func(t *testing.T) { checkDeleteDataFrom(t, f) })
	t.Run("Retain", func(t *testing.T) { checkRetain(t, f) })
	t.Run("None", func(t *testing.T) { checkNone(t, f) })
	t.Run("invalid", func(t *testing.T) { checkInvalidPolicy(t, f) })
}

// checkOrphan: Orphan writes the Secret with no owner reference (so the
// garbage collector leaves it when the SecretSync goes) and the
// SecretSync's UID in keymount.io/secret-sync-uid; another writer's key
// stays through refreshes; deletion policy Merge removes only the
// SecretSync's keys when the data is gone, and they come back with it; the
// SecretSync deleted, the Secret stays, and a new SecretSync of that name
// (another UID) refuses it (SecretConflict).
func checkOrphan(t *testing.T, f *fixture) {
	ns, p := policyNamespace(t, f, "orphan")
	key := policySync(t, f, ns, "creds", "Orphan", "Merge")
	f.waitReady(t, key)
	uid := f.get(t, key).UID
	s := f.secret(t, key)
	if len(s.OwnerReferences) != 0 {
		t.Errorf("Orphan Secret has owner references %+v, want none", s.OwnerReferences)
	}
	if got := s.Annotations[secretsync.AnnotationSecretSyncUID]; got != string(uid) {
		t.Errorf("annotation %s = %q, want the SecretSync's UID %s", secretsync.AnnotationSecretSyncUID, got, uid)
	}
	writeOther(t, f, key)
	p.set("db", "admin2", "pw", "s3cr3t")
	annotate(t, f, key, rotation.RefreshAnnotation, "r1")
	waitData(t, f, key, "the new user beside the other writer's key",
		map[string]string{"user": "admin2", "password": "s3cr3t", "theirs": "their-value"})

	p.gone.Store(true)
	annotate(t, f, key, rotation.RefreshAnnotation, "r2")
	waitData(t, f, key, "only the other writer's key", map[string]string{"theirs": "their-value"})
	got := waitCondition(t, f, key, metav1.ConditionFalse, secretsync.ReasonProviderDataNotFound)
	if msg := conditionMessage(got, ss1.ConditionReady); !strings.Contains(msg, secretsync.AnnotationDeletionPolicy) || !strings.Contains(msg, "NotFound") {
		t.Errorf("Ready message %q names neither the annotation nor NotFound", msg)
	}
	p.gone.Store(false)
	waitData(t, f, key, "the keys back with the data", map[string]string{"user": "admin2", "password": "s3cr3t", "theirs": "their-value"})
	f.waitReady(t, key)

	if err := f.c.Delete(t.Context(), &ss1.SecretSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the SecretSync gone", func(ctx context.Context) (bool, error) {
		err := f.c.Get(ctx, key, &ss1.SecretSync{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if s := f.secret(t, key); len(s.OwnerReferences) != 0 || len(s.Data) != 3 {
		t.Errorf("after the SecretSync's deletion the Secret has owner references %+v and keys %v, want none and 3", s.OwnerReferences, keys(s.Data))
	}
	policySync(t, f, ns, "creds", "Orphan", "")
	got = waitCondition(t, f, key, metav1.ConditionFalse, ss1.ReasonSecretConflict)
	if msg := conditionMessage(got, ss1.ConditionReady); !strings.Contains(msg, secretsync.AnnotationCreationPolicy+": Merge") {
		t.Errorf("conflict message %q does not offer Merge", msg)
	}
}

// checkMerge: Merge does not create a Secret (Ready=False
// MergeTargetMissing until another tool creates it); then it writes only
// its keys and labels, with no owner reference and the other writer's
// key, label and type kept; a key it no longer produces is removed, the
// other writer's is not; deletion policy Merge removes its keys and keeps
// the Secret when the data is gone.
func checkMerge(t *testing.T, f *fixture) {
	ns, p := policyNamespace(t, f, "merge")
	key := policySync(t, f, ns, "creds", "Merge", "Merge")
	got := waitCondition(t, f, key, metav1.ConditionFalse, secretsync.ReasonMergeTargetMissing)
	msg := conditionMessage(got, ss1.ConditionReady)
	for _, w := range []string{`"creds"`, secretsync.AnnotationCreationPolicy, "never creates"} {
		if !strings.Contains(msg, w) {
			t.Errorf("MergeTargetMissing message %q lacks %s", msg, w)
		}
	}
	calls := p.calls.Load()
	if err := f.c.Get(t.Context(), key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Merge created the Secret (or reading it failed: %v)", err)
	}
	if calls != 0 {
		t.Errorf("the provider was called %d times for a Merge with no Secret", calls)
	}

	writeOther(t, f, key)
	s := waitData(t, f, key, "the SecretSync's keys merged beside the other writer's",
		map[string]string{"user": "admin", "password": "s3cr3t", "theirs": "their-value"})
	f.waitReady(t, key)
	if len(s.OwnerReferences) != 0 {
		t.Errorf("Merge added owner references %+v", s.OwnerReferences)
	}
	if s.Labels["example.com/owner"] != otherWriter || s.Labels["app"] != "web" {
		t.Errorf("labels %v, want the other writer's and the SecretSync's", s.Labels)
	}
	if s.Type != corev1.SecretTypeOpaque {
		t.Errorf("type %s", s.Type)
	}

	// The SecretSync stops producing "password".
	ss := f.get(t, key)
	patch := client.MergeFrom(ss.DeepCopy())
	ss.Spec.SecretObject.Data = ss.Spec.SecretObject.Data[:1]
	if err := f.c.Patch(t.Context(), ss, patch); err != nil {
		t.Fatal(err)
	}
	waitData(t, f, key, "password removed, the other writer's key kept", map[string]string{"user": "admin", "theirs": "their-value"})

	p.gone.Store(true)
	annotate(t, f, key, rotation.RefreshAnnotation, "r1")
	s = waitData(t, f, key, "only the other writer's key", map[string]string{"theirs": "their-value"})
	if s.Labels["example.com/owner"] != otherWriter {
		t.Errorf("the other writer's label is gone: %v", s.Labels)
	}
	waitCondition(t, f, key, metav1.ConditionFalse, secretsync.ReasonProviderDataNotFound)
	poll.Until(t, "a ProviderDataNotFound event naming the removed key", func(ctx context.Context) (bool, error) {
		for _, ev := range f.events(t, ns, "creds") {
			if ev.Reason == secretsync.ReasonProviderDataNotFound && ev.Type == corev1.EventTypeNormal && strings.Contains(ev.Message, "removed keys user") {
				return true, nil
			}
		}
		return false, nil
	})
	assertNoValues(t, f.events(t, ns, "creds"), "admin", "s3cr3t", "their-value")
}

// checkDelete: Owner with deletion policy Delete deletes the Secret, other
// writer's key and all, when the data is gone, and writes it again when the
// data is back.
func checkDelete(t *testing.T, f *fixture) {
	ns, p := policyNamespace(t, f, "delete")
	key := policySync(t, f, ns, "creds", "", "Delete")
	f.waitReady(t, key)
	writeOther(t, f, key)
	waitData(t, f, key, "the other writer's key beside the SecretSync's",
		map[string]string{"user": "admin", "password": "s3cr3t", "theirs": "their-value"})
	p.gone.Store(true)
	annotate(t, f, key, rotation.RefreshAnnotation, "r1")
	poll.Until(t, "the Secret deleted", func(ctx context.Context) (bool, error) {
		err := f.c.Get(ctx, key, &corev1.Secret{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	got := waitCondition(t, f, key, metav1.ConditionFalse, secretsync.ReasonProviderDataNotFound)
	if msg := conditionMessage(got, ss1.ConditionReady); !strings.Contains(msg, "deleted") {
		t.Errorf("Ready message %q does not say the Secret was deleted", msg)
	}
	p.gone.Store(false)
	s := waitData(t, f, key, "the Secret written again", map[string]string{"user": "admin", "password": "s3cr3t"})
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != got.UID {
		t.Errorf("owner references %+v, want the SecretSync", s.OwnerReferences)
	}
	f.waitReady(t, key)
}

// checkDeleteDataFrom: with keymount.io/data-from, an answer whose
// directory holds no file (every secret a find matched is deleted) leaves
// no key: deletion policy Delete deletes the Secret, as External Secrets
// does when no data is left.
func checkDeleteDataFrom(t *testing.T, f *fixture) {
	ns, p := policyNamespace(t, f, "delete-found")
	p.set("app/a", "value-a", "app/b", "value-b")
	ss := secretSync(ns, "found", "app", "app")
	ss.Annotations = map[string]string{secretsync.AnnotationDataFrom: "app", secretsync.AnnotationDeletionPolicy: "Delete"}
	if err := f.c.Create(t.Context(), ss); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "found"}
	f.waitReady(t, key)
	writeOther(t, f, key)
	waitData(t, f, key, "the directory's keys and the other writer's", map[string]string{"a": "value-a", "b": "value-b", "theirs": "their-value"})
	p.set("app/b", "value-b")
	annotate(t, f, key, rotation.RefreshAnnotation, "r1")
	waitData(t, f, key, "a removed", map[string]string{"b": "value-b", "theirs": "their-value"})
	p.set()
	annotate(t, f, key, rotation.RefreshAnnotation, "r2")
	poll.Until(t, "the Secret deleted", func(ctx context.Context) (bool, error) {
		err := f.c.Get(ctx, key, &corev1.Secret{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	got := waitCondition(t, f, key, metav1.ConditionFalse, secretsync.ReasonProviderDataNotFound)
	if msg := conditionMessage(got, ss1.ConditionReady); !strings.Contains(msg, "hold no file") {
		t.Errorf("Ready message %q does not say the directories are empty", msg)
	}
}

// checkRetain: the default keeps the Secret as it was when the data is
// gone (Ready=False ProviderError).
func checkRetain(t *testing.T, f *fixture) {
	ns, p := policyNamespace(t, f, "retain")
	key := policySync(t, f, ns, "creds", "", "")
	f.waitReady(t, key)
	writeOther(t, f, key)
	before := waitData(t, f, key, "the other writer's key beside the SecretSync's",
		map[string]string{"user": "admin", "password": "s3cr3t", "theirs": "their-value"})
	p.gone.Store(true)
	annotate(t, f, key, rotation.RefreshAnnotation, "r1")
	waitCondition(t, f, key, metav1.ConditionFalse, ss1.ReasonProviderError)
	after := f.secret(t, key)
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the Secret was written (resourceVersion %s → %s) though the policy is Retain", before.ResourceVersion, after.ResourceVersion)
	}
}

// checkNone: None writes no Secret and calls no provider; Ready=True
// CreationPolicyNone says so. Set to Owner, the SecretSync syncs at once.
func checkNone(t *testing.T, f *fixture) {
	ns, p := policyNamespace(t, f, "none")
	key := policySync(t, f, ns, "creds", "None", "")
	got := waitCondition(t, f, key, metav1.ConditionTrue, secretsync.ReasonCreationPolicyNone)
	if msg := conditionMessage(got, ss1.ConditionReady); !strings.Contains(msg, secretsync.AnnotationCreationPolicy) {
		t.Errorf("Ready message %q does not name the annotation", msg)
	}
	if err := f.c.Get(t.Context(), key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("None wrote a Secret (or reading it failed: %v)", err)
	}
	if n := p.calls.Load(); n != 0 {
		t.Errorf("None called the provider %d times", n)
	}
	annotate(t, f, key, secretsync.AnnotationCreationPolicy, "Owner")
	waitData(t, f, key, "the Secret written under Owner", map[string]string{"user": "admin", "password": "s3cr3t"})
	f.waitReady(t, key)
}

// checkInvalidPolicy: an invalid value or combination is refused before
// any provider call or write: ControllerSyncError, a Warning event naming
// the annotation and the fix.
func checkInvalidPolicy(t *testing.T, f *fixture) {
	ns, p := policyNamespace(t, f, "invalid")
	for _, tc := range []struct{ name, creation, deletion, want string }{
		{"bad-value", "Owned", "", "Owner (the default), Orphan, Merge or None"},
		{"merge-delete", "Merge", "Delete", "Owner or Orphan"},
		{"none-merge", "None", "Merge", "Retain"},
	} {
		key := policySync(t, f, ns, tc.name, tc.creation, tc.deletion)
		got := waitCondition(t, f, key, metav1.ConditionFalse, ss1.ReasonControllerSyncError)
		if msg := conditionMessage(got, ss1.ConditionReady); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: message %q lacks %q", tc.name, msg, tc.want)
		}
		poll.Until(t, "a Warning event naming the annotation", func(ctx context.Context) (bool, error) {
			ev := findEvent(f.events(t, ns, tc.name), ss1.ReasonControllerSyncError)
			return ev != nil && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "keymount.io/"), nil
		})
		if err := f.c.Get(t.Context(), key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a Secret was written (or reading it failed: %v)", tc.name, err)
		}
	}
	if n := p.calls.Load(); n != 0 {
		t.Errorf("invalid policies called the provider %d times", n)
	}
}
