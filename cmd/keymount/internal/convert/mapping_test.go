package convert

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/provider/aws/spec"
)

func awsType(s string) spec.ObjectType { return spec.ObjectType(s) }

func TestGJSONToJMESPath(t *testing.T) {
	tests := []struct {
		property, want string
		issue          string // substring; "" for none
	}{
		{property: "password", want: "password"},
		{property: "database.host", want: "database.host"},
		{property: "cloud-region", want: `"cloud-region"`},
		{property: "a.b-c.d_e", want: `a."b-c".d_e`},
		{property: "_x9", want: "_x9"},
		{property: "9lives", want: `"9lives"`},
		{property: "hosts.0", issue: "array index"},
		{property: "a..b", issue: "empty field"},
		{property: "friends.#.first", issue: "gjson syntax"},
		{property: "name\\.with\\.dots", issue: "gjson syntax"},
		{property: "a|@reverse", issue: "gjson syntax"},
	}
	for _, tt := range tests {
		t.Run(tt.property, func(t *testing.T) {
			var list []Issue
			got, ok := gjsonToJMESPath(issues{object: "x", list: &list}, "p", tt.property)
			if tt.issue == "" {
				notes := 0
				for _, is := range list {
					if is.Note {
						notes++
					}
				}
				if !ok || got != tt.want || len(list) != notes || (notes > 0) != strings.Contains(tt.property, ".") {
					t.Errorf("got %q, %v, issues %v; want %q", got, ok, list, tt.want)
				}
				return
			}
			if ok || len(list) != 1 || !strings.Contains(list[0].Message, tt.issue) {
				t.Errorf("got %q, %v, issues %v; want an issue with %q", got, ok, list, tt.issue)
			}
		})
	}
}

func TestESORefresh(t *testing.T) {
	tests := []struct {
		name  string
		spec  map[string]any
		want  map[string]string
		issue string
	}{
		{name: "default 1h", spec: map[string]any{}, want: map[string]string{annotationPolicy: "Periodic", annotationInterval: "1h"}},
		{name: "interval", spec: map[string]any{"refreshInterval": "15m"}, want: map[string]string{annotationPolicy: "Periodic", annotationInterval: "15m"}},
		{name: "Periodic", spec: map[string]any{"refreshPolicy": "Periodic", "refreshInterval": "1h30m"}, want: map[string]string{annotationPolicy: "Periodic", annotationInterval: "1h30m"}},
		{name: "zero", spec: map[string]any{"refreshInterval": "0"}, want: map[string]string{annotationPolicy: "CreatedOnce"}},
		{name: "zero seconds", spec: map[string]any{"refreshInterval": "0s"}, want: map[string]string{annotationPolicy: "CreatedOnce"}},
		{name: "CreatedOnce", spec: map[string]any{"refreshPolicy": "CreatedOnce", "refreshInterval": "1h"}, want: map[string]string{annotationPolicy: "CreatedOnce"}},
		{name: "OnChange", spec: map[string]any{"refreshPolicy": "OnChange"}, want: map[string]string{annotationPolicy: "OnDemand"}},
		{name: "bad policy", spec: map[string]any{"refreshPolicy": "Sometimes"}, issue: "spec.refreshPolicy: not supported"},
		{name: "bad interval", spec: map[string]any{"refreshInterval": "soon"}, issue: "spec.refreshInterval: invalid"},
		{name: "negative", spec: map[string]any{"refreshInterval": "-1m"}, issue: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var list []Issue
			got := esoRefresh(issues{object: "x", list: &list}, tt.spec)
			if tt.issue != "" {
				if len(list) != 1 || !strings.Contains(list[0].String(), tt.issue) {
					t.Errorf("issues %v, want one with %q", list, tt.issue)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" || len(list) != 0 {
				t.Errorf("annotations (-want +got):\n%s\nissues: %v", diff, list)
			}
		})
	}
}

func TestRemoteVersion(t *testing.T) {
	tests := []struct {
		typ            string
		version        string
		wantV, wantLbl string
	}{
		{typ: "secretsmanager", version: "uuid/0b6a8c1e-4f2d-4b7a-9e3c-5d1f2a7b8c9d", wantV: "0b6a8c1e-4f2d-4b7a-9e3c-5d1f2a7b8c9d"},
		{typ: "secretsmanager", version: "AWSPREVIOUS", wantLbl: "AWSPREVIOUS"},
		{typ: "ssmparameter", version: "3", wantV: "3"},
		{typ: "ssmparameter", version: "live", wantLbl: "live"},
		{typ: "ssmparameter", version: ""},
	}
	for _, tt := range tests {
		r := storeRef{typ: awsType(tt.typ)}
		remoteVersion(&r, tt.version)
		if r.version != tt.wantV || r.versionLabel != tt.wantLbl {
			t.Errorf("%s %q: version %q, label %q; want %q, %q", tt.typ, tt.version, r.version, r.versionLabel, tt.wantV, tt.wantLbl)
		}
	}
}

// TestTemplateIssues: a template that does not parse, or calls a function
// keymount does not offer, is reported with the annotation's name.
func TestTemplateIssues(t *testing.T) {
	in := `apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: s, namespace: ns}
spec:
  provider:
    aws: {service: SecretsManager, region: eu-west-1, auth: {jwt: {serviceAccountRef: {name: app}}}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: e, namespace: ns}
spec:
  secretStoreRef: {name: s}
  target:
    template:
      data:
        broken: "{{ .password "
        env: '{{ env "HOME" }}'
        ok: '{{ .password | b64enc }}'
  data:
  - {secretKey: password, remoteRef: {key: a/b}}
`
	res, err := Convert([]Input{{Name: "in", R: strings.NewReader(in)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, is := range res.Issues {
		got = append(got, is.Path)
		if !strings.Contains(is.Message, "keymount.io/template.") {
			t.Errorf("issue %q does not name the annotation", is)
		}
	}
	if diff := cmp.Diff([]string{"spec.target.template.data.broken", "spec.target.template.data.env"}, got); diff != "" {
		t.Errorf("issue paths (-want +got):\n%s", diff)
	}
}
