package deploy_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// upstreamCRD is what the upstream driver's CRD (v1.6) says about one kind:
// keymount's must have the same names, versions and spec schema, and may
// only add to the status schema.
type upstreamCRD struct {
	names apiextensionsv1.CustomResourceDefinitionNames
	// spec is the schema of .spec without descriptions; nil for a kind
	// without spec.
	spec *apiextensionsv1.JSONSchemaProps
	// status lists upstream's status fields per version, as paths and types
	// (see schemaPaths); keymount's status must have each of them.
	status map[string]map[string]string
	// alphaWarning is the deprecation warning of v1alpha1; nil when
	// upstream leaves it to the API server's default.
	alphaWarning *string
}

const group = "secrets-store.csi.x-k8s.io"

var alphaWarning = "secrets-store.csi.x-k8s.io/v1alpha1 is deprecated. Use secrets-store.csi.x-k8s.io/v1 instead."

var upstreamCRDs = map[string]upstreamCRD{
	"secretproviderclasses." + group: {
		names: apiextensionsv1.CustomResourceDefinitionNames{
			Plural: "secretproviderclasses", Singular: "secretproviderclass",
			Kind: "SecretProviderClass", ListKind: "SecretProviderClassList",
		},
		spec: ptr.To(object(map[string]apiextensionsv1.JSONSchemaProps{
			"provider":   str(),
			"parameters": strMap(),
			"secretObjects": array(object(map[string]apiextensionsv1.JSONSchemaProps{
				"secretName":  str(),
				"type":        str(),
				"labels":      strMap(),
				"annotations": strMap(),
				"data": array(object(map[string]apiextensionsv1.JSONSchemaProps{
					"objectName": str(),
					"key":        str(),
				})),
			})),
		})),
		status: map[string]map[string]string{
			"v1": {"status": "object"},
			"v1alpha1": {
				"status": "object", "status.byPod": "array", "status.byPod[]": "object",
				"status.byPod[].id": "string", "status.byPod[].namespace": "string",
			},
		},
		alphaWarning: &alphaWarning,
	},
	"secretproviderclasspodstatuses." + group: {
		names: apiextensionsv1.CustomResourceDefinitionNames{
			Plural: "secretproviderclasspodstatuses", Singular: "secretproviderclasspodstatus",
			Kind: "SecretProviderClassPodStatus", ListKind: "SecretProviderClassPodStatusList",
		},
		status: map[string]map[string]string{
			"v1":       podStatusFields,
			"v1alpha1": podStatusFields,
		},
	},
}

var podStatusFields = map[string]string{
	"status": "object", "status.podName": "string", "status.secretProviderClassName": "string",
	"status.mounted": "boolean", "status.targetPath": "string", "status.objects": "array",
	"status.objects[]": "object", "status.objects[].id": "string", "status.objects[].version": "string",
}

func str() apiextensionsv1.JSONSchemaProps { return apiextensionsv1.JSONSchemaProps{Type: "string"} }

func strMap() apiextensionsv1.JSONSchemaProps {
	s := str()
	return apiextensionsv1.JSONSchemaProps{
		Type:                 "object",
		AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &s},
	}
}

func array(item apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}}
}

func object(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
}

// withoutDescriptions returns s with every description removed.
func withoutDescriptions(s apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	s.Description = ""
	if s.Properties != nil {
		props := make(map[string]apiextensionsv1.JSONSchemaProps, len(s.Properties))
		for k, v := range s.Properties {
			props[k] = withoutDescriptions(v)
		}
		s.Properties = props
	}
	if s.Items != nil && s.Items.Schema != nil {
		item := withoutDescriptions(*s.Items.Schema)
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		v := withoutDescriptions(*s.AdditionalProperties.Schema)
		s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &v}
	}
	return s
}

// schemaPaths adds to out the type of s at path and of everything below it:
// "a.b" for a property, "a[]" for array items, "a{}" for map values.
func schemaPaths(out map[string]string, path string, s apiextensionsv1.JSONSchemaProps) {
	out[path] = s.Type
	for k, v := range s.Properties {
		schemaPaths(out, path+"."+k, v)
	}
	if s.Items != nil && s.Items.Schema != nil {
		schemaPaths(out, path+"[]", *s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		schemaPaths(out, path+"{}", *s.AdditionalProperties.Schema)
	}
}

// TestCRDsAsUpstream: the shipped CRDs have upstream's names (no short
// names), versions (v1 stored, v1alpha1 served and deprecated with
// upstream's warning), no subresources and upstream's spec schema; keymount
// adds fields to status only.
func TestCRDsAsUpstream(t *testing.T) {
	r := mustRender(t, deployFS(t), "/deploy")
	if got := crdNamesOfGroup(r.crds, group); !slices.Equal(got, slices.Sorted(maps.Keys(upstreamCRDs))) {
		t.Fatalf("%s CRDs %v, want upstream's %v", group, got, slices.Sorted(maps.Keys(upstreamCRDs)))
	}
	for name, want := range upstreamCRDs {
		t.Run(want.names.Kind, func(t *testing.T) {
			crd := r.crds[name]
			if diff := cmp.Diff(want.names, crd.Spec.Names); diff != "" {
				t.Errorf("names (-upstream +keymount):\n%s", diff)
			}
			if crd.Spec.Group != group || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				t.Errorf("group %q scope %q, want %s Namespaced", crd.Spec.Group, crd.Spec.Scope, group)
			}
			if c := crd.Spec.Conversion; c != nil && c.Strategy != apiextensionsv1.NoneConverter {
				t.Errorf("conversion %q, want None", c.Strategy)
			}
			if crd.Spec.PreserveUnknownFields {
				t.Error("preserveUnknownFields is set")
			}
			checkVersions(t, crd, want.alphaWarning)
			for _, v := range crd.Spec.Versions {
				checkSchema(t, v, want)
			}
		})
	}
}

// crdNamesOfGroup returns the sorted names of the CRDs of group g.
func crdNamesOfGroup(crds map[string]*apiextensionsv1.CustomResourceDefinition, g string) []string {
	var out []string
	for name, crd := range crds {
		if crd.Spec.Group == g {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func checkVersions(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, warning *string) {
	t.Helper()
	var names []string
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
		if s := v.Subresources; s != nil && (s.Status != nil || s.Scale != nil) {
			t.Errorf("%s has subresources %+v; upstream's has none", v.Name, *s)
		}
		switch v.Name {
		case "v1":
			if !v.Served || !v.Storage || v.Deprecated || v.DeprecationWarning != nil {
				t.Errorf("v1 served %v storage %v deprecated %v; want served, stored, not deprecated", v.Served, v.Storage, v.Deprecated)
			}
		case "v1alpha1":
			if !v.Served || v.Storage || !v.Deprecated {
				t.Errorf("v1alpha1 served %v storage %v deprecated %v; want served, not stored, deprecated", v.Served, v.Storage, v.Deprecated)
			}
			if diff := cmp.Diff(warning, v.DeprecationWarning); diff != "" {
				t.Errorf("v1alpha1 deprecation warning (-upstream +keymount):\n%s", diff)
			}
		}
	}
	if slices.Sort(names); !slices.Equal(names, []string{"v1", "v1alpha1"}) {
		t.Errorf("versions %v, want v1 and v1alpha1", names)
	}
	// Conversion None between versions loses nothing only when they agree.
	if len(crd.Spec.Versions) == 2 {
		if diff := cmp.Diff(crd.Spec.Versions[0].Schema, crd.Spec.Versions[1].Schema); diff != "" {
			t.Errorf("v1 and v1alpha1 schemas differ:\n%s", diff)
		}
	}
}

func checkSchema(t *testing.T, v apiextensionsv1.CustomResourceDefinitionVersion, want upstreamCRD) {
	t.Helper()
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		t.Fatalf("%s has no schema", v.Name)
	}
	root := v.Schema.OpenAPIV3Schema
	wantTop := []string{"apiVersion", "kind", "metadata", "status"}
	if want.spec != nil {
		wantTop = append(wantTop, "spec")
	}
	if got := slices.Sorted(maps.Keys(root.Properties)); !slices.Equal(got, slices.Sorted(slices.Values(wantTop))) {
		t.Errorf("%s top-level fields %v, want upstream's %v", v.Name, got, wantTop)
	}
	if want.spec != nil {
		if diff := cmp.Diff(*want.spec, withoutDescriptions(root.Properties["spec"])); diff != "" {
			t.Errorf("%s spec schema (-upstream +keymount):\n%s", v.Name, diff)
		}
	}
	got := map[string]string{}
	schemaPaths(got, "status", root.Properties["status"])
	for path, typ := range want.status[v.Name] {
		if got[path] != typ {
			t.Errorf("%s %s has type %q, want upstream's %q", v.Name, path, got[path], typ)
		}
	}
}
