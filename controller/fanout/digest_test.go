package fanout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func secret(rv string, typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls", ResourceVersion: rv, Labels: map[string]string{LabelCopy: "reflector"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "keymount-controller"}}},
		Type: typ, Data: data,
	}
}

// TestTrimCopyKeepsDigestNotData: the cache's copy holds keys, no values,
// no managed fields, and compares by digest as the whole copy would.
func TestTrimCopyKeepsDigestNotData(t *testing.T) {
	data := map[string][]byte{"tls.crt": []byte("cert"), "tls.key": []byte("key")}
	out, err := trimCopy(secret("1", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": []byte("cert"), "tls.key": []byte("key")}))
	if err != nil {
		t.Fatal(err)
	}
	cached, ok := out.(*corev1.Secret)
	if !ok {
		t.Fatalf("trimCopy returned %T", out)
	}
	if len(cached.Data) != 2 || cached.Data["tls.crt"] != nil || cached.Data["tls.key"] != nil || cached.ManagedFields != nil {
		t.Fatalf("cached copy: data %q, managed fields %v; want the two keys without values, no managed fields", cached.Data, cached.ManagedFields)
	}
	if !sameContent(secret("", corev1.SecretTypeTLS, data), cached) {
		t.Error("the same content is not current against the cached copy")
	}
	for name, other := range map[string]*corev1.Secret{
		"value":   secret("", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": []byte("cert2"), "tls.key": []byte("key")}),
		"key":     secret("", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": []byte("cert")}),
		"type":    secret("", corev1.SecretTypeOpaque, data),
		"shifted": secret("", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": []byte("certt"), "tls.key": []byte("ey")}),
	} {
		if sameContent(other, cached) {
			t.Errorf("%s changed: still current against the cached copy", name)
		}
	}
	// An object read from the API server whose annotation was set by hand
	// is compared whole.
	forged := secret("2", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": []byte("old")})
	forged.Annotations = map[string]string{AnnotationCachedDigest: cached.Annotations[AnnotationCachedDigest]}
	if sameContent(secret("", corev1.SecretTypeTLS, data), forged) {
		t.Error("a forged digest annotation made a stale object current")
	}
}

func TestTrimCopyConfigMap(t *testing.T) {
	cm := &corev1.ConfigMap{Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {2}}}
	out, err := trimCopy(cm.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	cached, _ := out.(*corev1.ConfigMap)
	if cached.Data["a"] != "" || cached.BinaryData["b"] != nil || !sameContent(cm, cached) {
		t.Fatalf("cached ConfigMap %v %v: want keys without values, current against the original", cached.Data, cached.BinaryData)
	}
	if sameContent(&corev1.ConfigMap{Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {3}}}, cached) {
		t.Error("a changed binaryData value is current against the cached ConfigMap")
	}
}

// TestRecentEchoes: the write's echo is recognised once; until it comes, a
// stale cache does not make the copy out of date; any other event forgets.
func TestRecentEchoes(t *testing.T) {
	r := NewRecent()
	key := recentKey{"Secret", "ns", "tls"}
	r.remember(key, "5", "d1")
	if !r.pending(key, "d1", secret("4", "", nil)) || !r.pending(key, "d1", nil) {
		t.Error("a write the cache has not seen is not pending")
	}
	if r.pending(key, "d2", secret("4", "", nil)) {
		t.Error("a write of other content is pending")
	}
	if r.pending(key, "d1", secret("5", "", nil)) {
		t.Error("a write the cache has is pending")
	}
	if r.Echo(secret("4", "", nil)) {
		t.Error("an older event is taken for the echo")
	}
	if r.pending(key, "d1", secret("4", "", nil)) {
		t.Error("a write is still pending after another event of the copy")
	}
	r.remember(key, "6", "d1")
	if !r.Echo(secret("6", "", nil)) || r.Echo(secret("6", "", nil)) {
		t.Error("the echo is not recognised exactly once")
	}
	r.remember(key, "7", "d1")
	r.Forget(secret("7", "", nil))
	if r.pending(key, "d1", nil) {
		t.Error("a deleted copy's write is still pending")
	}
	// A write whose echo never came stops counting after recentTTL.
	r.remember(key, "8", "d1")
	w := r.m[key]
	w.at = w.at.Add(-recentTTL)
	r.m[key] = w
	if r.pending(key, "d1", nil) {
		t.Error("a write older than recentTTL is still pending")
	}
	var none *Recent
	none.remember(key, "1", "d")
	if none.pending(key, "d", nil) || none.Echo(secret("1", "", nil)) {
		t.Error("a nil Recent remembers")
	}
}
