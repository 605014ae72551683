package syncctl

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/synchash"
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
	base := h.Sum(hashContent(ss, class, c))
	secret := &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"k": []byte("v1"), "other": []byte("x")},
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{ss1.LabelSecretSync: "", "foreign": "y"}}}
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
		got := h.Sum(hashContent(ss2, class2, c2))
		if got == base || slices.Contains(seen, got) {
			t.Errorf("changing the %s left the hash unchanged", name)
		}
		seen = append(seen, got)
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
