package secretmirror

import (
	"bytes"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// Writer is fanout.LabelCopy's value on a SecretMirror's copies.
const Writer = "mirror"

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
// fanout.AnnotationOwner and of mirrors' owned-by.
func owner(m *mirrorsv1alpha2.SecretMirror) string { return m.Namespace + "/" + m.Name }

// desired is the copy of src (read from from) that m puts in namespace ns:
// the source's type, data, labels and annotations (but notCopied) and
// mirrors' annotations; the fanout.Writer adds keymount's marks.
func desired(m *mirrorsv1alpha2.SecretMirror, src *corev1.Secret, from origin, ns string) *corev1.Secret {
	c := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: src.Name, Labels: map[string]string{}, Annotations: map[string]string{}},
		Type:       src.Type,
		Data:       make(map[string][]byte, len(src.Data)),
	}
	for k, v := range src.Data {
		c.Data[k] = bytes.Clone(v)
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
	c.Annotations[AnnotationOwnedBy] = owner(m)
	c.Annotations[AnnotationSourceType] = string(from.typ)
	c.Annotations[AnnotationParentVersion] = src.ResourceVersion
	c.Annotations[AnnotationLastSyncAt] = metav1.Now().String()
	if from.vaultPath != "" {
		c.Annotations[AnnotationVaultPath] = from.vaultPath
	}
	if from.lease != nil {
		c.Annotations[AnnotationVaultLeaseID] = from.lease.LeaseID
		c.Annotations[AnnotationVaultLeaseDuration] = strconv.Itoa(from.lease.LeaseDuration)
	}
	return c
}

// volatile are mirrors' annotations that change with every write or
// renewal: they never make a copy out of date by themselves.
var volatile = []string{AnnotationParentVersion, AnnotationLastSyncAt, AnnotationVaultLeaseDuration}

// adopts returns the fanout.Writer's Adopt for m: a Secret mirrors wrote
// for the same SecretMirror (owned-by names it) becomes keymount's copy, so
// a cluster switches from mirrors to keymount without a conflict.
func adopts(m *mirrorsv1alpha2.SecretMirror) func(client.Object) bool {
	want := owner(m)
	return func(existing client.Object) bool {
		return existing.GetAnnotations()[AnnotationOwnedBy] == want
	}
}
