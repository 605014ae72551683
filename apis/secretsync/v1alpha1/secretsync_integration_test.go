//go:build integration

package v1alpha1_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	"github.com/keymount/keymount/tests/k8senv"
)

var (
	secretSyncs = secretsyncv1alpha1.SchemeGroupVersion.WithResource(secretsyncv1alpha1.Resource)
	classes     = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasses"}
)

// cluster is a real API server with keymount's CRDs (deploy/crds).
type cluster struct {
	dyn  dynamic.Interface
	kube kubernetes.Interface
}

// TestSecretSyncCRD installs keymount's CRDs in a real API server and shows
// that the SecretSync CRD behaves as the sync controller v0.0.5's: its docs'
// and e2e suite's manifests are accepted (with its defaults), its negative
// cases refused with its messages, and what it accepts round-trips
// unchanged; keymount's status extras are stored through the status
// subresource.
func TestSecretSyncCRD(t *testing.T) {
	// Own control plane: the package's only one (Shared would save nothing).
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"../../../deploy/crds"}})
	c := cluster{dyn: dynamic.NewForConfigOrDie(env.Config), kube: kubernetes.NewForConfigOrDie(env.Config)}

	t.Run("accepted", c.testAccepted)
	t.Run("refused", c.testRefused)
	t.Run("secret keys the CRD leaves to the API server", c.testSecretKeysRefusedOnSecret)
	t.Run("round trip", c.testRoundTrip)
	t.Run("boundaries", c.testBoundaries)
	t.Run("status subresource", c.testStatus)
}

// namespace creates a namespace for one subtest.
func (c cluster) namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", " ", "-", "_", "-").Replace(t.Name()))
	if len(name) > 63 {
		name = strings.Trim(name[len(name)-63:], "-")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.kube.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

// manifest reads a testdata manifest.
func manifest(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return u
}

func (c cluster) create(t *testing.T, ns, path string) (*unstructured.Unstructured, error) {
	t.Helper()
	u := manifest(t, path)
	gvr := secretSyncs
	if u.GetKind() == "SecretProviderClass" {
		gvr = classes
	}
	return c.dyn.Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{})
}

// testAccepted: every manifest of accepted/ is stored, with v0.0.5's
// defaults (type Opaque, secretSyncControllerName "") and its spec otherwise
// as sent; fields the schema lacks are pruned.
func (c cluster) testAccepted(t *testing.T) {
	ns := c.namespace(t)
	if _, err := c.create(t, ns, "e2e-providerspc.yaml"); err != nil {
		t.Fatalf("the sync controller's SecretProviderClass: %v", err)
	}
	files, err := filepath.Glob("testdata/accepted/*.yaml")
	if err != nil || len(files) < 7 {
		t.Fatalf("testdata/accepted: %d files, err %v; want the sync controller's 7 or more", len(files), err)
	}
	for _, f := range files {
		path := strings.TrimPrefix(f, "testdata/")
		t.Run(filepath.Base(f), func(t *testing.T) {
			got, err := c.create(t, ns, path)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			want := expectedSpec(t, manifest(t, path))
			if diff := cmp.Diff(want, got.Object["spec"]); diff != "" {
				t.Errorf("stored spec (-sent with v0.0.5's defaults, pruned +stored):\n%s", diff)
			}
		})
	}
}

// expectedSpec is the spec of u as v0.0.5's CRD stores it: with its
// defaults, and without secretObject.forceSynchronization (no such field:
// all_set_all_valid.yaml has it, and the API server prunes it).
func expectedSpec(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	spec, _, err := unstructured.NestedMap(u.Object, "spec")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := spec["secretSyncControllerName"]; !ok {
		spec["secretSyncControllerName"] = ""
	}
	obj, ok := spec["secretObject"].(map[string]any)
	if !ok {
		t.Fatalf("spec.secretObject is %T, want an object", spec["secretObject"])
	}
	if _, ok := obj["type"]; !ok {
		obj["type"] = "Opaque"
	}
	delete(obj, "forceSynchronization")
	return spec
}

// refusal is a manifest v0.0.5's CRD refuses and what the API server says.
type refusal struct {
	file string
	// want are parts of the error, each in full; for the cases of the sync
	// controller's e2e suite, its expected messages. A CEL rule's message
	// follows the field path and "Invalid value: "; older API servers put
	// `"object": ` in between (as the sync controller's e2e suite expects),
	// later ones do not: the test takes both.
	want []string
}

var refusals = []refusal{
	{"invalid_secret_type.yaml", []string{
		`SecretSync.secret-sync.x-k8s.io "test-secret-sync" is invalid: spec.secretObject.type: Invalid value: "TypeWith ASpace": spec.secretObject.type in body should match '^[^\s]+$'`,
	}},
	{"invalid_secretsync_spec.yaml", []string{
		`SecretSync.secret-sync.x-k8s.io "test-secret-sync" is invalid: spec.serviceAccountName: Invalid value: "defa:ult": spec.serviceAccountName in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'`,
	}},
	{"invalid_secret_data_values.yaml", []string{
		`spec.secretProviderClassName: Invalid value: "oh noes!<-invalid": spec.secretProviderClassName in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'`,
		`spec.serviceAccountName: Invalid value: "thisIsAlsoWrong": spec.serviceAccountName in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'`,
		`spec.forceSynchronization in body should match '^[A-Za-z0-9]([-A-Za-z0-9]+([-._a-zA-Z0-9]?[A-Za-z0-9])*)?$'`,
	}},
	{"invalid_label_value.yaml", []string{
		`SecretSync.secret-sync.x-k8s.io "sse2einvalidlabelsecret" is invalid: spec.secretObject.labels: Invalid value: `,
		`Label keys must not exceed 317 characters (254 for prefix+separator, 63 for name), label values must not exceed 63 characters.`,
	}},
	{"invalid_annotation_key_too_long.yaml", []string{
		`spec.secretObject.annotations: Invalid value: `,
		`Annotations keys must not exceed 317 characters (254 for prefix+separator, 63 for name), annotation values must not exceed 256 kB.`,
	}},
	{"secret_data_empty.yaml", []string{"spec.secretObject.data in body should have at least 1 items"}},
	{"missing_secret_data.yaml", []string{"spec.secretObject.data: Required value"}},
	{"reserved_label.yaml", []string{
		`spec.secretObject.labels: Invalid value: `,
		`Labels should not contain secrets-store.sync.x-k8s.io. This key is reserved for the controller.`,
	}},
	{"reserved_annotation.yaml", []string{
		`spec.secretObject.annotations: Invalid value: `,
		`Annotations should not contain secrets-store.sync.x-k8s.io. This key is reserved for the controller.`,
	}},
	{"duplicate_target_key.yaml", []string{`spec.secretObject.data[1]: Duplicate value: {"targetKey":"bar"}`}},
	{"invalid_source_path.yaml", []string{
		`spec.secretObject.data[0].sourcePath: Invalid value: "../etc/passwd": spec.secretObject.data[0].sourcePath in body should match`,
	}},
	{"missing_required.yaml", []string{
		"spec.secretObject: Required value", "spec.secretProviderClassName: Required value", "spec.serviceAccountName: Required value",
	}},
}

// testRefused: every manifest of refused/ is refused with the messages of
// v0.0.5's CRD, and nothing is stored.
func (c cluster) testRefused(t *testing.T) {
	ns := c.namespace(t)
	files, err := filepath.Glob("testdata/refused/*.yaml")
	if err != nil || len(files) != len(refusals) {
		t.Fatalf("testdata/refused has %d files (err %v), the test %d cases: give each file its case", len(files), err, len(refusals))
	}
	for _, r := range refusals {
		t.Run(r.file, func(t *testing.T) {
			_, err := c.create(t, ns, "refused/"+r.file)
			if err == nil {
				t.Fatal("accepted; v0.0.5's CRD refuses it")
			}
			for _, want := range r.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\nlacks %q", err, want)
				}
			}
		})
	}
	list, err := c.dyn.Resource(secretSyncs).Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("after the refusals: %d SecretSyncs stored (err %v), want none", len(list.Items), err)
	}
}

// testSecretKeysRefusedOnSecret: as in v0.0.5, the CRD accepts label and
// annotation keys that are no valid Kubernetes keys; the API server refuses
// the Secret the controller would write with them, with the message the
// sync controller's e2e suite expects in its ControllerPatchError condition.
func (c cluster) testSecretKeysRefusedOnSecret(t *testing.T) {
	ns := c.namespace(t)
	const keyRule = `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`
	for _, tc := range []struct{ file, want string }{
		{"accepted/invalid_label_key.yaml", `Secret "sse2einvalidlabelsecret" is invalid: metadata.labels: Invalid value: "invalid/key_with_invalid_characters!": ` + keyRule},
		{"accepted/invalid_annotation_key.yaml", `Secret "sse2einvalidannotationssecret" is invalid: metadata.annotations: Invalid value: "my.annotation/with_invalid_characters!": ` + keyRule},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			u, err := c.create(t, ns, tc.file)
			if err != nil {
				t.Fatalf("the CRD refused it; v0.0.5's accepts it: %v", err)
			}
			var ss secretsyncv1alpha1.SecretSync
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ss); err != nil {
				t.Fatal(err)
			}
			secret := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{
					Name: ss.Name, Namespace: ns,
					Labels:      map[string]string{secretsyncv1alpha1.LabelSecretSync: ""},
					Annotations: ss.Spec.SecretObject.Annotations,
				},
				Type: corev1.SecretType(ss.Spec.SecretObject.Type),
				Data: map[string][]byte{"bar": []byte("secret")},
			}
			for k, v := range ss.Spec.SecretObject.Labels {
				secret.Labels[k] = v
			}
			_, err = c.kube.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("creating the Secret: err %v\nwant %q", err, tc.want)
			}
		})
	}
}
