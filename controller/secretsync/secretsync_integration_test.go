//go:build integration

package secretsync_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsync "github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/poll"
)

// TestSecretSyncLifecycle: against a real API server and the local
// provider, a SecretSync gets its Secret (data, type, labels, annotations,
// one owner), its status (conditions with observedGeneration, syncHash,
// objects) and an event; keymount.io/refresh with an unchanged store writes
// no Secret, with a changed one updates it and says which keys changed;
// forceSynchronization forces a sync; a deleted or edited Secret is
// restored.
func TestSecretSyncLifecycle(t *testing.T) {
	f := startFixture(t, secretsync.Config{}) // no periodic refresh: only triggers
	ns := f.app(t, "lifecycle", "db-password", "db-user")
	f.put(t, "db-password", "pw-one-4711")
	f.put(t, "db-user", "admin")
	ss := secretSync(ns, "creds", "db-password", "password", "db-user", "user")
	ss.Spec.SecretObject.Labels = map[string]string{"team": "a"}
	ss.Spec.SecretObject.Annotations = map[string]string{"example.com/note": "synced"}
	if err := f.c.Create(t.Context(), ss); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "creds"}
	got := f.waitReady(t, key)

	t.Run("created", func(t *testing.T) { checkCreated(t, f, key, got) })

	t.Run("refresh with nothing changed writes no Secret", func(t *testing.T) {
		before := f.secret(t, key).ResourceVersion
		calls := f.calls.Load()
		annotate(t, f, key, rotation.RefreshAnnotation, "r1")
		poll.Until(t, "handledRefresh r1", func(ctx context.Context) (bool, error) {
			return f.get(t, key).Status.HandledRefresh == "r1", nil
		})
		if f.calls.Load() <= calls {
			t.Errorf("the refresh did not call the provider")
		}
		if after := f.secret(t, key).ResourceVersion; after != before {
			t.Errorf("the Secret was written (resourceVersion %s → %s) though nothing changed", before, after)
		}
	})

	t.Run("refresh with a changed store updates the Secret", func(t *testing.T) {
		f.put(t, "db-password", "pw-two-0815")
		annotate(t, f, key, rotation.RefreshAnnotation, "r2")
		poll.Until(t, "the new password", func(ctx context.Context) (bool, error) {
			return string(f.secret(t, key).Data["password"]) == "pw-two-0815", nil
		})
		got := f.waitReady(t, key)
		if !conditionIs(got, ss1.ConditionSecretUpdated, metav1.ConditionTrue, ss1.ReasonSecretUpToDate) {
			t.Errorf("conditions %+v, want SecretUpdated=True SecretUpToDate", got.Status.Conditions)
		}
		poll.Until(t, "the update event", func(ctx context.Context) (bool, error) {
			ev := findEvent(f.events(t, ns, "creds"), secretsync.ReasonSecretUpdated)
			return ev != nil && strings.Contains(ev.Message, "changed keys password") && !strings.Contains(ev.Message, "user"), nil
		})
		assertNoValues(t, f.events(t, ns, "creds"), "pw-one-4711", "pw-two-0815", "admin")
	})

	t.Run("forceSynchronization syncs at once", func(t *testing.T) {
		f.put(t, "db-password", "pw-three-1234")
		// A merge patch, as kubectl patch sends: an Update of the object
		// read a moment ago can conflict with the controller's status write.
		ss := f.get(t, key)
		patch := client.MergeFrom(ss.DeepCopy())
		ss.Spec.ForceSynchronization = "force-1"
		if err := f.c.Patch(t.Context(), ss, patch); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "the forced value", func(ctx context.Context) (bool, error) {
			return string(f.secret(t, key).Data["password"]) == "pw-three-1234", nil
		})
		got := f.waitReady(t, key)
		if got.Generation <= ss.Generation-1 || got.Status.ObservedGeneration != got.Generation {
			t.Errorf("observedGeneration %d, generation %d: want the new generation observed", got.Status.ObservedGeneration, got.Generation)
		}
	})

	t.Run("a key removed from the spec leaves the Secret", func(t *testing.T) {
		ss := f.get(t, key)
		patch := client.MergeFrom(ss.DeepCopy())
		ss.Spec.SecretObject.Data = ss.Spec.SecretObject.Data[:1] // password only
		if err := f.c.Patch(t.Context(), ss, patch); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "the Secret without user", func(ctx context.Context) (bool, error) {
			_, ok := f.secret(t, key).Data["user"]
			return !ok, nil
		})
		if got := f.secret(t, key); string(got.Data["password"]) != "pw-three-1234" {
			t.Errorf("password %q after removing user", got.Data["password"])
		}
		f.waitReady(t, key)
	})

	t.Run("a deleted Secret is restored", func(t *testing.T) {
		old := f.secret(t, key)
		if err := f.c.Delete(t.Context(), old); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "a new Secret", func(ctx context.Context) (bool, error) {
			var s corev1.Secret
			err := f.c.Get(ctx, key, &s)
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && s.UID != old.UID && string(s.Data["password"]) == "pw-three-1234", err
		})
	})

	t.Run("an edited Secret is restored", func(t *testing.T) {
		s := f.secret(t, key)
		s.Data["password"] = []byte("tampered")
		if err := f.c.Update(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "the store's value back", func(ctx context.Context) (bool, error) {
			return string(f.secret(t, key).Data["password"]) == "pw-three-1234", nil
		})
	})
}

// checkCreated checks the Secret, status and event of a first sync.
func checkCreated(t *testing.T, f *fixture, key types.NamespacedName, got *ss1.SecretSync) {
	s := f.secret(t, key)
	if string(s.Data["password"]) != "pw-one-4711" || string(s.Data["user"]) != "admin" || len(s.Data) != 2 {
		t.Errorf("Secret data keys %v, want password and user with the store's values", keys(s.Data))
	}
	if s.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret type %s, want Opaque", s.Type)
	}
	if v, ok := s.Labels[ss1.LabelSecretSync]; !ok || v != "" || s.Labels["team"] != "a" {
		t.Errorf("Secret labels %v, want %s=\"\" and team=a", s.Labels, ss1.LabelSecretSync)
	}
	if s.Annotations["example.com/note"] != "synced" {
		t.Errorf("Secret annotations %v lack example.com/note=synced", s.Annotations)
	}
	refs := s.OwnerReferences
	if len(refs) != 1 || refs[0].UID != got.UID || refs[0].Kind != "SecretSync" || refs[0].Name != "creds" ||
		refs[0].APIVersion != ss1.SchemeGroupVersion.String() || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("Secret owner references %+v, want exactly the SecretSync (uid %s) as controller", refs, got.UID)
	}
	checkCreatedStatus(t, f, key, got)
}

// checkCreatedStatus checks the status and event of a first sync.
func checkCreatedStatus(t *testing.T, f *fixture, key types.NamespacedName, got *ss1.SecretSync) {
	ns := key.Namespace
	if !conditionIs(got, ss1.ConditionSecretCreated, metav1.ConditionTrue, ss1.ReasonCreateSuccessful) {
		t.Errorf("conditions %+v, want SecretCreated=True CreateSuccessful", got.Status.Conditions)
	}
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("status.observedGeneration %d, want %d", got.Status.ObservedGeneration, got.Generation)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(got.Status.SyncHash) || got.Status.LastSuccessfulSyncTime == nil {
		t.Errorf("syncHash %q, lastSuccessfulSyncTime %v: want a keyed hash and a time", got.Status.SyncHash, got.Status.LastSuccessfulSyncTime)
	}
	ids := []string{}
	for _, o := range got.Status.Objects {
		if o.Version == "" {
			t.Errorf("object %s without a version", o.ID)
		}
		ids = append(ids, o.ID)
	}
	if !slices.Equal(ids, []string{"db-password", "db-user"}) {
		t.Errorf("status.objects %v, want db-password and db-user", ids)
	}
	// Events are written asynchronously: wait for it.
	poll.Until(t, "a Normal CreateSuccessful event naming the keys", func(ctx context.Context) (bool, error) {
		ev := findEvent(f.events(t, ns, "creds"), ss1.ReasonCreateSuccessful)
		return ev != nil && ev.Type == corev1.EventTypeNormal && strings.Contains(ev.Message, "password, user"), nil
	})
	assertNoValues(t, f.events(t, ns, "creds"), "pw-one-4711", "admin")
}

// TestSecretSyncRefusesForeignSecret: a Secret of the SecretSync's name the
// controller did not create is left alone: SecretCreated=False with reason
// SecretConflict naming it, Ready=False, a Warning event.
func TestSecretSyncRefusesForeignSecret(t *testing.T) {
	f := startFixture(t, secretsync.Config{})
	ns := f.app(t, "conflict", "db-password")
	f.put(t, "db-password", "store-value")
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		StringData: map[string]string{"password": "theirs"},
	}
	if err := f.c.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Create(t.Context(), secretSync(ns, "taken", "db-password", "password")); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "taken"}
	var got *ss1.SecretSync
	poll.Until(t, "SecretCreated=False SecretConflict", func(ctx context.Context) (bool, error) {
		got = f.get(t, key)
		return conditionIs(got, ss1.ConditionSecretCreated, metav1.ConditionFalse, ss1.ReasonSecretConflict), nil
	})
	if !conditionIs(got, ss1.ConditionReady, metav1.ConditionFalse, ss1.ReasonSecretConflict) {
		t.Errorf("conditions %+v, want Ready=False SecretConflict", got.Status.Conditions)
	}
	s := f.secret(t, key)
	if string(s.Data["password"]) != "theirs" || len(s.OwnerReferences) != 0 || len(s.Labels) != 0 {
		t.Errorf("the foreign Secret was written: data keys %v, owners %v, labels %v", keys(s.Data), s.OwnerReferences, s.Labels)
	}
	poll.Until(t, "a Warning SecretConflict event naming the Secret", func(ctx context.Context) (bool, error) {
		ev := findEvent(f.events(t, ns, "taken"), ss1.ReasonSecretConflict)
		return ev != nil && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, `"taken"`), nil
	})
}

// TestSecretSyncFailures: a missing class and a sourcePath the provider
// does not return set v0.0.5's reasons, create no Secret, and emit
// Warning events.
func TestSecretSyncFailures(t *testing.T) {
	f := startFixture(t, secretsync.Config{})
	ns := f.app(t, "failures", "db-password")
	f.put(t, "db-password", "x")
	noClass := secretSync(ns, "no-class", "db-password", "password")
	noClass.Spec.SecretProviderClassName = "missing"
	missing := secretSync(ns, "no-object", "db-other", "other")
	for _, ss := range []*ss1.SecretSync{noClass, missing} {
		if err := f.c.Create(t.Context(), ss); err != nil {
			t.Fatal(err)
		}
	}
	for name, reason := range map[string]string{
		"no-class":  ss1.ReasonSecretProviderClassMisconfigured,
		"no-object": ss1.ReasonRemoteSecretStoreFetchFailed,
	} {
		key := types.NamespacedName{Namespace: ns, Name: name}
		poll.Until(t, name+" "+reason, func(ctx context.Context) (bool, error) {
			got := f.get(t, key)
			return conditionIs(got, ss1.ConditionSecretCreated, metav1.ConditionFalse, reason) &&
				conditionIs(got, ss1.ConditionReady, metav1.ConditionFalse, reason), nil
		})
		var s corev1.Secret
		if err := f.c.Get(t.Context(), key, &s); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a Secret exists (err %v)", name, err)
		}
		poll.Until(t, name+": a Warning "+reason+" event", func(ctx context.Context) (bool, error) {
			ev := findEvent(f.events(t, ns, name), reason)
			return ev != nil && ev.Type == corev1.EventTypeWarning, nil
		})
	}
}

// TestSecretSyncPeriodicRefresh: with keymount.io/rotation-interval the
// controller refreshes by itself; rounds that find nothing changed write
// neither the Secret nor the SecretSync; a change reaches the Secret.
func TestSecretSyncPeriodicRefresh(t *testing.T) {
	f := startFixture(t, secretsync.Config{})
	ns := f.app(t, "periodic", "token")
	f.put(t, "token", "t1")
	ss := secretSync(ns, "tick", "token", "token")
	ss.Annotations = map[string]string{rotation.IntervalAnnotation: "1s"}
	if err := f.c.Create(t.Context(), ss); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "tick"}
	f.waitReady(t, key)
	// The first refresh after the create says so once: SecretUpdated
	// leaves NoUpdatesAttemptedYet.
	var ready *ss1.SecretSync
	poll.Until(t, "SecretUpdated=True", func(ctx context.Context) (bool, error) {
		ready = f.get(t, key)
		return conditionIs(ready, ss1.ConditionSecretUpdated, metav1.ConditionTrue, ss1.ReasonSecretUpToDate), nil
	})
	secretRV := f.secret(t, key).ResourceVersion
	start := f.calls.Load()
	poll.Until(t, "three more provider calls", func(ctx context.Context) (bool, error) {
		return f.calls.Load() >= start+3, nil
	})
	if rv := f.get(t, key).ResourceVersion; rv != ready.ResourceVersion {
		t.Errorf("the SecretSync was written (resourceVersion %s → %s) by refreshes that changed nothing", ready.ResourceVersion, rv)
	}
	if rv := f.secret(t, key).ResourceVersion; rv != secretRV {
		t.Errorf("the Secret was written (resourceVersion %s → %s) by refreshes that changed nothing", secretRV, rv)
	}
	f.put(t, "token", "t2")
	poll.Until(t, "the new token", func(ctx context.Context) (bool, error) {
		return string(f.secret(t, key).Data["token"]) == "t2", nil
	})
}

func annotate(t *testing.T, f *fixture, key types.NamespacedName, k, v string) {
	t.Helper()
	ss := f.get(t, key)
	patch := client.MergeFrom(ss.DeepCopy())
	if ss.Annotations == nil {
		ss.Annotations = map[string]string{}
	}
	ss.Annotations[k] = v
	if err := f.c.Patch(t.Context(), ss, patch); err != nil {
		t.Fatal(err)
	}
}

func findEvent(events []corev1.Event, reason string) *corev1.Event {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Reason == reason {
			return &events[i]
		}
	}
	return nil
}

// assertNoValues fails when an event carries one of the secret values.
func assertNoValues(t *testing.T, events []corev1.Event, values ...string) {
	t.Helper()
	for _, e := range events {
		for _, v := range values {
			if strings.Contains(e.Message, v) {
				t.Errorf("event %s carries a secret value", e.Reason)
			}
		}
	}
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
