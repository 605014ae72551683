package restart

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// apiSecret is a synced Secret as the API server sends it: with
// managedFields, last written at written.
func apiSecret(value string, written time.Time) *corev1.Secret {
	at := metav1.NewTime(written)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "keymount-controller", Time: &at}}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte(value)},
	}
}

// TestSecretDigests: a change is dated by the write that made it, the
// first observation is no change, a trimmed copy changes nothing,
// and forget drops the entry.
func TestSecretDigests(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	k := types.NamespacedName{Namespace: "ns", Name: "db"}
	clk := clocktesting.NewFakePassiveClock(time.Unix(5000, 0))
	d := NewSecretDigests(key)
	if _, _, ok := d.observe(k, clk); ok {
		t.Fatal("observe of a Secret never recorded: ok")
	}
	first := apiSecret("one", time.Unix(1000, 0))
	d.Record(first)
	v1, changed, ok := d.observe(k, clk)
	if !ok || v1 != secretAnnotationValue(key, first.Type, first.Data) || !changed.IsZero() {
		t.Fatalf("first observation: %q %v %v, want the digest, no change", v1, changed, ok)
	}
	// The cache's own trimmed copy, handed to the transform again.
	d.Record(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}})
	if v, changed, _ := d.observe(k, clk); v != v1 || !changed.IsZero() {
		t.Fatalf("after a trimmed copy: %q %v, want %q and no change", v, changed, v1)
	}
	second := apiSecret("two", time.Unix(2000, 0))
	d.Record(second)
	v2, changed, _ := d.observe(k, clk)
	if v2 == v1 || v2 != secretAnnotationValue(key, second.Type, second.Data) || !changed.Equal(time.Unix(2000, 0)) {
		t.Fatalf("after a change: %q %v, want the new digest changed at 2000", v2, changed)
	}
	// A change whose write time is unknown is dated by the clock; the
	// date stays until the next change.
	third := apiSecret("three", time.Unix(3000, 0))
	third.ManagedFields[0].Time = nil
	d.Record(third)
	if _, changed, _ := d.observe(k, clk); !changed.Equal(time.Unix(2000, 0)) {
		// The entry keeps the last known write time (2000) when the new
		// write carries none.
		t.Fatalf("a write without a time: changed %v, want 2000 (the last known write)", changed)
	}
	if _, changed, _ := d.observe(k, clk); !changed.Equal(time.Unix(2000, 0)) {
		t.Fatalf("no change since: changed %v", changed)
	}
	d.forget(k)
	if _, _, ok := d.observe(k, clk); ok {
		t.Fatal("observe after forget: ok")
	}
	// Never a write time: a change is dated by the clock.
	for i, value := range []string{"a", "b"} {
		s := apiSecret(value, time.Unix(1000, 0))
		s.ManagedFields[0].Time = nil
		d.Record(s)
		_, changed, _ := d.observe(k, clk)
		if want := (i == 1); changed.Equal(clk.Now()) != want {
			t.Fatalf("observation %d without write times: changed %v, want the clock's now: %v", i, changed, want)
		}
	}
}
