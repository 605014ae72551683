package secretsync

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// intern returns the canonical copy of s: the strings that repeat across
// thousands of cached objects (namespaces, condition types, reasons and
// messages, owner kinds, label keys) are held once instead of once per
// object (tests/bench BenchmarkController measures the controller's memory).
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// internMeta interns the repeated strings of an object's metadata.
func internMeta(m *metav1.ObjectMeta) {
	m.Namespace = intern(m.Namespace)
	m.Labels = internMap(m.Labels)
	for i := range m.OwnerReferences {
		ref := &m.OwnerReferences[i]
		ref.APIVersion, ref.Kind = intern(ref.APIVersion), intern(ref.Kind)
	}
}

// internMap interns the keys of m, and its values that are short enough to
// repeat (label values; not annotation payloads).
func internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if len(v) <= 63 {
			v = intern(v)
		}
		out[intern(k)] = v
	}
	return out
}

// internSecretSync interns a SecretSync's repeated strings: its spec's
// names and its conditions.
func internSecretSync(ss *ss1.SecretSync) {
	internMeta(&ss.ObjectMeta)
	ss.Spec.SecretProviderClassName = intern(ss.Spec.SecretProviderClassName)
	ss.Spec.ServiceAccountName = intern(ss.Spec.ServiceAccountName)
	ss.Spec.SecretObject.Type = intern(ss.Spec.SecretObject.Type)
	for i := range ss.Spec.SecretObject.Data {
		d := &ss.Spec.SecretObject.Data[i]
		d.SourcePath, d.TargetKey = intern(d.SourcePath), intern(d.TargetKey)
	}
	for i := range ss.Status.Conditions {
		c := &ss.Status.Conditions[i]
		c.Type, c.Status, c.Reason, c.Message = intern(c.Type), metav1.ConditionStatus(intern(string(c.Status))), intern(c.Reason), intern(c.Message)
	}
	for i := range ss.Status.Objects {
		o := &ss.Status.Objects[i]
		o.ID, o.Version = intern(o.ID), intern(o.Version)
	}
}

// maxLabelSets bounds labelSets: the label sets of synced Secrets are few
// (the controller's label and the spec's labels, mostly the same across a
// team's SecretSyncs); past that many, a Secret keeps its own map.
const maxLabelSets = 1024

// labelSets holds one map for each label set of the cached Secrets, shared
// by every Secret that carries it: a Go map costs some 300 bytes even with
// one entry, 3 MB over 10,000 Secrets (tests/bench BenchmarkController
// measures the controller's memory). Cached objects are never changed in
// place (the cache copies what it hands out), so sharing is safe.
var labelSets = struct {
	mu sync.Mutex
	m  map[string]map[string]string
}{m: map[string]map[string]string{}}

// sharedLabels returns the shared map equal to m.
func sharedLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	var key strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		key.WriteString(k)
		key.WriteByte(0)
		key.WriteString(m[k])
		key.WriteByte(0)
	}
	labelSets.mu.Lock()
	defer labelSets.mu.Unlock()
	if s, ok := labelSets.m[key.String()]; ok {
		return s
	}
	m = internMap(m)
	if len(labelSets.m) < maxLabelSets {
		labelSets.m[key.String()] = m
	}
	return m
}

// internSecret interns a cached Secret's repeated strings and shares its
// label map.
func internSecret(s *corev1.Secret) {
	internMeta(&s.ObjectMeta)
	s.Labels = sharedLabels(s.Labels)
	s.Type = corev1.SecretType(intern(string(s.Type)))
	if len(s.Data) > 0 {
		data := make(map[string][]byte, len(s.Data))
		for k, v := range s.Data {
			data[intern(k)] = v
		}
		s.Data = data
	}
}
