package convert

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	pushv1alpha1 "github.com/keymount/keymount/apis/push/v1alpha1"
)

// Stores of namespace ns the PushSecrets of TestPushSecret push to.
const (
	pushSM = `apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: sm, namespace: ns}
spec:
  provider:
    aws: {service: SecretsManager, region: eu-west-1, prefix: team/, auth: {jwt: {serviceAccountRef: {name: app}}}}
`
	pushSSM = `apiVersion: external-secrets.io/v1
kind: ClusterSecretStore
metadata: {name: ssm}
spec:
  provider:
    aws: {service: ParameterStore, region: eu-west-1, auth: {jwt: {serviceAccountRef: {name: app, namespace: ns}}}}
`
	pushKV2 = `apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: kv2, namespace: ns}
spec:
  provider:
    vault: {server: "https://vault:8200", path: secret, version: v2, auth: {kubernetes: {role: w, serviceAccountRef: {name: vault-app}}}}
`
	pushKV1 = `apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: kv1, namespace: ns}
spec:
  provider:
    vault: {server: "https://vault:8200", path: /kv/, version: v1, auth: {kubernetes: {role: w, serviceAccountRef: {name: vault-app}}}}
`
	pushNoAuth = `apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: bare, namespace: ns}
spec:
  provider:
    aws: {service: SecretsManager, region: eu-west-1}
`
)

// esoPush is an external-secrets.io/v1alpha1 PushSecret ns/p of the spec
// given (YAML at two spaces).
func esoPush(spec string) string {
	return "apiVersion: external-secrets.io/v1alpha1\nkind: PushSecret\nmetadata: {name: p, namespace: ns}\nspec:\n" + spec
}

// pushOne is a spec pushing key k of Secret s to remote key r of the stores.
func pushOne(stores, data string) string {
	return "  secretStoreRefs: " + stores + "\n  selector: {secret: {name: s}}\n  data:\n" + data
}

func pushData1(secretKey, remoteKey, property string) pushv1alpha1.PushSecretData {
	return pushv1alpha1.PushSecretData{Match: pushv1alpha1.PushSecretMatch{SecretKey: secretKey,
		RemoteRef: pushv1alpha1.PushSecretRemoteRef{RemoteKey: remoteKey, Property: property}}}
}

func withType(d pushv1alpha1.PushSecretData, t string) pushv1alpha1.PushSecretData {
	d.ObjectType = t
	return d
}

// TestPushSecret converts ESO PushSecrets: the keymount PushSecrets
// written (name, spec) and the field paths refused.
func TestPushSecret(t *testing.T) {
	sel := pushv1alpha1.PushSecretSelector{Secret: pushv1alpha1.PushSecretSecret{Name: "s"}}
	tests := []struct {
		name   string
		in     []string
		opts   Options
		want   map[string]pushv1alpha1.PushSecretSpec // by name
		issues []string                               // "<path>: <kind>" of each refusal
	}{
		{
			name: "secrets manager with prefix and property",
			in:   []string{pushSM, esoPush(pushOne("[{name: sm}]", "  - match: {secretKey: pw, remoteRef: {remoteKey: db, property: password}}\n"))},
			want: map[string]pushv1alpha1.PushSecretSpec{"p": {SecretProviderClassName: "p", ServiceAccountName: "app", Selector: sel,
				Data: []pushv1alpha1.PushSecretData{withType(pushData1("pw", "team/db", "password"), "secretsmanager")}}},
		},
		{
			name: "parameter store through a ClusterSecretStore, policies and interval",
			in: []string{pushSSM, esoPush("  refreshInterval: 5m\n  updatePolicy: IfNotExists\n  deletionPolicy: Delete\n" +
				pushOne("[{name: ssm, kind: ClusterSecretStore}]", "  - match: {secretKey: token, remoteRef: {remoteKey: /app/token}}\n"))},
			want: map[string]pushv1alpha1.PushSecretSpec{"p": {SecretProviderClassName: "p", ServiceAccountName: "app", Selector: sel,
				RefreshInterval: &metav1.Duration{Duration: 5 * 60e9}, UpdatePolicy: "IfNotExists", DeletionPolicy: "Delete",
				Data: []pushv1alpha1.PushSecretData{withType(pushData1("token", "/app/token", ""), "ssmparameter")}}},
		},
		{
			name: "vault v2 and v1: one PushSecret per store, full KV paths",
			in: []string{pushKV2, pushKV1, esoPush(pushOne("[{name: kv2}, {name: kv1}]",
				"  - match: {secretKey: pw, remoteRef: {remoteKey: app/db, property: password}}\n  - match: {remoteRef: {remoteKey: secret/app/all}}\n"))},
			want: map[string]pushv1alpha1.PushSecretSpec{
				"p-kv2": {SecretProviderClassName: "p-kv2", ServiceAccountName: "vault-app", Selector: sel,
					Data: []pushv1alpha1.PushSecretData{pushData1("pw", "secret/data/app/db", "password"), pushData1("", "secret/data/app/all", "")}},
				"p-kv1": {SecretProviderClassName: "p-kv1", ServiceAccountName: "vault-app", Selector: sel,
					Data: []pushv1alpha1.PushSecretData{pushData1("pw", "kv/app/db", "password"), pushData1("", "kv/secret/app/all", "")}},
			},
		},
		{
			name: "no identity, then --service-account",
			in:   []string{pushNoAuth, esoPush(pushOne("[{name: bare}]", "  - match: {secretKey: k, remoteRef: {remoteKey: r}}\n"))},
			opts: Options{ServiceAccount: "writer"},
			want: map[string]pushv1alpha1.PushSecretSpec{"p": {SecretProviderClassName: "p", ServiceAccountName: "writer", Selector: sel,
				Data: []pushv1alpha1.PushSecretData{withType(pushData1("k", "r", ""), "secretsmanager")}}},
		},
		{
			name:   "no identity",
			in:     []string{pushNoAuth, esoPush(pushOne("[{name: bare}]", "  - match: {secretKey: k, remoteRef: {remoteKey: r}}\n"))},
			issues: []string{": not supported"},
		},
		{
			name:   "store not in the input",
			in:     []string{esoPush(pushOne("[{name: sm}]", "  - match: {secretKey: k, remoteRef: {remoteKey: r}}\n"))},
			issues: []string{"spec.secretStoreRefs[0]: invalid"},
		},
		{
			name: "refused fields",
			in: []string{pushSM, esoPush("  template: {data: {k: x}}\n" + pushOne("[{name: sm}, {labelSelector: {matchLabels: {a: b}}}, {name: x, kind: Generator}]",
				"  - match: {secretKey: k, remoteRef: {remoteKey: r}}\n    metadata: {kind: PushSecretMetadata}\n"+
					"  - match: {secretKey: k, remoteRef: {remoteKey: r}}\n    conversionStrategy: ReverseUnicode\n"+
					"  - match: {secretKey: k, remoteRef: {remoteKey: r, version: v1}}\n"+
					"  - match: {secretKey: k, remoteRef: {property: p}}\n"))},
			issues: []string{
				"spec.template: not supported",
				"spec.data[0].metadata: not supported",
				"spec.data[1].conversionStrategy: not supported",
				"spec.data[2].match.remoteRef.version: not supported",
				"spec.data[3].match.remoteRef.remoteKey: invalid",
				"spec.secretStoreRefs[1].labelSelector: not supported",
				"spec.secretStoreRefs[2].kind: not supported",
			},
			want: map[string]pushv1alpha1.PushSecretSpec{"p-sm": {SecretProviderClassName: "p-sm", ServiceAccountName: "app", Selector: sel,
				Data: []pushv1alpha1.PushSecretData{withType(pushData1("k", "team/r", ""), "secretsmanager")}}},
		},
		{
			name:   "generator",
			in:     []string{pushSM, esoPush("  secretStoreRefs: [{name: sm}]\n  selector: {generatorRef: {kind: Password, name: g}}\n  data:\n  - match: {secretKey: k, remoteRef: {remoteKey: r}}\n")},
			issues: []string{"spec.selector.generatorRef: not supported"},
		},
		{
			name: "invalid values",
			in: []string{pushSM, esoPush("  refreshInterval: soon\n  updatePolicy: Always\n  deletionPolicy: Retain\n  secretStoreRefs: [{name: sm}]\n  selector: {secret: {}}\n" +
				"  data:\n  - match: {secretKey: k, remoteRef: {remoteKey: r}}\n")},
			issues: []string{"spec.selector.secret.name: invalid", "spec.updatePolicy: invalid", "spec.deletionPolicy: invalid", "spec.refreshInterval: invalid"},
		},
		{
			name:   "no stores, no data",
			in:     []string{pushSM, esoPush("  selector: {secret: {name: s}}\n"), strings.Replace(esoPush(pushOne("[{name: sm}]", "")), "name: p,", "name: q,", 1)},
			issues: []string{"spec.secretStoreRefs: invalid", "spec.data: not supported"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Convert([]Input{{Name: "in", R: strings.NewReader(strings.Join(tt.in, "---\n"))}}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, is := range res.Issues {
				if is.Note {
					continue
				}
				kind, _, _ := strings.Cut(is.Message, ":")
				got = append(got, is.Path+": "+kind)
			}
			if diff := cmp.Diff(tt.issues, got); diff != "" {
				t.Errorf("refusals (-want +got):\n%s\n%v", diff, res.Issues)
			}
			var out bytes.Buffer
			if err := res.Write(&out); err != nil {
				t.Fatal(err)
			}
			checkOutput(t, out.Bytes())
			if diff := cmp.Diff(tt.want, pushSpecs(t, out.Bytes())); diff != "" {
				t.Errorf("PushSecrets (-want +got):\n%s\n%s", diff, out.String())
			}
		})
	}
}

// pushSpecs are the output's PushSecrets' specs by name, nil for none;
// each names the class written beside it.
func pushSpecs(t *testing.T, out []byte) map[string]pushv1alpha1.PushSecretSpec {
	t.Helper()
	var specs map[string]pushv1alpha1.PushSecretSpec
	classes := map[string]bool{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var p pushv1alpha1.PushSecret
		if err := yaml.Unmarshal([]byte(strings.TrimPrefix(doc, "---\n")), &p); err != nil {
			t.Fatal(err)
		}
		switch p.Kind {
		case "SecretProviderClass":
			classes[p.Name] = true
		case "PushSecret":
			if specs == nil {
				specs = map[string]pushv1alpha1.PushSecretSpec{}
			}
			specs[p.Name] = p.Spec
			if !classes[p.Spec.SecretProviderClassName] {
				t.Errorf("PushSecret %s: class %q not written before it", p.Name, p.Spec.SecretProviderClassName)
			}
		}
	}
	return specs
}

// TestPushSecretNames: a PushSecret and an ExternalSecret of one name in
// one namespace would write one class; the later one is refused.
func TestPushSecretNames(t *testing.T) {
	es := "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: p, namespace: ns}\nspec:\n  secretStoreRef: {name: sm}\n  data:\n  - {secretKey: k, remoteRef: {key: a}}\n"
	in := strings.Join([]string{pushSM, es, esoPush(pushOne("[{name: sm}]", "  - match: {secretKey: k, remoteRef: {remoteKey: r}}\n"))}, "---\n")
	res, err := Convert([]Input{{Name: "in", R: strings.NewReader(in)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Issues) != 1 || res.Issues[0].Object != "PushSecret ns/p" || res.Issues[0].Path != "metadata.name" {
		t.Fatalf("issues %v, want one for PushSecret ns/p's metadata.name", res.Issues)
	}
	var out bytes.Buffer
	if err := res.Write(&out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "kind: PushSecret") || !strings.Contains(out.String(), "kind: SecretSync") {
		t.Errorf("want the ExternalSecret's objects only:\n%s", out.String())
	}
}
