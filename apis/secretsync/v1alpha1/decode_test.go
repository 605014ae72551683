package v1alpha1_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// TestManifestsDecodeStrictly: the sync controller's manifests decode into
// keymount's types with no unknown field, except the one its e2e suite
// writes in the wrong place (secretObject.forceSynchronization, which the
// API server prunes).
func TestManifestsDecodeStrictly(t *testing.T) {
	s := runtime.NewScheme()
	if err := secretsyncv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
	files, err := filepath.Glob("testdata/*/*.yaml")
	if err != nil || len(files) < 15 {
		t.Fatalf("found %d manifests (err %v), want the 19 of testdata", len(files), err)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			obj, _, err := decoder.Decode(data, nil, nil)
			if strings.HasSuffix(f, "all_set_all_valid.yaml") {
				if err == nil || !strings.Contains(err.Error(), `unknown field "spec.secretObject.forceSynchronization"`) {
					t.Errorf("err %v, want the unknown field secretObject.forceSynchronization", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ss, ok := obj.(*secretsyncv1alpha1.SecretSync); !ok || ss.Name == "" {
				t.Errorf("decoded %T %+v, want a named SecretSync", obj, obj)
			}
		})
	}
}
