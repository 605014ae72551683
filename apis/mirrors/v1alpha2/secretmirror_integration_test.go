//go:build integration

package v1alpha2_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/tests/k8senv"
)

var (
	v2 = mirrorsv1alpha2.SchemeGroupVersion.WithResource(mirrorsv1alpha2.Resource)
	v1 = v2.GroupVersion().WithResource(mirrorsv1alpha2.Resource)
)

func init() { v1.Version = "v1alpha1" }

// strict is kubectl's default field validation: an unknown field is an
// error, not silently dropped.
var strict = metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}

// TestSecretMirrorCRD installs keymount's CRDs in a real API server and
// shows that the SecretMirror CRD takes mirrors' own manifests (its README,
// its samples, both versions, both spellings of the AppRole login) with
// strict field validation, stores them with mirrors' defaults, serves each
// object in both versions unchanged, refuses what mirrors' enums and types
// refuse, and stores the status through the status subresource only.
func TestSecretMirrorCRD(t *testing.T) {
	// Own control plane: the package's only one (Shared would save nothing).
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"../../../deploy/crds"}})
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mirrors"}}
	if _, err := kubernetes.NewForConfigOrDie(env.Config).CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("accepted", func(t *testing.T) { testAccepted(t, dyn) })
	t.Run("refused", func(t *testing.T) { testRefused(t, dyn) })
	t.Run("status subresource", func(t *testing.T) { testStatus(t, dyn) })
}

func manifest(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	// As the API server decodes it: integers as int64.
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return u
}

func testAccepted(t *testing.T, dyn dynamic.Interface) {
	files, err := filepath.Glob("testdata/accepted/*.yaml")
	if err != nil || len(files) < 9 {
		t.Fatalf("testdata/accepted: %d files, err %v; want mirrors' 9 or more", len(files), err)
	}
	for _, f := range files {
		path := strings.TrimPrefix(f, "testdata/")
		t.Run(filepath.Base(f), func(t *testing.T) {
			u := manifest(t, path)
			gvr := v2
			if u.GetAPIVersion() == "mirrors.kts.studio/v1alpha1" {
				gvr = v1
			}
			got, err := dyn.Resource(gvr).Namespace("mirrors").Create(t.Context(), u, strict)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			want := withDefaults(t, u.Object["spec"])
			if diff := cmp.Diff(want, got.Object["spec"]); diff != "" {
				t.Errorf("stored spec (-sent with mirrors' defaults +stored):\n%s", diff)
			}
			// The other version serves the same spec: one schema, no conversion.
			other := v1
			if gvr == v1 {
				other = v2
			}
			back, err := dyn.Resource(other).Namespace("mirrors").Get(t.Context(), u.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("read as %s: %v", other.Version, err)
			}
			if diff := cmp.Diff(want, back.Object["spec"]); diff != "" {
				t.Errorf("spec read as %s (-stored +served):\n%s", other.Version, diff)
			}
		})
	}
}

// withDefaults is spec as mirrors' CRD stores it: source.type secret and
// destination.type namespaces when absent.
func withDefaults(t *testing.T, spec any) any {
	t.Helper()
	s, ok := runtimeCopy(spec).(map[string]any)
	if !ok {
		t.Fatalf("spec %v is not an object", spec)
	}
	for field, def := range map[string]string{"source": "secret", "destination": "namespaces"} {
		if m, ok := s[field].(map[string]any); ok {
			if _, set := m["type"]; !set {
				m["type"] = def
			}
		}
	}
	return s
}

func runtimeCopy(v any) any {
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}

func testRefused(t *testing.T, dyn dynamic.Interface) {
	for file, field := range map[string]string{
		"delete_policy_keep.yaml":       `spec.deletePolicy: Unsupported value: "keep"`,
		"source_type_configmap.yaml":    `spec.source.type: Unsupported value: "configmap"`,
		"destination_type_cluster.yaml": `spec.destination.type: Unsupported value: "cluster"`,
		"poll_period_duration.yaml":     `spec.pollPeriodSeconds: Invalid value: "string"`,
		"namespaces_string.yaml":        `spec.destination.namespaces: Invalid value: "string"`,
	} {
		t.Run(file, func(t *testing.T) {
			_, err := dyn.Resource(v2).Namespace("mirrors").Create(t.Context(), manifest(t, "refused/"+file), strict)
			if err == nil || !strings.Contains(err.Error(), field) {
				t.Fatalf("err %v, want a refusal naming %s", err, field)
			}
		})
	}
}

// testStatus: mirrors' status values are stored through the status
// subresource, another value is refused, and the main resource ignores
// status.
func testStatus(t *testing.T, dyn dynamic.Interface) {
	u := manifest(t, "accepted/readme_quick_example.yaml")
	u.SetName("status-test")
	u.Object["status"] = map[string]any{"mirrorStatus": "Active"}
	created, err := dyn.Resource(v2).Namespace("mirrors").Create(t.Context(), u, strict)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := created.Object["status"]; ok {
		t.Errorf("status %v stored through the main resource", created.Object["status"])
	}
	created.Object["status"] = map[string]any{"mirrorStatus": "Active", "lastSyncTime": "2026-11-26T12:00:00Z",
		"message": "Secret mirrors/mysecret copied to 2 namespaces", "observedGeneration": int64(1)}
	got, err := dyn.Resource(v2).Namespace("mirrors").UpdateStatus(t.Context(), created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("status Active: %v", err)
	}
	if s, _, _ := unstructured.NestedString(got.Object, "status", "mirrorStatus"); s != "Active" {
		t.Errorf("mirrorStatus %q", s)
	}
	got.Object["status"] = map[string]any{"mirrorStatus": "Done"}
	if _, err := dyn.Resource(v2).Namespace("mirrors").UpdateStatus(t.Context(), got, metav1.UpdateOptions{}); err == nil ||
		!strings.Contains(err.Error(), `Unsupported value: "Done"`) {
		t.Errorf("status Done: err %v, want refused", err)
	}
}
