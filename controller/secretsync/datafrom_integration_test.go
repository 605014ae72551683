//go:build integration

package secretsync_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
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

// dirProvider answers every Mount with the files set last, as a provider
// answers a class whose objects expand into a directory (the AWS
// provider's extract and find) while the store changes.
type dirProvider struct {
	mu    sync.Mutex
	files map[string]string
}

func (p *dirProvider) set(kv ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.files = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		p.files[kv[i]] = kv[i+1]
	}
}

func (p *dirProvider) Mount(context.Context, *server.MountRequest) (*server.MountResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	res := &server.MountResult{}
	for _, name := range slices.Sorted(maps.Keys(p.files)) {
		res.Files = append(res.Files, server.File{Path: name, Mode: 0o644, Contents: []byte(p.files[name])})
		res.Versions = append(res.Versions, server.ObjectVersion{ID: name, Version: "v-" + p.files[name]})
	}
	return res, nil
}

// stringData is a Secret's data as strings.
func stringData(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

// TestSecretSyncDataFrom: against a real API server, a SecretSync with
// keymount.io/data-from gets a key per file under the directory (the
// marker entry writes none) beside its explicit key; another field
// manager's key and label in the Secret are left alone, and cause no
// write; when the provider's answer goes from app/a, app/b to app/b,
// app/c a refresh leaves exactly b and c of the directory; a refresh that
// changes nothing writes nothing; a directory without its marker entry is
// refused before any write (ControllerSyncError, a Warning event naming the
// annotation and the fix).
func TestSecretSyncDataFrom(t *testing.T) {
	f := startFixture(t, secretsync.Config{}) // no periodic refresh: only triggers
	p := &dirProvider{}
	p.set("app/a", "value-a1", "app/b", "value-b1", "db", "admin")
	ctrltest.ServeProvider(t, f.socks, "dirs", p)
	ns := f.namespace(t, "datafrom")
	if err := f.c.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	class := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store"},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: "dirs"},
	}
	if err := f.c.Create(t.Context(), class); err != nil {
		t.Fatal(err)
	}
	ss := secretSync(ns, "creds", "app", "app", "db", "user")
	ss.Annotations = map[string]string{secretsync.AnnotationDataFrom: "app"}
	if err := f.c.Create(t.Context(), ss); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "creds"}
	f.waitReady(t, key)
	want := map[string]string{"a": "value-a1", "b": "value-b1", "user": "admin"}
	if diff := cmp.Diff(want, stringData(f.secret(t, key))); diff != "" {
		t.Fatalf("first Secret data (-want +got):\n%s", diff)
	}

	// Another writer adds a key and a label to the Secret by server-side
	// apply.
	other := corev1ac.Secret("creds", ns).
		WithData(map[string][]byte{"other": []byte("theirs")}).
		WithLabels(map[string]string{"example.com/owner": "other-writer"})
	if err := f.c.Apply(t.Context(), other, client.FieldOwner("other-writer")); err != nil {
		t.Fatal(err)
	}

	p.set("app/b", "value-b2", "app/c", "value-c2", "db", "admin")
	annotate(t, f, key, rotation.RefreshAnnotation, "r1")
	want = map[string]string{"b": "value-b2", "c": "value-c2", "user": "admin", "other": "theirs"}
	var last map[string]string
	poll.Until(t, "the Secret with exactly b, c, user and the other writer's key", func(ctx context.Context) (bool, error) {
		last = stringData(f.secret(t, key))
		return maps.Equal(last, want), nil
	})
	s := f.secret(t, key)
	if s.Labels["example.com/owner"] != "other-writer" {
		t.Errorf("the other writer's label is gone: %v", s.Labels)
	}
	poll.Until(t, "handledRefresh r1, Ready", func(ctx context.Context) (bool, error) {
		got := f.get(t, key)
		return got.Status.HandledRefresh == "r1" && conditionIs(got, ss1.ConditionReady, metav1.ConditionTrue, ss1.ReasonSecretUpToDate), nil
	})
	poll.Until(t, "the update event naming the keys", func(ctx context.Context) (bool, error) {
		ev := findEvent(f.events(t, ns, "creds"), secretsync.ReasonSecretUpdated)
		return ev != nil && strings.Contains(ev.Message, "changed keys b") && strings.Contains(ev.Message, "added keys c") &&
			strings.Contains(ev.Message, "removed keys a"), nil
	})

	t.Run("a refresh that changes nothing writes nothing", func(t *testing.T) { checkDataFromQuiet(t, f, p, key) })
	t.Run("a directory without its marker entry", func(t *testing.T) { checkDataFromNoMarker(t, f, ns) })
}

// checkDataFromQuiet: a refresh with the same answer writes nothing, and no
// event ever names the other writer's key.
func checkDataFromQuiet(t *testing.T, f *fixture, p *dirProvider, key types.NamespacedName) {
	ns := key.Namespace
	before := f.secret(t, key).ResourceVersion
	annotate(t, f, key, rotation.RefreshAnnotation, "r2")
	poll.Until(t, "handledRefresh r2", func(ctx context.Context) (bool, error) {
		return f.get(t, key).Status.HandledRefresh == "r2", nil
	})
	if after := f.secret(t, key).ResourceVersion; after != before {
		t.Errorf("the Secret was written (resourceVersion %s → %s) though nothing changed", before, after)
	}
	// A later change's event comes after any the rounds before emitted.
	p.set("app/b", "value-b2", "app/c", "value-c2", "app/d", "value-d3", "db", "admin")
	annotate(t, f, key, rotation.RefreshAnnotation, "r3")
	poll.Until(t, "the event adding d", func(ctx context.Context) (bool, error) {
		ev := findEvent(f.events(t, ns, "creds"), secretsync.ReasonSecretUpdated)
		return ev != nil && strings.Contains(ev.Message, "added keys d"), nil
	})
	var updates []string
	for _, e := range f.events(t, ns, "creds") {
		if e.Reason == secretsync.ReasonSecretUpdated {
			updates = append(updates, e.Message)
		}
		if strings.Contains(e.Message, "other") {
			t.Errorf("event %s names the other writer's key: %q", e.Reason, e.Message)
		}
	}
	if len(updates) != 2 {
		t.Errorf("SecretUpdated events %q, want two: r1's and r3's", updates)
	}
	if got := stringData(f.secret(t, key)); got["other"] != "theirs" || got["d"] != "value-d3" {
		t.Errorf("Secret keys %v, want d added and the other writer's key kept", slices.Sorted(maps.Keys(got)))
	}
	assertNoValues(t, f.events(t, ns, "creds"), "value-", "admin", "theirs")
}

// checkDataFromNoMarker: a listed directory without its marker entry is
// refused before any write, naming the annotation and the fix.
func checkDataFromNoMarker(t *testing.T, f *fixture, ns string) {
	bad := secretSync(ns, "no-marker", "db", "user")
	bad.Annotations = map[string]string{secretsync.AnnotationDataFrom: "app"}
	if err := f.c.Create(t.Context(), bad); err != nil {
		t.Fatal(err)
	}
	k := types.NamespacedName{Namespace: ns, Name: "no-marker"}
	var got *ss1.SecretSync
	poll.Until(t, "Ready=False ControllerSyncError", func(ctx context.Context) (bool, error) {
		got = f.get(t, k)
		return conditionIs(got, ss1.ConditionSecretCreated, metav1.ConditionFalse, ss1.ReasonControllerSyncError) &&
			conditionIs(got, ss1.ConditionReady, metav1.ConditionFalse, ss1.ReasonControllerSyncError), nil
	})
	msg := conditionMessage(got, ss1.ConditionReady)
	for _, w := range []string{secretsync.AnnotationDataFrom, `"app"`, "{sourcePath: app, targetKey: app}"} {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q lacks %s", msg, w)
		}
	}
	poll.Until(t, "a Warning event naming the annotation", func(ctx context.Context) (bool, error) {
		ev := findEvent(f.events(t, ns, "no-marker"), ss1.ReasonControllerSyncError)
		return ev != nil && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, secretsync.AnnotationDataFrom), nil
	})
	var s corev1.Secret
	if err := f.c.Get(t.Context(), k, &s); err == nil {
		t.Errorf("a Secret no-marker was written with keys %v", keys(s.Data))
	}
}
