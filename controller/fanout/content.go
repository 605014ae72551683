package fanout

import (
	"bytes"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kindOf names an object's kind for messages.
func kindOf(o client.Object) string {
	switch o.(type) {
	case *corev1.Secret:
		return "Secret"
	case *corev1.ConfigMap:
		return "ConfigMap"
	}
	return "object"
}

// newLike returns an empty object of o's type.
func newLike(o client.Object) client.Object {
	if _, ok := o.(*corev1.ConfigMap); ok {
		return &corev1.ConfigMap{}
	}
	return &corev1.Secret{}
}

// sameContent reports whether two copies hold the same type and data
// (a missing map equals an empty one). b may come from the copies cache:
// its data is then compared by digest.
func sameContent(a, b client.Object) bool {
	if d, ok := cachedDigest(b); ok {
		return ContentDigest(a) == d
	}
	switch x := a.(type) {
	case *corev1.Secret:
		y, ok := b.(*corev1.Secret)
		return ok && secretType(x.Type) == secretType(y.Type) && maps.EqualFunc(x.Data, y.Data, bytes.Equal)
	case *corev1.ConfigMap:
		y, ok := b.(*corev1.ConfigMap)
		return ok && maps.Equal(x.Data, y.Data) && maps.EqualFunc(x.BinaryData, y.BinaryData, bytes.Equal)
	}
	return false
}

// secretType is t with the API server's default.
func secretType(t corev1.SecretType) corev1.SecretType {
	if t == "" {
		return corev1.SecretTypeOpaque
	}
	return t
}

// missing returns the keys of have that want lacks.
func missing[V any](have, want map[string]V) []string {
	var out []string
	for k := range have {
		if _, ok := want[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

const binaryPrefix = "binaryData/"

func prefixed(_ string, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = binaryPrefix + k
	}
	return out
}

func cutPrefix(k string) (string, bool) { return strings.CutPrefix(k, binaryPrefix) }

// cachedDigest is the digest trimCopy left on a cached copy: only on an
// object whose values are all empty, as the cache holds them (an object
// read from the API server with the annotation set by hand is compared
// whole).
func cachedDigest(o client.Object) (string, bool) {
	d, ok := o.GetAnnotations()[AnnotationCachedDigest]
	if !ok {
		return "", false
	}
	switch x := o.(type) {
	case *corev1.Secret:
		return d, allEmpty(x.Data)
	case *corev1.ConfigMap:
		for _, v := range x.Data {
			if v != "" {
				return "", false
			}
		}
		return d, allEmpty(x.BinaryData)
	}
	return "", false
}

func allEmpty(m map[string][]byte) bool {
	for _, v := range m {
		if len(v) > 0 {
			return false
		}
	}
	return true
}
