package mirror

import (
	"bytes"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// The marks of a copy, shared with the reflector side of the fan-out
// (cluster/fanout): the label selects the copies keymount watches, its
// value names the writer; the owner annotation names the SecretMirror.
const (
	LabelCopy       = "fanout.keymount.io/copy"
	AnnotationOwner = "fanout.keymount.io/owner"
	// Writer is LabelCopy's value on a SecretMirror's copies.
	Writer = "mirror"
)

// notCopied are the source's label and annotation prefixes a copy does not
// carry: keymount's and mirrors' bookkeeping, the sync controller's label
// (a copy is not a SecretSync's Secret), reflector's annotations (a copy
// must not become a reflection source) and kubectl's last applied
// configuration.
var notCopied = []string{
	"fanout.keymount.io/", "mirrors.kts.studio/", "reflector.v1.k8s.emberstack.com/",
	secretsyncv1alpha1.LabelSecretSync, "kubectl.kubernetes.io/last-applied-configuration",
}

func copied(key string) bool {
	for _, p := range notCopied {
		if strings.HasPrefix(key, p) {
			return false
		}
	}
	return true
}

// owner is the "<namespace>/<name>" of a SecretMirror, the value of
// AnnotationOwner and of mirrors' owned-by.
func owner(m *mirrorsv1alpha2.SecretMirror) string { return m.Namespace + "/" + m.Name }

// desired is the copy of src that m puts in namespace ns: the source's
// type, data, labels and annotations (but notCopied), keymount's marks and
// mirrors' annotations. parent-version and last-sync-at are set when it is
// written (write), not compared.
func desired(m *mirrorsv1alpha2.SecretMirror, src *corev1.Secret, ns string) *corev1.Secret {
	c := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: src.Name,
			Labels: map[string]string{LabelCopy: Writer}, Annotations: map[string]string{},
		},
		Type: src.Type,
		Data: maps.Clone(src.Data),
	}
	for k, v := range src.Labels {
		if copied(k) {
			c.Labels[k] = v
		}
	}
	for k, v := range src.Annotations {
		if copied(k) {
			c.Annotations[k] = v
		}
	}
	c.Annotations[AnnotationOwner] = owner(m)
	c.Annotations[AnnotationOwnedBy] = owner(m)
	c.Annotations[AnnotationSourceType] = string(mirrorsv1alpha2.SourceTypeSecret)
	return c
}

// ownedBy reports whether the existing Secret cur is a copy of m: keymount's
// marks or mirrors' owned-by name m (a copy mirrors wrote is adopted).
func ownedBy(cur *corev1.Secret, m *mirrorsv1alpha2.SecretMirror) bool {
	if cur.Labels[LabelCopy] == Writer && cur.Annotations[AnnotationOwner] == owner(m) {
		return true
	}
	return cur.Annotations[AnnotationOwnedBy] == owner(m)
}

// upToDate reports whether cur already is want: same type, data, and every
// label and annotation of want (others, added by hand or by tools, stay).
func upToDate(cur, want *corev1.Secret) bool {
	if cur.Type != want.Type || len(cur.Data) != len(want.Data) || !sameImmutable(cur, want) {
		return false
	}
	for k, v := range want.Data {
		if w, ok := cur.Data[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return subset(want.Labels, cur.Labels) && subset(want.Annotations, cur.Annotations)
}

func sameImmutable(a, b *corev1.Secret) bool {
	return (a.Immutable != nil && *a.Immutable) == (b.Immutable != nil && *b.Immutable)
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if w, ok := have[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// mustReplace reports whether cur cannot be updated into want: the type
// differs, or cur is immutable.
func mustReplace(cur, want *corev1.Secret) bool {
	return cur.Type != want.Type || (cur.Immutable != nil && *cur.Immutable)
}

// apply returns cur changed into want, keeping cur's other labels and
// annotations and its identity (resourceVersion for the optimistic
// update).
func apply(cur, want *corev1.Secret) *corev1.Secret {
	out := cur.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	maps.Copy(out.Labels, want.Labels)
	maps.Copy(out.Annotations, want.Annotations)
	out.Data = want.Data
	out.StringData = nil
	out.Immutable = want.Immutable
	return out
}
