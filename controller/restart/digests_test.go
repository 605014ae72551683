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
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "uid-1",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "keymount-controller", Time: &at}}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte(value)},
	}
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

func newTestDigests() (*SecretDigests, *clocktesting.FakePassiveClock) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(5000, 0))
	d := NewSecretDigests(testKey)
	d.clk = clk
	return d, clk
}

// TestSecretDigests: a change is dated by the write that made it, the
// first content recorded is no change, a trimmed copy changes nothing,
// and forget drops the entry.
func TestSecretDigests(t *testing.T) {
	k := types.NamespacedName{Namespace: "ns", Name: "db"}
	d, clk := newTestDigests()
	if _, _, ok := d.observe(k); ok {
		t.Fatal("observe of a Secret never recorded: ok")
	}
	first := apiSecret("one", time.Unix(1000, 0))
	d.Record(first)
	v1, changed, ok := d.observe(k)
	if !ok || v1 != secretAnnotationValue(testKey, first.Type, first.Data) || !changed.IsZero() {
		t.Fatalf("first observation: %q %v %v, want the digest, no change", v1, changed, ok)
	}
	// The cache's own trimmed copy, handed to the transform again.
	d.Record(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}})
	if v, changed, _ := d.observe(k); v != v1 || !changed.IsZero() {
		t.Fatalf("after a trimmed copy: %q %v, want %q and no change", v, changed, v1)
	}
	second := apiSecret("two", time.Unix(2000, 0))
	d.Record(second)
	v2, changed, _ := d.observe(k)
	if v2 == v1 || v2 != secretAnnotationValue(testKey, second.Type, second.Data) || !changed.Equal(time.Unix(2000, 0)) {
		t.Fatalf("after a change: %q %v, want the new digest changed at 2000", v2, changed)
	}
	// A write that changes nothing keeps the date of the last change.
	d.Record(apiSecret("two", time.Unix(2500, 0)))
	if _, changed, _ := d.observe(k); !changed.Equal(time.Unix(2000, 0)) {
		t.Fatalf("a write that changed nothing: changed %v, want 2000", changed)
	}
	// A change whose write time is unknown is dated by the last known
	// write time; the date stays until the next change.
	third := apiSecret("three", time.Unix(3000, 0))
	third.ManagedFields[0].Time = nil
	d.Record(third)
	if _, changed, _ := d.observe(k); !changed.Equal(time.Unix(2500, 0)) {
		t.Fatalf("a write without a time: changed %v, want 2500 (the last known write)", changed)
	}
	if _, changed, _ := d.observe(k); !changed.Equal(time.Unix(2500, 0)) {
		t.Fatalf("no change since: changed %v", changed)
	}
	d.forget(k, "uid-1")
	if _, _, ok := d.observe(k); ok {
		t.Fatal("observe after forget: ok")
	}
	// Never a write time: a change is dated by the clock.
	for i, value := range []string{"a", "b"} {
		s := apiSecret(value, time.Unix(1000, 0))
		s.ManagedFields[0].Time = nil
		d.Record(s)
		_, changed, _ := d.observe(k)
		if want := (i == 1); changed.Equal(clk.Now()) != want {
			t.Fatalf("record %d without write times: changed %v, want the clock's now: %v", i, changed, want)
		}
	}
}

// TestSecretDigestsChangeBeforeObserved: the Secret is created and changed
// before the reconciler first observes it (its queue folded the two
// events into one request): the change is still one, dated by its write.
// The first content recorded is the baseline, not the first observed.
func TestSecretDigestsChangeBeforeObserved(t *testing.T) {
	k := types.NamespacedName{Namespace: "ns", Name: "db"}
	d, _ := newTestDigests()
	d.Record(apiSecret("one", time.Unix(1000, 0)))
	d.Record(apiSecret("two", time.Unix(2000, 0)))
	v, changed, ok := d.observe(k)
	if !ok || v != secretAnnotationValue(testKey, corev1.SecretTypeOpaque, map[string][]byte{"password": []byte("two")}) ||
		!changed.Equal(time.Unix(2000, 0)) {
		t.Fatalf("first observation after a change: %q %v %v, want the new digest changed at 2000", v, changed, ok)
	}
}

// TestSecretDigestsForgetOnlyItsSecret: the deletion of a Secret drops
// its own entry, never the entry of the Secret of the same name recorded
// since (a new one, whose creation the transform saw before the
// deletion's handler ran).
func TestSecretDigestsForgetOnlyItsSecret(t *testing.T) {
	k := types.NamespacedName{Namespace: "ns", Name: "db"}
	d, _ := newTestDigests()
	d.Record(apiSecret("one", time.Unix(1000, 0)))
	again := apiSecret("two", time.Unix(2000, 0))
	again.UID = "uid-2"
	d.Record(again)
	d.forget(k, "uid-1")
	if _, _, ok := d.observe(k); !ok {
		t.Fatal("the deletion of the first Secret dropped the entry of the second")
	}
	d.forget(k, "uid-2")
	if _, _, ok := d.observe(k); ok {
		t.Fatal("the deletion of the second Secret left its entry")
	}
}

// A workload never restarted for the Secret started with its current
// content only when no change was seen or it was created in a later
// second than the change: in the change's own second (the API server
// dates both to the second) either content may have started, and a
// Deployment applied with its SecretSync on a quick node is ready and sees
// its Secret change within one second.
func TestStartedWithCurrent(t *testing.T) {
	change := time.Unix(7000, 0)
	for _, tc := range []struct {
		name             string
		created, changed time.Time
		want             bool
	}{
		{"no change seen", change, time.Time{}, true},
		{"created a second before the change", change.Add(-time.Second), change, false},
		{"created in the change's second", change, change, false},
		{"created a second after the change", change.Add(time.Second), change, true},
	} {
		if got := startedWithCurrent(tc.created, tc.changed); got != tc.want {
			t.Errorf("%s: startedWithCurrent = %v, want %v", tc.name, got, tc.want)
		}
	}
}
