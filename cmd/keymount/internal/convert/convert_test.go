package convert

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	vaultspec "github.com/keymount/keymount/provider/vault/spec"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	pushv1alpha1 "github.com/keymount/keymount/apis/push/v1alpha1"
	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/provider/aws/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// TestGolden converts the examples of ESO's and KES's documentation
// (written afresh in testdata/) and compares the output and the issues
// with the golden files: <name>.golden (the YAML, with --partial when
// there are issues) and <name>.issues (stderr's lines).
func TestGolden(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		issues bool // the input holds what cannot be converted
	}{
		{name: "eso-secretsmanager"},
		{name: "eso-parameterstore"},
		{name: "eso-template"},
		{name: "eso-datafrom"},
		{name: "eso-policies"},
		{name: "eso-vault"},
		{name: "eso-cluster", opts: Options{RoleARN: "arn:aws:iam::111122223333:role/external-secrets"}},
		{name: "eso-vault-unsupported", issues: true},
		{name: "kes-secretsmanager", opts: Options{ServiceAccount: "web"}},
		{name: "eso-unsupported", issues: true},
		{name: "kes-unsupported", opts: Options{ServiceAccount: "web"}, issues: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := convertFile(t, filepath.Join("testdata", tt.name+".yaml"), tt.opts)
			var out bytes.Buffer
			if err := res.Write(&out); err != nil {
				t.Fatal(err)
			}
			var lines []string
			fatal := 0
			for _, is := range res.Issues {
				lines = append(lines, is.String())
				if !is.Note {
					fatal++
				}
			}
			if got := fatal > 0; got != tt.issues {
				t.Errorf("issues: %v, want %v:\n%s", got, tt.issues, strings.Join(lines, "\n"))
			}
			golden(t, tt.name+".golden", out.String())
			issuesText := strings.Join(lines, "\n")
			if issuesText != "" {
				issuesText += "\n"
			}
			golden(t, tt.name+".issues", issuesText)
			checkOutput(t, out.Bytes())
		})
	}
}

func convertFile(t *testing.T, path string, opts Options) *Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	res, err := Convert([]Input{{Name: filepath.Base(path), R: f}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", name, diff)
	}
}

// checkOutput decodes every document of the output strictly into
// keymount's API types, and parses every class as the AWS provider does.
func checkOutput(t *testing.T, out []byte) {
	t.Helper()
	for i, doc := range strings.Split(string(out), "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		switch meta.Kind {
		case "SecretProviderClass":
			var c secretsstorev1.SecretProviderClass
			if err := yaml.UnmarshalStrict([]byte(doc), &c); err != nil {
				t.Errorf("document %d: not a SecretProviderClass: %v", i, err)
			}
			switch c.Spec.Provider {
			case "vault":
				checkVaultClass(t, i, c.Spec.Parameters)
			default:
				if _, err := spec.Parse(c.Spec.Parameters, 0o644); err != nil {
					t.Errorf("document %d: the AWS provider refuses the class: %v", i, err)
				}
			}
		case "SecretSync":
			var s ss1.SecretSync
			if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
				t.Errorf("document %d: not a SecretSync: %v", i, err)
			}
			for _, d := range s.Spec.SecretObject.Data {
				if !validKey(d.SourcePath) || !validKey(d.TargetKey) {
					t.Errorf("document %d: %+v refused by the CRD's pattern", i, d)
				}
			}
		case "PushSecret":
			checkPushSecret(t, i, doc)
		case "ServiceAccount", "Namespace":
			var o struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name        string            `json:"name"`
					Namespace   string            `json:"namespace"`
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := yaml.UnmarshalStrict([]byte(doc), &o); err != nil || o.APIVersion != "v1" || o.Metadata.Name == "" {
				t.Errorf("document %d: not a v1 %s: %v", i, meta.Kind, err)
			}
		default:
			t.Errorf("document %d: kind %q", i, meta.Kind)
		}
	}
}

// checkPushSecret decodes a PushSecret strictly into keymount's type and
// checks what its CRD requires.
func checkPushSecret(t *testing.T, i int, doc string) {
	t.Helper()
	var p pushv1alpha1.PushSecret
	if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
		t.Errorf("document %d: not a PushSecret: %v", i, err)
	}
	if p.APIVersion != pushAPIVersion || p.Spec.SecretProviderClassName == "" || p.Spec.Selector.Secret.Name == "" || len(p.Spec.Data) == 0 {
		t.Errorf("document %d: a PushSecret needs apiVersion %s, a class, a Secret and data: %+v", i, pushAPIVersion, p)
	}
	for _, d := range p.Spec.Data {
		if d.Match.RemoteRef.RemoteKey == "" {
			t.Errorf("document %d: %+v has no remoteKey", i, d)
		}
	}
}

// checkVaultClass checks the parameters of a vault class as keymount's
// Vault provider reads them: vaultAddress and roleName, and objects
// holding objectName, secretPath and either secretKey (vault-csi-provider's
// own keys) or keymount's extract.
func checkVaultClass(t *testing.T, doc int, p map[string]string) {
	t.Helper()
	if p["vaultAddress"] == "" || p["roleName"] == "" {
		t.Errorf("document %d: vaultAddress %q, roleName %q: both are required", doc, p["vaultAddress"], p["roleName"])
	}
	objects, err := vaultspec.ParseObjects(p["objects"])
	if err != nil {
		t.Fatalf("document %d: objects %q: %v", doc, p["objects"], err)
	}
	for _, o := range objects {
		if (o.Key == "") == (o.Extract == nil) {
			t.Errorf("document %d: object %q: want secretKey or extract", doc, o.Name)
		}
	}
}

// TestMultipleInputs: the store and the ExternalSecret may come from
// different inputs, and a kind: List is read item by item.
func TestMultipleInputs(t *testing.T) {
	// The store in one input, the ExternalSecret in another, as with -f
	// store.yaml -f es.yaml.
	store := `apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: s, namespace: ns}
spec:
  provider:
    aws: {service: SecretsManager, region: eu-west-1, auth: {jwt: {serviceAccountRef: {name: app}}}}
`
	es := `apiVersion: v1
kind: List
items:
- apiVersion: external-secrets.io/v1
  kind: ExternalSecret
  metadata: {name: e, namespace: ns}
  spec:
    secretStoreRef: {name: s}
    data:
    - {secretKey: k, remoteRef: {key: a/b}}
`
	res, err := Convert([]Input{{Name: "store", R: strings.NewReader(store)}, {Name: "es", R: strings.NewReader(es)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Issues) != 0 || res.converted() != 1 {
		t.Fatalf("converted %d, issues %v; want 1 and none", res.converted(), res.Issues)
	}
	var out bytes.Buffer
	if err := res.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"objectName: a/b", "serviceAccountName: app", "name: e\n  namespace: ns"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	checkOutput(t, out.Bytes())
}

// TestUnreadable: input that is not YAML fails with the document named.
func TestUnreadable(t *testing.T) {
	tests := map[string]string{
		"not yaml":    "apiVersion: [\n",
		"not mapping": "- a\n- b\n",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Convert([]Input{{Name: "in.yaml", R: strings.NewReader(in)}}, Options{})
			if err == nil || !strings.Contains(err.Error(), "in.yaml, document 1") {
				t.Errorf("err = %v, want one naming in.yaml, document 1", err)
			}
		})
	}
}
