package secretmirror

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
)

// TestDesired: the copy has the source's type, data, labels and
// annotations but the bookkeeping of keymount, mirrors, reflector, the sync
// controller and kubectl, plus mirrors' annotations; the source is not
// changed.
func TestDesired(t *testing.T) {
	m := secretMirror(mirrorsv1alpha2.SecretMirrorSpec{})
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "pull", ResourceVersion: "42",
			Labels: map[string]string{"team": "a", "secrets-store.sync.x-k8s.io": "", "fanout.keymount.io/copy": "reflector"},
			Annotations: map[string]string{
				"note": "kept", "reflector.v1.k8s.emberstack.com/reflection-auto-enabled": "true",
				"mirrors.kts.studio/owned-by": "x/y", "kubectl.kubernetes.io/last-applied-configuration": "{}",
			},
		},
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{".dockerconfigjson": []byte("{}")},
	}
	before := src.DeepCopy()
	c := desired(m, src, origin{typ: mirrorsv1alpha2.SourceTypeSecret}, "team-a")
	if c.Namespace != "team-a" || c.Name != "pull" || c.Type != corev1.SecretTypeDockerConfigJson {
		t.Errorf("copy %s/%s type %s", c.Namespace, c.Name, c.Type)
	}
	if diff := cmp.Diff(map[string]string{"team": "a"}, c.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	lastSync := c.Annotations[AnnotationLastSyncAt]
	if lastSync == "" {
		t.Error("no last-sync-at")
	}
	delete(c.Annotations, AnnotationLastSyncAt)
	want := map[string]string{
		"note": "kept", AnnotationOwnedBy: "platform/pull", AnnotationSourceType: "secret", AnnotationParentVersion: "42",
	}
	if diff := cmp.Diff(want, c.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	c.Data[".dockerconfigjson"][0] = 'X'
	c.Labels["x"] = "y"
	if diff := cmp.Diff(before, src); diff != "" {
		t.Errorf("changing the copy changed the source (-before +after):\n%s", diff)
	}
}

// TestAdopts: only a Secret whose mirrors owned-by names this SecretMirror
// is taken over.
func TestAdopts(t *testing.T) {
	adopt := adopts(secretMirror(mirrorsv1alpha2.SecretMirrorSpec{}))
	for owner, want := range map[string]bool{"platform/pull": true, "platform/other": false, "": false, "other/pull": false} {
		s := &corev1.Secret{}
		if owner != "" {
			s.Annotations = map[string]string{AnnotationOwnedBy: owner}
		}
		if got := adopt(s); got != want {
			t.Errorf("owned-by %q: adopt %v, want %v", owner, got, want)
		}
	}
}

func TestAbbreviate(t *testing.T) {
	if got := abbreviate([]string{"a", "b"}); got != "a, b" {
		t.Errorf("%q", got)
	}
	if got := abbreviate([]string{"a", "b", "c", "d", "e", "f", "g"}); got != "a, b, c, d, e and 2 more" {
		t.Errorf("%q", got)
	}
}
