package convert

import (
	"bytes"
	"strings"
	"testing"

	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/reflector"
)

// TestClusterAnnotationsMatchController: the annotations convert writes
// are those keymount-controller's fan-out reads.
func TestClusterAnnotationsMatchController(t *testing.T) {
	for got, want := range map[string]string{
		annotationReflectionAllowed: reflector.AnnotationAllowed,
		annotationAllowedNamespaces: reflector.AnnotationAllowedNamespaces,
		annotationAutoEnabled:       reflector.AnnotationAutoEnabled,
		annotationAutoNamespaces:    reflector.AnnotationAutoNamespaces,
		annotationAllowedSelectors:  reflector.AnnotationAllowedNamespacesSelectors,
		annotationAutoSelectors:     reflector.AnnotationAutoNamespacesSelectors,
		selectorSeparator:           fanout.SelectorSeparator,
	} {
		if got != want {
			t.Errorf("convert writes %q, the controller reads %q", got, want)
		}
	}
}

// TestClusterNamespacesMatch: the annotations written for a
// ClusterExternalSecret's namespaces and selectors select, as the
// controller reads them, what External Secrets selects.
func TestClusterNamespacesMatch(t *testing.T) {
	res := mustConvert(t, cesWith(`
  namespaces: [billing]
  namespaceSelectors:
    - matchLabels: {team: payments}
    - matchExpressions: [{key: env, operator: In, values: [prod]}, {key: legacy, operator: DoesNotExist}]`), Options{RoleARN: "arn:aws:iam::1:role/r"})
	p := reflector.PropertiesOf(res.conversions[0].annotations)
	if p.Err != nil || !p.IsAutoSource() {
		t.Fatalf("properties %+v", p)
	}
	for _, tc := range []struct {
		ns     string
		labels map[string]string
		want   bool
	}{
		{"billing", nil, true},
		{"x", map[string]string{"team": "payments"}, true},
		{"x", map[string]string{"env": "prod"}, true},
		{"x", map[string]string{"env": "prod", "legacy": "1"}, false},
		{"billing-2", map[string]string{"team": "other"}, false},
	} {
		if got := p.CanAutoReflectTo(tc.ns, tc.labels); got != tc.want {
			t.Errorf("%s %v: %v, want %v", tc.ns, tc.labels, got, tc.want)
		}
	}
}

// TestClusterRefusals: what a ClusterExternalSecret cannot become.
func TestClusterRefusals(t *testing.T) {
	for name, tc := range map[string]struct{ spec, want string }{
		"no namespaces":   {"", "spec: not supported: no namespaces, namespaceSelectors or namespaceSelector"},
		"per-namespace":   {"\n  namespaces: [a]\n  externalSecretSpec: {secretStoreRef: {name: central}}", `"SecretStore": each namespace's own SecretStore`},
		"bad selector":    {"\n  namespaceSelectors: [{matchExpressions: [{key: a, operator: Maybe}]}]", "spec.namespaceSelectors[0]: invalid: not a label selector"},
		"namespaces list": {"\n  namespaces: [1]", "spec.namespaces[0]: invalid"},
	} {
		t.Run(name, func(t *testing.T) {
			in := cesWith(tc.spec)
			if strings.Contains(tc.spec, "externalSecretSpec") {
				in = "apiVersion: external-secrets.io/v1\nkind: ClusterExternalSecret\nmetadata: {name: c}\nspec:" + tc.spec + "\n"
			}
			res, err := Convert([]Input{{Name: "in.yaml", R: strings.NewReader(in)}}, Options{RoleARN: "arn:aws:iam::1:role/r"})
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			for _, is := range res.Issues {
				all = append(all, is.String())
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Errorf("issues %q, want one with %q", all, tc.want)
			}
		})
	}
}

// TestPodIdentity: with --pod-identity the ServiceAccount written carries
// no IRSA annotation, the class sets usePodIdentity, and the association
// AWS needs is listed.
func TestPodIdentity(t *testing.T) {
	res := mustConvert(t, cesWith("\n  namespaces: [a]"), Options{RoleARN: "arn:aws:iam::1:role/r", PodIdentity: true, ClusterNamespace: "shared"})
	var out bytes.Buffer
	if err := res.Write(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"kind: Namespace\nmetadata:\n  name: shared\n", "kind: ServiceAccount\nmetadata:\n  name: keymount-central\n  namespace: shared\n---", "usePodIdentity: \"true\"", "serviceAccountName: keymount-central"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, annotationRoleARN) {
		t.Errorf("output has IRSA's annotation with --pod-identity:\n%s", text)
	}
	checkOutput(t, out.Bytes())
	found := false
	for _, is := range res.Issues {
		found = found || (is.Note && strings.Contains(is.Message, "aws eks create-pod-identity-association --cluster-name CLUSTER --namespace shared --service-account keymount-central --role-arn arn:aws:iam::1:role/r"))
	}
	if !found {
		t.Errorf("no note with the association: %v", res.Issues)
	}
}

// cesWith is a ClusterSecretStore on the controller's identity and a
// ClusterExternalSecret reading it, with spec lines added.
func cesWith(spec string) string {
	return `apiVersion: external-secrets.io/v1
kind: ClusterSecretStore
metadata: {name: central}
spec:
  provider:
    aws: {service: SecretsManager, region: eu-west-1}
---
apiVersion: external-secrets.io/v1
kind: ClusterExternalSecret
metadata: {name: c}
spec:
  externalSecretSpec:
    secretStoreRef: {name: central, kind: ClusterSecretStore}
    data:
      - {secretKey: k, remoteRef: {key: a/b}}` + spec + "\n"
}

func mustConvert(t *testing.T, in string, opts Options) *Result {
	t.Helper()
	res, err := Convert([]Input{{Name: "in.yaml", R: strings.NewReader(in)}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, is := range res.Issues {
		if !is.Note {
			t.Fatalf("issue: %s", is)
		}
	}
	if len(res.conversions) != 1 {
		t.Fatalf("%d conversions, want 1", len(res.conversions))
	}
	return res
}

// TestCentralServiceAccount: a ClusterSecretStore whose jwt auth names
// External Secrets' own ServiceAccount (another namespace) reads, with
// --role-arn, as a ServiceAccount convert writes with that role.
func TestCentralServiceAccount(t *testing.T) {
	in := `apiVersion: external-secrets.io/v1
kind: ClusterSecretStore
metadata: {name: central}
spec:
  provider:
    aws:
      service: SecretsManager
      region: eu-west-1
      auth: {jwt: {serviceAccountRef: {name: external-secrets, namespace: external-secrets}}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: e, namespace: team-a}
spec:
  secretStoreRef: {name: central, kind: ClusterSecretStore}
  data:
    - {secretKey: k, remoteRef: {key: a/b}}
`
	res := mustConvert(t, in, Options{RoleARN: "arn:aws:iam::1:role/eso"})
	var out bytes.Buffer
	if err := res.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: keymount-central\n  namespace: team-a\n  annotations:\n    eks.amazonaws.com/role-arn: arn:aws:iam::1:role/eso\n", "serviceAccountName: keymount-central\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	checkOutput(t, out.Bytes())
}
