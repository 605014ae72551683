package reflector

import (
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPropertiesOf(t *testing.T) {
	p := PropertiesOf(map[string]string{
		AnnotationAllowed: " True ", AnnotationAutoEnabled: "TRUE",
		AnnotationAllowedNamespaces: "team-.*,ops", AnnotationAutoNamespaces: "team-a",
	})
	if !p.Allowed || !p.AutoEnabled || !p.IsAutoSource() || p.Err != nil {
		t.Fatalf("PropertiesOf = %+v, want an auto source", p)
	}
	for _, tc := range []struct {
		ns         string
		allow, aut bool
	}{{"team-a", true, true}, {"team-b", true, false}, {"ops", true, false}, {"dev", false, false}} {
		if got := p.CanReflectTo(tc.ns, nil); got != tc.allow {
			t.Errorf("CanReflectTo(%s) = %v, want %v", tc.ns, got, tc.allow)
		}
		if got := p.CanAutoReflectTo(tc.ns, nil); got != tc.aut {
			t.Errorf("CanAutoReflectTo(%s) = %v, want %v", tc.ns, got, tc.aut)
		}
	}
}

func TestPropertiesOfBooleans(t *testing.T) {
	// .NET's bool.TryParse: "true" in any case; "1", "yes" are false.
	for _, tc := range []struct {
		v    string
		want bool
	}{{"true", true}, {"True", true}, {" tRuE ", true}, {"1", false}, {"yes", false}, {"", false}, {"false", false}} {
		if got := PropertiesOf(map[string]string{AnnotationAllowed: tc.v}).Allowed; got != tc.want {
			t.Errorf("reflection-allowed %q: %v, want %v", tc.v, got, tc.want)
		}
	}
	// Allowed without auto is no auto source; auto without allowed neither.
	for _, a := range []map[string]string{{AnnotationAllowed: "true"}, {AnnotationAutoEnabled: "true"}} {
		if PropertiesOf(a).IsAutoSource() {
			t.Errorf("%v is an auto source, want not", a)
		}
	}
	if PropertiesOf(map[string]string{AnnotationAutoEnabled: "true"}).CanReflectTo("x", nil) {
		t.Error("not allowed, but CanReflectTo")
	}
}

func TestPropertiesOfReflects(t *testing.T) {
	for _, tc := range []struct{ v, want string }{
		{"ns/name", "ns/name"}, {" ns/name ", "ns/name"}, {"name", ""}, {"/name", ""}, {"ns/", ""}, {"a/b/c", ""},
	} {
		got := ""
		if ref := PropertiesOf(map[string]string{AnnotationReflects: tc.v}).Reflects; ref != nil {
			got = ref.String()
		}
		if got != tc.want {
			t.Errorf("reflects %q parsed as %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestPropertiesOfInvalidNamespaces(t *testing.T) {
	p := PropertiesOf(map[string]string{AnnotationAllowed: "true", AnnotationAllowedNamespacesSelector: "a in ("})
	if p.Err == nil || p.CanReflectTo("x", map[string]string{"a": "b"}) {
		t.Fatalf("an unparsable selector: Err %v, CanReflectTo true; want an error and no match", p.Err)
	}
}

func TestIsReflectorObject(t *testing.T) {
	for _, tc := range []struct {
		a    map[string]string
		want bool
	}{
		{map[string]string{AnnotationAllowed: "false"}, true},
		{map[string]string{AnnotationReflects: "a/b"}, true},
		{map[string]string{AnnotationReflects: "a/b", AnnotationAutoReflects: "True"}, false},
		{map[string]string{"other.io/x": "y"}, false},
		{nil, false},
	} {
		if got := IsReflectorObject(tc.a); got != tc.want {
			t.Errorf("IsReflectorObject(%v) = %v, want %v", tc.a, got, tc.want)
		}
	}
}

func TestReflectedAt(t *testing.T) {
	at := time.Date(2026, 11, 26, 17, 4, 18, 123456700, time.FixedZone("CET", 3600))
	if got, want := ReflectedAt(at), "2026-11-26T16:04:18.1234567+00:00"; got != want {
		t.Errorf("ReflectedAt = %q, want %q (.NET's round-trip format, UTC)", got, want)
	}
}

// TestCopiedLabels: a copy carries no label of its source (as reflector's),
// unless the source asks with keymount.io/reflection-copy-labels; the
// SecretSync controller's labels stay on the source even then.
func TestCopiedLabels(t *testing.T) {
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "src", Name: "db",
		Labels: map[string]string{"platform": "ca", "secrets-store.sync.x-k8s.io": ""}}, Data: map[string][]byte{"k": []byte("v")}}
	if got := Secrets.content(src, "web", "db").GetLabels(); len(got) != 0 {
		t.Errorf("copy labels without the annotation: %v, want none", got)
	}
	src.Annotations = map[string]string{AnnotationCopyLabels: "True"}
	if got := Secrets.content(src, "web", "db").GetLabels(); !maps.Equal(got, map[string]string{"platform": "ca"}) {
		t.Errorf("copy labels with the annotation: %v, want platform=ca alone", got)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "a"},
		Annotations: map[string]string{AnnotationCopyLabels: "true"}}}
	if got := ConfigMaps.content(cm, "web", "cm").GetLabels(); !maps.Equal(got, map[string]string{"team": "a"}) {
		t.Errorf("ConfigMap copy labels: %v, want team=a", got)
	}
}
