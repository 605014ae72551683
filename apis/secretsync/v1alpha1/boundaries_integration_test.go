//go:build integration

package v1alpha1_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// testBoundaries: the limits of v0.0.5's rules, one past each edge (the
// edges themselves are in fullSpec, which the round trip stores). Label keys
// may have 317 characters, annotation keys 316 (its rule is "< 317"), label
// values 63, annotation values 262144 bytes; names and
// forceSynchronization 253.
func (c cluster) testBoundaries(t *testing.T) {
	ns := c.namespace(t)
	res := c.dyn.Resource(secretSyncs).Namespace(ns)
	for i, tc := range []struct {
		name   string
		change func(*secretsyncv1alpha1.SecretSyncSpec)
		want   string
	}{
		{"label key of 318", func(s *secretsyncv1alpha1.SecretSyncSpec) {
			s.SecretObject.Labels = map[string]string{strings.Repeat("p", 254) + "/" + strings.Repeat("n", 63): "v"}
		}, "Label keys must not exceed 317 characters"},
		{"label value of 64", func(s *secretsyncv1alpha1.SecretSyncSpec) {
			s.SecretObject.Labels = map[string]string{"k": strings.Repeat("v", 64)}
		}, "label values must not exceed 63 characters"},
		{"annotation key of 317", func(s *secretsyncv1alpha1.SecretSyncSpec) {
			s.SecretObject.Annotations = map[string]string{strings.Repeat("k", 317): "v"}
		}, "Annotations keys must not exceed 317 characters"},
		{"annotation value of 262145", func(s *secretsyncv1alpha1.SecretSyncSpec) {
			s.SecretObject.Annotations = map[string]string{"k": strings.Repeat("x", 262145)}
		}, "annotation values must not exceed 256 kB"},
		{"reserved prefix inside a longer label key", func(s *secretsyncv1alpha1.SecretSyncSpec) {
			s.SecretObject.Labels = map[string]string{"secrets-store.sync.x-k8s.io.example.com/x": "v"}
		}, "Labels should not contain secrets-store.sync.x-k8s.io"},
		{"class name of 254", func(s *secretsyncv1alpha1.SecretSyncSpec) {
			s.SecretProviderClassName = strings.Repeat("c", 254)
		}, "spec.secretProviderClassName: Too long"},
		{"service account name with an upper-case letter", func(s *secretsyncv1alpha1.SecretSyncSpec) {
			s.ServiceAccountName = "Default"
		}, "spec.serviceAccountName in body should match"},
		{"forceSynchronization of 254", func(s *secretsyncv1alpha1.SecretSyncSpec) {
			s.ForceSynchronization = strings.Repeat("f", 254)
		}, "spec.forceSynchronization: Too long"},
		{"targetKey of 254", func(s *secretsyncv1alpha1.SecretSyncSpec) {
			s.SecretObject.Data = []secretsyncv1alpha1.SecretObjectData{{SourcePath: "foo", TargetKey: strings.Repeat("t", 254)}}
		}, "spec.secretObject.data[0].targetKey: Too long"},
		{"empty type", func(s *secretsyncv1alpha1.SecretSyncSpec) {
			s.SecretObject.Type = ""
		}, `spec.secretObject.type in body should match '^[^\s]+$'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := &secretsyncv1alpha1.SecretSync{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("edge-%d", i), Namespace: ns},
				Spec:       fullSpec(),
			}
			tc.change(&ss.Spec)
			_, err := res.Create(t.Context(), toUnstructured(t, ss), metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v\nwant %q", err, tc.want)
			}
		})
	}
}
