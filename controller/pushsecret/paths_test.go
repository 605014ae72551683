package pushsecret

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pushv1alpha1 "github.com/keymount/keymount/apis/push/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// TestPathsAllowed: a class without keymount.io/push-paths allows any
// remote key; with it, every key must start with a listed prefix (spaces
// and empty entries ignored) and hold no "..".
func TestPathsAllowed(t *testing.T) {
	ps := func(keys ...string) *pushv1alpha1.PushSecret {
		p := &pushv1alpha1.PushSecret{}
		for _, k := range keys {
			p.Spec.Data = append(p.Spec.Data, pushv1alpha1.PushSecretData{Match: pushv1alpha1.PushSecretMatch{RemoteRef: pushv1alpha1.PushSecretRemoteRef{RemoteKey: k}}})
		}
		return p
	}
	class := func(paths *string) *secretsstorev1.SecretProviderClass {
		c := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Name: "store"}}
		if paths != nil {
			c.Annotations = map[string]string{pushv1alpha1.AnnotationPushPaths: *paths}
		}
		return c
	}
	list := " team-a/ ,, secret/data/team-a/"
	empty := ""
	for _, tc := range []struct {
		paths *string
		keys  []string
		bad   string
	}{
		{nil, []string{"anything/at/all"}, ""},
		{&list, []string{"team-a/db", "secret/data/team-a/x"}, ""},
		{&list, []string{"team-a/db", "team-b/db"}, `spec.data[1].match.remoteRef.remoteKey "team-b/db" is outside`},
		{&list, []string{"team-a/../team-b/db"}, `"team-a/../team-b/db" is outside`},
		{&empty, []string{"team-a/db"}, `"team-a/db" is outside`},
	} {
		err := pathsAllowed(class(tc.paths), ps(tc.keys...))
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%v under %v: %v, want allowed", tc.keys, tc.paths, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%v under %v: %v, want an error with %q", tc.keys, tc.paths, err, tc.bad)
		}
	}
}
