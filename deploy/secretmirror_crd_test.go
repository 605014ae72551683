package deploy_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The facts of ktsstudio/mirrors' CRD (secretmirrors.mirrors.kts.studio):
// names, versions, printer columns and the spec and status fields each
// version's manifests use.
const (
	mirrorGroup = "mirrors.kts.studio"
	mirrorCRD   = "secretmirrors." + mirrorGroup
)

// mirrorColumns are mirrors' printer columns per version, as name=jsonPath.
var mirrorColumns = map[string][]string{
	"v1alpha1": {
		"Source Name=.spec.source.name", "Dest Namespace=.spec.destination.namespace",
		"Dest Namespace Regex=.spec.destination.namespaceRegex", "Poll Period=.spec.pollPeriodSeconds",
		"Mirror Status=.status.mirrorStatus", "Last Sync Time=.status.lastSyncTime", "Age=.metadata.creationTimestamp",
	},
	"v1alpha2": {
		"Source Type=.spec.source.type", "Source Name=.spec.source.name", "Destination Type=.spec.destination.type",
		"Delete Policy=.spec.deletePolicy", "Poll Period=.spec.pollPeriodSeconds",
		"Mirror Status=.status.mirrorStatus", "Last Sync Time=.status.lastSyncTime", "Age=.metadata.creationTimestamp",
	},
}

// mirrorFields are the fields of mirrors' two versions with their types:
// keymount's one schema must have them all (it is their union).
var mirrorFields = map[string]string{
	"spec.source": "object", "spec.source.name": "string", "spec.source.type": "string",
	"spec.source.vault": "object", "spec.source.vault.addr": "string", "spec.source.vault.path": "string",
	"spec.source.vault.auth": "object",
	"spec.destination":       "object", "spec.destination.type": "string", "spec.destination.namespaces": "array",
	"spec.destination.namespaces[]": "string", "spec.destination.vault": "object",
	"spec.destination.namespace": "string", "spec.destination.namespaceRegex": "string",
	"spec.deletePolicy": "string", "spec.pollPeriodSeconds": "integer",
	"status.mirrorStatus": "string", "status.lastSyncTime": "string",
}

// TestSecretMirrorCRDAsMirrors: the SecretMirror CRD has mirrors' names,
// scope, versions (v1alpha2 stored, v1alpha1 served), printer columns,
// fields, enums and defaults; both versions share one schema, so no
// conversion webhook is needed.
func TestSecretMirrorCRDAsMirrors(t *testing.T) {
	crd := mustRender(t, deployFS(t), "/deploy").crds[mirrorCRD]
	if crd == nil {
		t.Fatalf("deploy/ has no %s", mirrorCRD)
	}
	wantNames := apiextensionsv1.CustomResourceDefinitionNames{
		Plural: "secretmirrors", Singular: "secretmirror", Kind: "SecretMirror", ListKind: "SecretMirrorList",
	}
	if diff := cmp.Diff(wantNames, crd.Spec.Names); diff != "" {
		t.Errorf("names (-mirrors +keymount):\n%s", diff)
	}
	if crd.Spec.Group != mirrorGroup || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("group %q scope %q, want %s Namespaced", crd.Spec.Group, crd.Spec.Scope, mirrorGroup)
	}
	if c := crd.Spec.Conversion; c != nil && c.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("conversion %q: the versions share one schema, no webhook", c.Strategy)
	}
	var names []string
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
		checkMirrorVersion(t, v)
	}
	if !slices.Equal(names, []string{"v1alpha1", "v1alpha2"}) {
		t.Fatalf("versions %v, want v1alpha1 and v1alpha2", names)
	}
	if !reflect.DeepEqual(crd.Spec.Versions[0].Schema, crd.Spec.Versions[1].Schema) {
		t.Error("v1alpha1 and v1alpha2 have different schemas: the API server would need a conversion webhook")
	}
}

func checkMirrorVersion(t *testing.T, v apiextensionsv1.CustomResourceDefinitionVersion) {
	t.Helper()
	if !v.Served || v.Storage != (v.Name == "v1alpha2") {
		t.Errorf("%s: served %v storage %v; want served, stored only as v1alpha2", v.Name, v.Served, v.Storage)
	}
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("%s: no status subresource", v.Name)
	}
	var cols []string
	for _, c := range v.AdditionalPrinterColumns {
		cols = append(cols, c.Name+"="+c.JSONPath)
	}
	if diff := cmp.Diff(mirrorColumns[v.Name], cols); diff != "" {
		t.Errorf("%s printer columns (-mirrors +keymount):\n%s", v.Name, diff)
	}
	root := v.Schema.OpenAPIV3Schema
	got := map[string]string{}
	schemaPaths(got, "spec", root.Properties["spec"])
	schemaPaths(got, "status", root.Properties["status"])
	for path, typ := range mirrorFields {
		if got[path] != typ {
			t.Errorf("%s: %s has type %q, want mirrors' %q", v.Name, path, got[path], typ)
		}
	}
	spec, status := root.Properties["spec"], root.Properties["status"]
	enums := map[string]struct {
		s    apiextensionsv1.JSONSchemaProps
		want []string
		def  string
	}{
		"spec.source.type":      {spec.Properties["source"].Properties["type"], []string{"secret", "vault"}, `"secret"`},
		"spec.destination.type": {spec.Properties["destination"].Properties["type"], []string{"namespaces", "vault"}, `"namespaces"`},
		"spec.deletePolicy":     {spec.Properties["deletePolicy"], []string{"delete", "retain"}, ""},
		"status.mirrorStatus":   {status.Properties["mirrorStatus"], []string{"Pending", "Active", "Error"}, `"Pending"`},
	}
	for path, e := range enums {
		var vals []string
		for _, j := range e.s.Enum {
			vals = append(vals, string(j.Raw))
		}
		var want []string
		for _, w := range e.want {
			want = append(want, `"`+w+`"`)
		}
		if !slices.Equal(vals, want) {
			t.Errorf("%s: %s enum %v, want mirrors' %v", v.Name, path, vals, want)
		}
		def := ""
		if e.s.Default != nil {
			def = string(e.s.Default.Raw)
		}
		if def != e.def {
			t.Errorf("%s: %s default %s, want mirrors' %q", v.Name, path, def, e.def)
		}
	}
}
