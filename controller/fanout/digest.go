package fanout

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationCachedDigest is, on a copy in NewCache's cache only, the
// digest of the data the cache dropped (ContentDigest). The API server
// never sees it: it is set by the cache's transform, on every copy it
// stores, over whatever the object carried.
const AnnotationCachedDigest = "fanout.keymount.io/cached-digest"

// ContentDigest is the SHA-256 of what a copy's content is: a Secret's
// type (the API server's default when empty) and data, a ConfigMap's data
// and binaryData; keys in order, every part length-prefixed. "" for
// anything else.
func ContentDigest(o client.Object) string {
	h := sha256.New()
	switch x := o.(type) {
	case *corev1.Secret:
		writePart(h, []byte(secretType(x.Type)))
		digestMap(h, x.Data, func(v []byte) []byte { return v })
	case *corev1.ConfigMap:
		digestMap(h, x.Data, func(v string) []byte { return []byte(v) })
		digestMap(h, x.BinaryData, func(v []byte) []byte { return v })
	default:
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

func digestMap[V any](h hash.Hash, m map[string]V, bytesOf func(V) []byte) {
	writePart(h, binary.BigEndian.AppendUint64(nil, uint64(len(m))))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		writePart(h, []byte(k))
		writePart(h, bytesOf(m[k]))
	}
}

func writePart(h hash.Hash, b []byte) {
	_, _ = h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
	_, _ = h.Write(b)
}

// trimCopy is the copies cache's transform: no managed fields, the data's
// values dropped (keys kept: Writer removes the keys a copy should not
// have) and their digest kept in AnnotationCachedDigest. The digest is
// always computed afresh from the object given, so a value set by anyone
// else is overwritten.
func trimCopy(in any) (any, error) {
	o, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	d := ContentDigest(o)
	if d == "" {
		return in, nil
	}
	o.SetManagedFields(nil)
	a := maps.Clone(o.GetAnnotations())
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationCachedDigest] = d
	o.SetAnnotations(a)
	switch x := o.(type) {
	case *corev1.Secret:
		clearValues(x.Data)
	case *corev1.ConfigMap:
		for k := range x.Data {
			x.Data[k] = ""
		}
		clearValues(x.BinaryData)
	}
	return o, nil
}

func clearValues(m map[string][]byte) {
	for k := range m {
		m[k] = nil
	}
}
