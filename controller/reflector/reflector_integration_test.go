//go:build integration

package reflector_test

import (
	"fmt"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/reflector"
	"github.com/keymount/keymount/tests/ctrltest"
)

func auto(allowed, autoNS string) map[string]string {
	a := map[string]string{reflector.AnnotationAllowed: "true", reflector.AnnotationAutoEnabled: "true"}
	if allowed != "" {
		a[reflector.AnnotationAllowedNamespaces] = allowed
	}
	if autoNS != "" {
		a[reflector.AnnotationAutoNamespaces] = autoNS
	}
	return a
}

func TestReflector(t *testing.T) {
	f := startFixture(t)
	t.Run("auto", func(t *testing.T) { testAuto(t, f) })
	t.Run("selector", func(t *testing.T) { testSelector(t, f) })
	t.Run("change-delete-conflict", func(t *testing.T) { testChangeDeleteConflict(t, f) })
	t.Run("hand-edit", func(t *testing.T) { testHandEdit(t, f) })
	t.Run("turned-off", func(t *testing.T) { testTurnedOff(t, f) })
	t.Run("manual", func(t *testing.T) { testManual(t, f) })
	t.Run("switch-from-reflector", func(t *testing.T) { testSwitch(t, f) })
	t.Run("configmap", func(t *testing.T) { testConfigMap(t, f) })
}

// testAuto: copies into the namespaces the lists match, with reflector's
// bookkeeping; a namespace created later gets its copy.
func testAuto(t *testing.T, f *fixture) {
	f.namespace(t, "a-src", nil)
	for _, ns := range []string{"a-team-1", "a-team-22", "a-other"} {
		f.namespace(t, ns, nil)
	}
	src := f.source(t, "a-src", "tls", map[string]string{"tls.crt": "cert"}, auto("a-team-[0-9]+,a-other,a-team-new", "a-team-.*"))
	for _, ns := range []string{"a-team-1", "a-team-22"} {
		f.waitFor(t, ns, "tls", ctrltest.HasData(map[string]string{"tls.crt": "cert"}))
	}
	got, err := f.cs.CoreV1().Secrets("a-team-1").Get(t.Context(), "tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := got.Annotations
	if a[reflector.AnnotationReflects] != "a-src/tls" || a[reflector.AnnotationAutoReflects] != "True" ||
		a[reflector.AnnotationReflectedVersion] != src.ResourceVersion || got.Labels[fanout.LabelCopy] != reflector.WriterName {
		t.Fatalf("copy's bookkeeping: labels %v annotations %v; want reflector's, version %s", got.Labels, a, src.ResourceVersion)
	}
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}\+00:00$`).MatchString(a[reflector.AnnotationReflectedAt]) {
		t.Errorf("reflected-at %q is not in reflector's format", a[reflector.AnnotationReflectedAt])
	}
	// a-other is allowed but not an auto namespace; the source's own
	// namespace gets no copy of itself written over.
	f.waitFor(t, "a-other", "tls", absent)
	// A namespace created later.
	f.namespace(t, "a-team-new", nil)
	f.waitFor(t, "a-team-new", "tls", ctrltest.HasData(map[string]string{"tls.crt": "cert"}))
	// Not allowed (the allowed list does not match a-team-x), though auto matches.
	f.namespace(t, "a-team-x", nil)
	f.waitFor(t, "a-team-new", "tls", ctrltest.HasData(map[string]string{"tls.crt": "cert"}))
	f.waitFor(t, "a-team-x", "tls", absent)
}

// testSelector: a namespace relabelled to match gains the copy, one
// relabelled away loses it.
func testSelector(t *testing.T, f *fixture) {
	f.namespace(t, "s-src", nil)
	f.namespace(t, "s-one", map[string]string{"tier": "dev"})
	a := auto("", "")
	a[reflector.AnnotationAutoNamespacesSelector] = "tier=prod"
	f.source(t, "s-src", "pull", map[string]string{"k": "v"}, a)
	f.namespace(t, "s-two", map[string]string{"tier": "prod"})
	f.waitFor(t, "s-two", "pull", ctrltest.HasData(map[string]string{"k": "v"}))
	f.relabel(t, "s-one", map[string]string{"tier": "prod"})
	f.waitFor(t, "s-one", "pull", ctrltest.HasData(map[string]string{"k": "v"}))
	f.relabel(t, "s-two", map[string]string{"tier": "dev"})
	f.waitFor(t, "s-two", "pull", absent)
	f.waitFor(t, "s-one", "pull", ctrltest.HasData(map[string]string{"k": "v"}))
}

// testChangeDeleteConflict: a source change reaches every copy; a
// same-named Secret keymount did not write is reported, never
// overwritten, and survives the source's deletion, which removes
// keymount's copies.
func testChangeDeleteConflict(t *testing.T, f *fixture) {
	f.namespace(t, "c-src", nil)
	for _, ns := range []string{"c-1", "c-2", "c-theirs"} {
		f.namespace(t, ns, nil)
	}
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "c-theirs", Name: "db"}, StringData: map[string]string{"mine": "keep"}}
	if _, err := f.cs.CoreV1().Secrets("c-theirs").Create(t.Context(), theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The metrics, from what the earlier subtests counted.
	secret := map[string]string{"writer": reflector.WriterName, "kind": "Secret"}
	created := map[string]string{"writer": reflector.WriterName, "kind": "Secret", "result": "created"}
	updated := map[string]string{"writer": reflector.WriterName, "kind": "Secret", "result": "updated"}
	writer := map[string]string{"writer": reflector.WriterName}
	created0, updated0 := f.metric(t, fanout.MetricCopiesWritten, created), f.metric(t, fanout.MetricCopiesWritten, updated)
	conflicts0, deleted0 := f.metric(t, fanout.MetricConflicts, secret), f.metric(t, fanout.MetricCopiesDeleted, secret)
	propagated0 := f.metric(t, fanout.MetricPropagation, writer)
	f.source(t, "c-src", "db", map[string]string{"password": "one"}, auto("", "c-[0-9],c-theirs"))
	for _, ns := range []string{"c-1", "c-2"} {
		f.waitFor(t, ns, "db", ctrltest.HasData(map[string]string{"password": "one"}))
	}
	f.waitEvent(t, "c-src", "db", fanout.ReasonCopyConflict)
	f.waitMetric(t, fanout.MetricCopiesWritten, created, created0+2)
	f.waitMetric(t, fanout.MetricConflicts, secret, conflicts0+1)
	f.update(t, "c-src", "db", func(s *corev1.Secret) { s.Data = map[string][]byte{"password": []byte("two"), "user": []byte("u")} })
	for _, ns := range []string{"c-1", "c-2"} {
		f.waitFor(t, ns, "db", ctrltest.HasData(map[string]string{"password": "two", "user": "u"}))
	}
	f.waitFor(t, "c-theirs", "db", ctrltest.HasData(map[string]string{"mine": "keep"}))
	// The change reached both copies: two updates, and the change timed.
	f.waitMetric(t, fanout.MetricCopiesWritten, updated, updated0+2)
	f.waitMetric(t, fanout.MetricPropagation, writer, propagated0+1)
	if err := f.cs.CoreV1().Secrets("c-src").Delete(t.Context(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"c-1", "c-2"} {
		f.waitFor(t, ns, "db", absent)
	}
	f.waitMetric(t, fanout.MetricCopiesDeleted, secret, deleted0+2)
	f.waitFor(t, "c-theirs", "db", ctrltest.HasData(map[string]string{"mine": "keep"}))
}

// testHandEdit: a copy edited by hand is put back; one deleted by hand
// comes back.
func testHandEdit(t *testing.T, f *fixture) {
	f.namespace(t, "h-src", nil)
	f.namespace(t, "h-1", nil)
	f.source(t, "h-src", "api", map[string]string{"key": "right"}, auto("", "h-1"))
	f.waitFor(t, "h-1", "api", ctrltest.HasData(map[string]string{"key": "right"}))
	f.update(t, "h-1", "api", func(s *corev1.Secret) { s.Data = map[string][]byte{"key": []byte("wrong"), "extra": []byte("x")} })
	f.waitFor(t, "h-1", "api", ctrltest.HasData(map[string]string{"key": "right"}))
	if err := f.cs.CoreV1().Secrets("h-1").Delete(t.Context(), "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, "h-1", "api", ctrltest.HasData(map[string]string{"key": "right"}))
}

// testTurnedOff: a source whose auto-reflection is turned off loses its
// copies, and gets them back when it is turned on again; one that drops
// every reflector annotation loses them too.
func testTurnedOff(t *testing.T, f *fixture) {
	f.namespace(t, "o-src", nil)
	f.namespace(t, "o-1", nil)
	f.source(t, "o-src", "key", map[string]string{"k": "v"}, auto("", "o-1"))
	f.waitFor(t, "o-1", "key", ctrltest.HasData(map[string]string{"k": "v"}))
	f.update(t, "o-src", "key", func(s *corev1.Secret) { s.Annotations[reflector.AnnotationAutoEnabled] = "false" })
	f.waitFor(t, "o-1", "key", absent)
	f.update(t, "o-src", "key", func(s *corev1.Secret) { s.Annotations[reflector.AnnotationAutoEnabled] = "true" })
	f.waitFor(t, "o-1", "key", ctrltest.HasData(map[string]string{"k": "v"}))
	f.update(t, "o-src", "key", func(s *corev1.Secret) { s.Annotations = nil })
	f.waitFor(t, "o-1", "key", absent)
}

// testManual: a mirror annotated reflects is kept in step when the source
// allows its namespace; refused (an event) when not; a source change
// reaches it; the source's deletion leaves it.
func testManual(t *testing.T, f *fixture) {
	f.namespace(t, "m-src", nil)
	f.namespace(t, "m-ok", nil)
	f.namespace(t, "m-no", nil)
	f.source(t, "m-src", "cfg", map[string]string{"a": "1"},
		map[string]string{reflector.AnnotationAllowed: "True", reflector.AnnotationAllowedNamespaces: "m-ok"})
	refl := map[string]string{reflector.AnnotationReflects: "m-src/cfg"}
	f.source(t, "m-ok", "mirror", nil, refl)
	f.source(t, "m-no", "mirror", map[string]string{"own": "data"}, refl)
	f.waitFor(t, "m-ok", "mirror", ctrltest.HasData(map[string]string{"a": "1"}))
	f.waitFor(t, "m-ok", "mirror", func(s *corev1.Secret) error {
		if s.Annotations[reflector.AnnotationAutoReflects] != "False" {
			return fmt.Errorf("auto-reflects %q, want False", s.Annotations[reflector.AnnotationAutoReflects])
		}
		return nil
	})
	f.waitEvent(t, "m-no", "mirror", reflector.ReasonReflectionDenied)
	f.waitFor(t, "m-no", "mirror", ctrltest.HasData(map[string]string{"own": "data"}))
	f.update(t, "m-src", "cfg", func(s *corev1.Secret) { s.Data = map[string][]byte{"a": []byte("2")} })
	f.waitFor(t, "m-ok", "mirror", ctrltest.HasData(map[string]string{"a": "2"}))
	if err := f.cs.CoreV1().Secrets("m-src").Delete(t.Context(), "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitEvent(t, "m-ok", "mirror", reflector.ReasonSourceNotFound)
	f.waitFor(t, "m-ok", "mirror", ctrltest.HasData(map[string]string{"a": "2"}))
}

// testSwitch: copies reflector wrote (no keymount label) are adopted and
// brought in step; a same-named Secret reflecting another source is not.
func testSwitch(t *testing.T, f *fixture) {
	f.namespace(t, "w-src", nil)
	f.namespace(t, "w-1", nil)
	f.namespace(t, "w-2", nil)
	written := func(ns, reflects string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cert", Annotations: map[string]string{
			reflector.AnnotationReflects: reflects, reflector.AnnotationAutoReflects: "True",
			reflector.AnnotationReflectedVersion: "1", reflector.AnnotationReflectedAt: "2026-01-01T00:00:00.0000000+00:00",
		}}, StringData: map[string]string{"old": "x"}}
		if _, err := f.cs.CoreV1().Secrets(ns).Create(t.Context(), s, metav1.CreateOptions{FieldManager: "reflector"}); err != nil {
			t.Fatal(err)
		}
	}
	written("w-1", "w-src/cert")
	written("w-2", "elsewhere/cert")
	src := f.source(t, "w-src", "cert", map[string]string{"tls.crt": "new"}, auto("", "w-[0-9]"))
	f.waitFor(t, "w-1", "cert", func(s *corev1.Secret) error {
		if err := ctrltest.HasData(map[string]string{"tls.crt": "new"})(s); err != nil {
			return err
		}
		if s.Labels[fanout.LabelCopy] != reflector.WriterName || s.Annotations[reflector.AnnotationReflectedVersion] != src.ResourceVersion {
			return fmt.Errorf("labels %v annotations %v: not adopted", s.Labels, s.Annotations)
		}
		return nil
	})
	f.waitEvent(t, "w-src", "cert", fanout.ReasonCopyConflict)
	f.waitFor(t, "w-2", "cert", ctrltest.HasData(map[string]string{"old": "x"}))
}

// testConfigMap: ConfigMaps are reflected as Secrets are.
func testConfigMap(t *testing.T, f *fixture) {
	f.namespace(t, "cm-src", nil)
	f.namespace(t, "cm-1", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cm-src", Name: "settings", Annotations: auto("", "cm-1")},
		Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {1, 2}}}
	if _, err := f.cs.CoreV1().ConfigMaps("cm-src").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConfigMap(t, f, "cm-1", "settings", func(c *corev1.ConfigMap) error {
		if c == nil || c.Data["a"] != "1" || len(c.BinaryData["b"]) != 2 || c.Annotations[reflector.AnnotationAutoReflects] != "True" {
			return fmt.Errorf("ConfigMap copy %v, want data a=1, binaryData b, auto-reflects True", c)
		}
		return nil
	})
	if err := f.cs.CoreV1().ConfigMaps("cm-src").Delete(t.Context(), "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConfigMap(t, f, "cm-1", "settings", func(c *corev1.ConfigMap) error {
		if c != nil {
			return fmt.Errorf("ConfigMap copy still exists")
		}
		return nil
	})
}
