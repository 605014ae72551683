package restart

import (
	secretsstorev1 "github.com/keymount/keymount/apis/v1"

	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"

	"github.com/keymount/keymount/rotation"
)

// RolloutAnnotationPrefix starts the pod-template annotation that restarts
// a workload; the class name (or its hash) follows.
const RolloutAnnotationPrefix = rotation.AnnotationPrefix + "rollout-"

const (
	// rolloutName starts the name part of the annotation, after the
	// prefix "keymount.io/".
	rolloutName = "rollout-"
	// maxNameLength is the longest name part an annotation key may have.
	maxNameLength = 63
)

// AnnotationKey returns the pod-template annotation a change of class sets:
// keymount.io/rollout-<class>, or keymount.io/rollout-<the first 16 hex
// digits of the SHA-256 of class> when that name would exceed the 63
// characters an annotation name may have.
func AnnotationKey(class string) string {
	return annotationKey(rolloutName, class)
}

// annotationKey returns keymount.io/<prefix><name>, or with the first 16
// hex digits of the SHA-256 of name in its place when that name part would
// exceed the 63 characters an annotation name may have.
func annotationKey(prefix, name string) string {
	n := prefix + name
	if len(n) > maxNameLength {
		sum := sha256.Sum256([]byte(name))
		n = prefix + hex.EncodeToString(sum[:8])
	}
	return rotation.AnnotationPrefix + n
}

// AnnotationValue returns the annotation's value for a volume that now
// holds objects: the first 16 bytes, in hex, of the SHA-256 of the sorted
// lines "id"="version" (each quoted, so no two sets share their lines). It
// depends on the objects and their versions only, in any order, so every
// node that sees the same change derives the same value.
func AnnotationValue(objects []secretsstorev1.SecretProviderClassObject) string {
	lines := make([]string, 0, len(objects))
	for _, o := range objects {
		lines = append(lines, strconv.Quote(o.ID)+"="+strconv.Quote(o.Version)+"\n")
	}
	slices.Sort(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l)) // a hash.Hash never fails to write
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
