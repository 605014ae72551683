//go:build integration

package fanout_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/tests/k8senv"
)

// writerEnv is a real API server, a client and a Writer over it.
type writerEnv struct {
	c   client.Client
	cs  kubernetes.Interface
	rec *events.FakeRecorder
	w   *fanout.Writer
	src *corev1.Secret // the owner of the copies
	reg *prometheus.Registry
}

// count is the value of the fan-out counter name of writer "test" with
// the other labels given, 0 when it has no such series.
func (e *writerEnv) count(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["writer"] != "test" {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func startWriter(t *testing.T) *writerEnv {
	t.Helper()
	// Own control plane: the package's other test lists every namespace's Secrets and asserts on exactly which it holds.
	env := k8senv.Start(t, k8senv.Options{})
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &writerEnv{c: c, cs: kubernetes.NewForConfigOrDie(env.Config), rec: events.NewFakeRecorder(100)}
	e.reg = prometheus.NewRegistry()
	m, err := fanout.NewMetrics(e.reg)
	if err != nil {
		t.Fatal(err)
	}
	e.w = &fanout.Writer{Name: "test", Client: c, Live: c, Events: e.rec, Metrics: m}
	e.src = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "src"}, Data: map[string][]byte{"k": []byte("v")}}
	if err := c.Create(t.Context(), e.src); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *writerEnv) namespace(t *testing.T, name string) {
	t.Helper()
	if err := e.c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func (e *writerEnv) get(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s, err := e.cs.CoreV1().Secrets(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func desiredSecret(ns string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copy", Annotations: map[string]string{"x/at": "1"}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func stringData(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

func TestWriter(t *testing.T) {
	e := startWriter(t)
	t.Run("lifecycle", func(t *testing.T) { testWriterLifecycle(t, e) })
	t.Run("unowned", func(t *testing.T) { testWriterUnowned(t, e) })
	t.Run("adopt", func(t *testing.T) { testWriterAdopt(t, e) })
	t.Run("configmap", func(t *testing.T) { testWriterConfigMap(t, e) })
}

// testWriterLifecycle: created with the mark, unchanged costs nothing,
// a source change and a hand edit are written back exactly, a delete.
func testWriterLifecycle(t *testing.T, e *writerEnv) {
	ctx := t.Context()
	e.namespace(t, "life")
	res, err := e.w.Apply(ctx, e.src, desiredSecret("life", map[string]string{"a": "1", "b": "2"}), nil)
	if err != nil || res != fanout.Created {
		t.Fatalf("Apply = %v, %v; want Created", res, err)
	}
	got := e.get(t, "life", "copy")
	if got.Labels[fanout.LabelCopy] != "test" || got.Annotations[fanout.AnnotationOwner] != "default/src" {
		t.Fatalf("copy's mark: labels %v annotations %v", got.Labels, got.Annotations)
	}
	// Unchanged: no write (the resource version stays); a volatile
	// annotation alone is no change.
	e.w.Volatile = []string{"x/at"}
	d := desiredSecret("life", map[string]string{"a": "1", "b": "2"})
	d.Annotations["x/at"] = "2"
	if res, err := e.w.Apply(ctx, e.src, d, got); err != nil || res != fanout.Unchanged {
		t.Fatalf("Apply of the same = %v, %v; want Unchanged", res, err)
	}
	if rv := e.get(t, "life", "copy").ResourceVersion; rv != got.ResourceVersion {
		t.Fatalf("an unchanged Apply wrote: resource version %s -> %s", got.ResourceVersion, rv)
	}
	// The source changes: a key changes, one goes.
	if res, err := e.w.Apply(ctx, e.src, desiredSecret("life", map[string]string{"a": "3"}), got); err != nil || res != fanout.Updated {
		t.Fatalf("Apply of a change = %v, %v; want Updated", res, err)
	}
	if diff := cmp.Diff(map[string]string{"a": "3"}, stringData(e.get(t, "life", "copy"))); diff != "" {
		t.Fatalf("copy after a change (-want +got):\n%s", diff)
	}
	// A hand edit (another manager, an update) adds and changes keys.
	edited := e.get(t, "life", "copy")
	edited.Data["a"], edited.Data["hand"] = []byte("evil"), []byte("added")
	if _, err := e.cs.CoreV1().Secrets("life").Update(ctx, edited, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	edited = e.get(t, "life", "copy")
	if res, err := e.w.Apply(ctx, e.src, desiredSecret("life", map[string]string{"a": "3"}), edited); err != nil || res != fanout.Updated {
		t.Fatalf("Apply over a hand edit = %v, %v; want Updated", res, err)
	}
	if diff := cmp.Diff(map[string]string{"a": "3"}, stringData(e.get(t, "life", "copy"))); diff != "" {
		t.Fatalf("copy after restoring a hand edit (-want +got):\n%s", diff)
	}
	if err := e.w.Delete(ctx, e.get(t, "life", "copy")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().Secrets("life").Get(ctx, "copy", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("copy after Delete: %v, want NotFound", err)
	}
	// The metrics counted one create, two updates (the source change and
	// the hand edit undone), no write of the unchanged copy, one delete.
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{fanout.MetricCopiesWritten, map[string]string{"kind": "Secret", "result": "created"}, 1},
		{fanout.MetricCopiesWritten, map[string]string{"kind": "Secret", "result": "updated"}, 2},
		{fanout.MetricCopiesDeleted, map[string]string{"kind": "Secret"}, 1},
	} {
		if got := e.count(t, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// testWriterUnowned: a same-named Secret keymount did not write is
// reported and left alone, never overwritten nor deleted.
func testWriterUnowned(t *testing.T, e *writerEnv) {
	ctx := t.Context()
	e.namespace(t, "theirs")
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "theirs", Name: "copy"}, Data: map[string][]byte{"mine": []byte("keep")}}
	if err := e.c.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	_, err := e.w.Apply(ctx, e.src, desiredSecret("theirs", map[string]string{"a": "1"}), nil)
	if !errors.Is(err, fanout.ErrNotOurs) {
		t.Fatalf("Apply over an unowned Secret: %v, want ErrNotOurs", err)
	}
	select {
	case ev := <-e.rec.Events:
		if !strings.Contains(ev, fanout.ReasonCopyConflict) || !strings.Contains(ev, "theirs/copy") {
			t.Errorf("event %q, want %s naming theirs/copy", ev, fanout.ReasonCopyConflict)
		}
	default:
		t.Error("no event for the conflict")
	}
	if err := e.w.Delete(ctx, e.get(t, "theirs", "copy")); !errors.Is(err, fanout.ErrNotOurs) {
		t.Fatalf("Delete of an unowned Secret: %v, want ErrNotOurs", err)
	}
	got := e.get(t, "theirs", "copy")
	if diff := cmp.Diff(map[string]string{"mine": "keep"}, stringData(got)); diff != "" || got.Labels[fanout.LabelCopy] != "" {
		t.Fatalf("the unowned Secret changed (labels %v, -want +got):\n%s", got.Labels, diff)
	}
	if got := e.count(t, fanout.MetricConflicts, map[string]string{"kind": "Secret"}); got != 1 {
		t.Errorf("%s = %v after one conflict, want 1", fanout.MetricConflicts, got)
	}
	// Another writer's copy is not this writer's either.
	other := &fanout.Writer{Name: "other", Client: e.c, Live: e.c}
	if _, err := other.Apply(ctx, e.src, desiredSecret("theirs", map[string]string{"a": "1"}), nil); !errors.Is(err, fanout.ErrNotOurs) {
		t.Fatalf("Apply by another writer over an unowned Secret: %v, want ErrNotOurs", err)
	}
}

// testWriterAdopt: an object Adopt accepts becomes the writer's copy,
// exactly the desired content.
func testWriterAdopt(t *testing.T, e *writerEnv) {
	ctx := t.Context()
	e.namespace(t, "adopt")
	old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "adopt", Name: "copy", Annotations: map[string]string{"legacy": "yes"}},
		Data: map[string][]byte{"a": []byte("old"), "gone": []byte("x")}}
	if err := e.c.Create(ctx, old, client.FieldOwner("reflector")); err != nil {
		t.Fatal(err)
	}
	w := *e.w
	w.Adopt = func(o client.Object) bool { return o.GetAnnotations()["legacy"] == "yes" }
	res, err := w.Apply(ctx, e.src, desiredSecret("adopt", map[string]string{"a": "new"}), nil)
	if err != nil || res != fanout.Adopted {
		t.Fatalf("Apply = %v, %v; want Adopted", res, err)
	}
	got := e.get(t, "adopt", "copy")
	if diff := cmp.Diff(map[string]string{"a": "new"}, stringData(got)); diff != "" || got.Labels[fanout.LabelCopy] != "test" {
		t.Fatalf("adopted copy: labels %v (-want +got):\n%s", got.Labels, diff)
	}
}

// testWriterConfigMap: ConfigMaps, data and binaryData, a key dropped.
func testWriterConfigMap(t *testing.T, e *writerEnv) {
	ctx := t.Context()
	e.namespace(t, "cm")
	d := func(data map[string]string, bin map[string][]byte) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cm", Name: "copy"}, Data: data, BinaryData: bin}
	}
	if res, err := e.w.Apply(ctx, e.src, d(map[string]string{"a": "1"}, map[string][]byte{"b": {0, 1}}), nil); err != nil || res != fanout.Created {
		t.Fatalf("Apply = %v, %v; want Created", res, err)
	}
	var got corev1.ConfigMap
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "cm", Name: "copy"}, &got); err != nil {
		t.Fatal(err)
	}
	if res, err := e.w.Apply(ctx, e.src, d(map[string]string{"a": "2"}, nil), &got); err != nil || res != fanout.Updated {
		t.Fatalf("Apply = %v, %v; want Updated", res, err)
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "cm", Name: "copy"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Data["a"] != "2" || len(got.BinaryData) != 0 {
		t.Fatalf("ConfigMap copy: data %v binaryData %v, want a=2 and no binaryData", got.Data, got.BinaryData)
	}
}
