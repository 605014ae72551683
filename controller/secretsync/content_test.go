package secretsync

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/synchash"
	"github.com/keymount/keymount/provider/v1alpha1"
)

func spec(typ string, pairs ...string) *ss1.SecretSync {
	ss := &ss1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n", UID: "u1", Generation: 1}}
	ss.Spec.SecretObject.Type = typ
	for i := 0; i+1 < len(pairs); i += 2 {
		ss.Spec.SecretObject.Data = append(ss.Spec.SecretObject.Data, ss1.SecretObjectData{SourcePath: pairs[i], TargetKey: pairs[i+1]})
	}
	return ss
}

func files(kv ...string) []*v1alpha1.File {
	var out []*v1alpha1.File
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &v1alpha1.File{Path: kv[i], Contents: []byte(kv[i+1])})
	}
	return out
}

func TestDesiredContent(t *testing.T) {
	ss := spec("", "a", "key-a", "b", "key-b")
	ss.Spec.SecretObject.Labels = map[string]string{"team": "x"}
	c, err := desiredContent(ss, files("a", "va", "b", "vb", "c", "vc"))
	if err != nil {
		t.Fatal(err)
	}
	if c.typ != corev1.SecretTypeOpaque || string(c.data["key-a"]) != "va" || string(c.data["key-b"]) != "vb" || len(c.data) != 2 {
		t.Errorf("content type %s keys %d, want Opaque with key-a and key-b", c.typ, len(c.data))
	}
	if v, ok := c.labels[ss1.LabelSecretSync]; !ok || v != "" || c.labels["team"] != "x" {
		t.Errorf("labels %v, want the SecretSync label and team", c.labels)
	}

	_, err = desiredContent(spec("Opaque", "missing", "k"), files("a", "secret-value"))
	if !errors.Is(err, errMissingObject) || !strings.Contains(err.Error(), `"missing"`) || strings.Contains(err.Error(), "secret-value") {
		t.Errorf("missing object: %v; want errMissingObject naming the path, never a value", err)
	}
	_, err = desiredContent(spec(string(corev1.SecretTypeTLS), "cert", corev1.TLSCertKey), files("cert", "not-a-cert"))
	if err == nil || strings.Contains(err.Error(), "not-a-cert") {
		t.Errorf("TLS object that is not PEM nor PKCS#12: %v; want an error without the value", err)
	}
}

// TestHashCoversSourcesAndContent: the syncHash changes with a value, a
// key, a label, the class's generation and forceSynchronization, and is
// the same when computed from a Secret that holds the content.
func TestHashCoversSourcesAndContent(t *testing.T) {
	h, err := synchash.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	ss := spec("Opaque", "a", "k")
	class := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{UID: "c1", Generation: 1}}
	c, err := desiredContent(ss, files("a", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	base := h.Sum(hashContent(ss, class, c.digested()))
	secret := &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v1"), "other": []byte("x")},
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{ss1.LabelSecretSync: "", "foreign": "y"}}}
	if _, err := trimSecret(secret); err != nil { // as the cache holds it
		t.Fatal(err)
	}
	if got := h.Sum(hashContent(ss, class, currentContent(ss, secret))); got != base {
		t.Errorf("the hash of the Secret as written differs from the hash of its content")
	}
	var seen []string
	for name, mutate := range map[string]func(ss *ss1.SecretSync, class *secretsstorev1.SecretProviderClass, c *content){
		"value":            func(_ *ss1.SecretSync, _ *secretsstorev1.SecretProviderClass, c *content) { c.data["k"] = []byte("v2") },
		"label":            func(_ *ss1.SecretSync, _ *secretsstorev1.SecretProviderClass, c *content) { c.labels["x"] = "y" },
		"class generation": func(_ *ss1.SecretSync, cl *secretsstorev1.SecretProviderClass, _ *content) { cl.Generation = 2 },
		"forceSynchronization": func(s *ss1.SecretSync, _ *secretsstorev1.SecretProviderClass, _ *content) {
			s.Spec.ForceSynchronization = "f"
		},
	} {
		ss2, class2 := ss.DeepCopy(), class.DeepCopy()
		c2, _ := desiredContent(ss2, files("a", "v1"))
		mutate(ss2, class2, c2)
		got := h.Sum(hashContent(ss2, class2, c2.digested()))
		if got == base || slices.Contains(seen, got) {
			t.Errorf("changing the %s left the hash unchanged", name)
		}
		seen = append(seen, got)
	}
}

// TestTrimSecret: the cache keeps a digest of each value, never the value,
// drops managedFields, and trimming twice changes nothing; equal values
// have equal digests and different values different ones.
func TestTrimSecret(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Data:       map[string][]byte{"a": []byte("hunter2"), "b": []byte("hunter2"), "c": []byte("other")},
	}
	if _, err := trimSecret(s); err != nil {
		t.Fatal(err)
	}
	if s.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", s.ManagedFields)
	}
	for k, v := range s.Data {
		if !isDigest(v) || strings.Contains(string(v), "hunter2") || strings.Contains(string(v), "other") {
			t.Errorf("data[%s] = %q, want a digest without the value", k, v)
		}
	}
	if string(s.Data["a"]) != string(s.Data["b"]) || string(s.Data["a"]) == string(s.Data["c"]) {
		t.Errorf("digests do not follow the values: %q %q %q", s.Data["a"], s.Data["b"], s.Data["c"])
	}
	once := string(s.Data["a"])
	if _, err := trimSecret(s); err != nil {
		t.Fatal(err)
	}
	if string(s.Data["a"]) != once {
		t.Errorf("trimming twice changed the digest")
	}
	if got, err := trimSecret("not a secret"); err != nil || got != "not a secret" {
		t.Errorf("trimSecret(other type) = %v, %v; want it unchanged", got, err)
	}
	want := &content{data: map[string][]byte{"a": []byte("hunter2")}}
	if d := want.digested(); string(d.data["a"]) != once || string(want.data["a"]) != "hunter2" {
		t.Errorf("digested() = %q (want the cached digest) and must leave the original alone (%q)", d.data["a"], want.data["a"])
	}
}

func TestChangedKeys(t *testing.T) {
	old := &content{data: map[string][]byte{"a": []byte("1"), "b": []byte("2"), "c": []byte("3")}}
	now := &content{data: map[string][]byte{"a": []byte("1"), "b": []byte("x"), "d": []byte("4")}}
	added, changed, removed := now.changedKeys(old)
	if !slices.Equal(added, []string{"d"}) || !slices.Equal(changed, []string{"b"}) || !slices.Equal(removed, []string{"c"}) {
		t.Errorf("added %v changed %v removed %v, want [d] [b] [c]", added, changed, removed)
	}
	if got := describeChange(added, changed, removed); got != "changed keys b; added keys d; removed keys c" {
		t.Errorf("describeChange = %q", got)
	}
}

// TestTrimObject: the cache keeps neither managedFields nor kubectl's
// last-applied-configuration, and every other annotation (the rotation
// annotations live there).
func TestTrimObject(t *testing.T) {
	ss := &ss1.SecretSync{ObjectMeta: metav1.ObjectMeta{
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		Annotations: map[string]string{
			corev1.LastAppliedConfigAnnotation: `{"kind":"SecretSync"}`, "keymount.io/rotation-policy": "OnDemand",
		},
	}}
	for range 2 { // idempotent
		o, err := trimObject(ss)
		if err != nil {
			t.Fatal(err)
		}
		var ok bool
		if ss, ok = o.(*ss1.SecretSync); !ok {
			t.Fatalf("transform returned %T", o)
		}
	}
	if ss.ManagedFields != nil {
		t.Errorf("managedFields kept")
	}
	if _, ok := ss.Annotations[corev1.LastAppliedConfigAnnotation]; ok || ss.Annotations["keymount.io/rotation-policy"] != "OnDemand" {
		t.Errorf("annotations = %v, want only keymount.io/rotation-policy", ss.Annotations)
	}
}

// TestInternedStrings: two cached SecretSyncs share one copy of the strings
// that repeat across objects, and keep their values.
func TestInternedStrings(t *testing.T) {
	mk := func() *ss1.SecretSync {
		ss := spec("Opaque", "obj", "value")
		ss.Namespace = strings.Clone("team-a")
		ss.Status.Conditions = []metav1.Condition{{Type: strings.Clone("Ready"), Status: "True", Reason: strings.Clone("SecretUpToDate"), Message: strings.Clone(ss1.MessageSecretUpToDate)}}
		return ss
	}
	trim := func(ss *ss1.SecretSync) *ss1.SecretSync {
		o, err := trimObject(ss)
		if err != nil {
			t.Fatal(err)
		}
		trimmed, ok := o.(*ss1.SecretSync)
		if !ok {
			t.Fatalf("transform returned %T", o)
		}
		return trimmed
	}
	a, b := trim(mk()), trim(mk())
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	if !same(a.Namespace, b.Namespace) || !same(a.Status.Conditions[0].Message, b.Status.Conditions[0].Message) ||
		!same(a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason) {
		t.Errorf("repeated strings not shared between cached objects")
	}
	if a.Namespace != "team-a" || a.Status.Conditions[0].Message != ss1.MessageSecretUpToDate || a.Spec.SecretObject.Data[0].TargetKey != "value" {
		t.Errorf("interning changed values: %+v", a)
	}
}
