package synchash

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const ns = "keymount-system"

func keySource(t *testing.T, cs *fake.Clientset) *KeySource {
	t.Helper()
	s, err := NewKeySource(cs.CoreV1(), ns)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func keySecret(key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: KeySecretName},
		Data:       map[string][]byte{KeySecretDataKey: key},
	}
}

func countVerbs(cs *fake.Clientset) map[string]int {
	n := map[string]int{}
	for _, a := range cs.Actions() {
		n[a.GetVerb()]++
	}
	return n
}

// TestKeyCreatedOnFirstUse: no Secret: one is created with 32 random
// bytes, immutable, and the Hasher uses them; later calls use the cache.
func TestKeyCreatedOnFirstUse(t *testing.T) {
	cs := fake.NewClientset()
	s := keySource(t, cs)
	h, err := s.Hasher(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().Secrets(ns).Get(t.Context(), KeySecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the key Secret was not created: %v", err)
	}
	key := got.Data[KeySecretDataKey]
	if len(key) != KeySize || bytes.Equal(key, make([]byte, KeySize)) {
		t.Fatalf("the key has %d bytes (all zero: %v), want %d random bytes", len(key), bytes.Equal(key, make([]byte, KeySize)), KeySize)
	}
	if got.Immutable == nil || !*got.Immutable || got.Type != corev1.SecretTypeOpaque {
		t.Errorf("key Secret immutable %v, type %q; want immutable Opaque", got.Immutable, got.Type)
	}
	want, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	if h.Sum(baseContent()) != want.Sum(baseContent()) {
		t.Error("the Hasher does not use the Secret's key")
	}
	for range 3 {
		if again, err := s.Hasher(t.Context()); err != nil || again != h {
			t.Fatalf("second Hasher: %v, same %v", err, again == h)
		}
	}
	if n := countVerbs(cs); n["get"] != 2 || n["create"] != 1 {
		t.Errorf("API calls %v, want one get (NotFound), one create, one get by the test", n)
	}

	// Two keys made independently differ.
	other := keySource(t, fake.NewClientset())
	h2, err := other.Hasher(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h2.Sum(baseContent()) == h.Sum(baseContent()) {
		t.Error("two generated keys hash alike: the key is not random")
	}
}

func TestExistingKeyIsUsed(t *testing.T) {
	key := testKey(7)
	cs := fake.NewClientset(keySecret(key))
	h, err := keySource(t, cs).Hasher(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h.Sum(baseContent()) != hasher(t, 7).Sum(baseContent()) {
		t.Error("the existing key is not used")
	}
	if n := countVerbs(cs); n["create"] != 0 {
		t.Errorf("API calls %v, want no create", n)
	}
}

// TestLostCreateRace: the Secret appears between our Get and our Create:
// the other replica's key is read and used.
func TestLostCreateRace(t *testing.T) {
	theirs := testKey(5)
	cs := fake.NewClientset()
	cs.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		// The other replica's Secret lands first.
		if err := cs.Tracker().Add(keySecret(theirs)); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, KeySecretName)
	})
	h, err := keySource(t, cs).Hasher(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h.Sum(baseContent()) != hasher(t, 5).Sum(baseContent()) {
		t.Error("after losing the race the other replica's key is not used")
	}
}

func TestBadKeySecret(t *testing.T) {
	for name, data := range map[string][]byte{"short": []byte("sixteen-byte-key"), "missing": nil} {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset(keySecret(data))
			_, err := keySource(t, cs).Hasher(t.Context())
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), KeySecretName) || strings.Contains(err.Error(), "sixteen") {
				t.Errorf("error %q does not name the Secret or shows its contents", err)
			}
		})
	}
}

// TestFailureIsRetried: an API error is returned and not cached.
func TestFailureIsRetried(t *testing.T) {
	cs := fake.NewClientset()
	fail := true
	cs.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, KeySecretName, errors.New("rbac"))
		}
		return false, nil, nil
	})
	s := keySource(t, cs)
	if _, err := s.Hasher(t.Context()); !apierrors.IsForbidden(err) {
		t.Fatalf("Hasher: %v, want Forbidden", err)
	}
	fail = false
	if _, err := s.Hasher(t.Context()); err != nil {
		t.Errorf("Hasher after the API recovers: %v", err)
	}
}

func TestNewKeySourceArgs(t *testing.T) {
	if _, err := NewKeySource(nil, ns); err == nil {
		t.Error("nil client: no error")
	}
	if _, err := NewKeySource(fake.NewClientset().CoreV1(), ""); err == nil {
		t.Error("empty namespace: no error")
	}
}
