package deploy_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// The facts of kubernetes-sigs/secrets-store-sync-controller v0.0.5's CRD
// (secretsyncs.secret-sync.x-k8s.io): keymount's must validate spec exactly
// as it does, and may only add to status.
const (
	syncGroup = "secret-sync.x-k8s.io"
	syncCRD   = "secretsyncs." + syncGroup

	// dnsSubdomain is the pattern of secretProviderClassName and
	// serviceAccountName.
	dnsSubdomain = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// syncPath is the pattern of sourcePath and targetKey.
	syncPath = `^[A-Za-z0-9.]([-A-Za-z0-9]+([-._a-zA-Z0-9]?[A-Za-z0-9])*)?(\/([0-9]+))*$`
	// reservedRule refuses label and annotation keys with the controller's
	// prefix.
	reservedRule = "(self.all(x, x.startsWith('secrets-store.sync.x-k8s.io') == false))"
)

func syncString(minLen, maxLen *int64, pattern string) apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{Type: "string", MinLength: minLen, MaxLength: maxLen, Pattern: pattern}
}

func withRules(s apiextensionsv1.JSONSchemaProps, rules ...apiextensionsv1.ValidationRule) apiextensionsv1.JSONSchemaProps {
	s.XValidations = rules
	return s
}

// upstreamSyncSpec is v0.0.5's schema of .spec, without descriptions.
func upstreamSyncSpec() apiextensionsv1.JSONSchemaProps {
	one, max253 := ptr.To[int64](1), ptr.To[int64](253)
	data := object(map[string]apiextensionsv1.JSONSchemaProps{
		"sourcePath": syncString(one, max253, syncPath),
		"targetKey":  syncString(one, max253, syncPath),
	})
	data.Required = []string{"sourcePath", "targetKey"}
	dataList := array(data)
	dataList.MinItems = one
	dataList.XListType = ptr.To("map")
	dataList.XListMapKeys = []string{"targetKey"}

	secretType := syncString(nil, nil, `^[^\s]+$`)
	secretType.Default = &apiextensionsv1.JSON{Raw: []byte(`"Opaque"`)}

	secretObject := object(map[string]apiextensionsv1.JSONSchemaProps{
		"type": secretType,
		"data": dataList,
		"labels": withRules(strMap(),
			apiextensionsv1.ValidationRule{
				Rule:    "(self.all(x, x.size() <= 317 && self[x].size() <= 63) == true)",
				Message: "Label keys must not exceed 317 characters (254 for prefix+separator, 63 for name), label values must not exceed 63 characters.",
			},
			apiextensionsv1.ValidationRule{
				Rule:    reservedRule,
				Message: "Labels should not contain secrets-store.sync.x-k8s.io. This key is reserved for the controller.",
			}),
		"annotations": withRules(strMap(),
			apiextensionsv1.ValidationRule{
				Rule:    "(self.all(x, x.size() < 317 && self[x].size() <= 262144) == true)",
				Message: "Annotations keys must not exceed 317 characters (254 for prefix+separator, 63 for name), annotation values must not exceed 256 kB.",
			},
			apiextensionsv1.ValidationRule{
				Rule:    reservedRule,
				Message: "Annotations should not contain secrets-store.sync.x-k8s.io. This key is reserved for the controller.",
			}),
	})
	secretObject.Required = []string{"data"}

	controllerName := str()
	controllerName.Default = &apiextensionsv1.JSON{Raw: []byte(`""`)}

	spec := object(map[string]apiextensionsv1.JSONSchemaProps{
		"secretSyncControllerName": controllerName,
		"secretProviderClassName":  syncString(one, max253, dnsSubdomain),
		"serviceAccountName":       syncString(one, max253, dnsSubdomain),
		"secretObject":             secretObject,
		"forceSynchronization":     syncString(nil, max253, `^[A-Za-z0-9]([-A-Za-z0-9]+([-._a-zA-Z0-9]?[A-Za-z0-9])*)?$`),
	})
	spec.Required = []string{"secretObject", "secretProviderClassName", "serviceAccountName"}
	return spec
}

// upstreamSyncStatus are v0.0.5's status fields, as paths and types.
var upstreamSyncStatus = map[string]string{
	"status": "object", "status.syncHash": "string", "status.lastSuccessfulSyncTime": "string",
	"status.conditions": "array", "status.conditions[]": "object",
	"status.conditions[].type": "string", "status.conditions[].status": "string",
	"status.conditions[].reason": "string", "status.conditions[].message": "string",
	"status.conditions[].lastTransitionTime": "string", "status.conditions[].observedGeneration": "integer",
}

// TestShippedCRDs: deploy/ applies the upstream driver's two CRDs, the
// sync controller's one, mirrors' SecretMirror and keymount's PushSecret,
// nothing else.
func TestShippedCRDs(t *testing.T) {
	r := mustRender(t, deployFS(t), "/deploy")
	want := append(slices.Sorted(maps.Keys(upstreamCRDs)), syncCRD, mirrorCRD, "pushsecrets.keymount.io")
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(r.crds)); !slices.Equal(got, want) {
		t.Fatalf("CRDs %v, want %v", got, want)
	}
}

// TestSecretSyncCRDAsSyncController: the SecretSync CRD has the sync
// controller v0.0.5's names (no short names), scope, single version with the
// status subresource, and exactly its spec schema (patterns, lengths,
// defaults, required fields, list semantics, CEL rules and messages);
// keymount adds status fields only.
func TestSecretSyncCRDAsSyncController(t *testing.T) {
	crd := mustRender(t, deployFS(t), "/deploy").crds[syncCRD]
	if crd == nil {
		t.Fatalf("deploy/ has no %s", syncCRD)
	}
	wantNames := apiextensionsv1.CustomResourceDefinitionNames{
		Plural: "secretsyncs", Singular: "secretsync", Kind: "SecretSync", ListKind: "SecretSyncList",
	}
	if diff := cmp.Diff(wantNames, crd.Spec.Names); diff != "" {
		t.Errorf("names (-upstream +keymount):\n%s", diff)
	}
	if crd.Spec.Group != syncGroup || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("group %q scope %q, want %s Namespaced", crd.Spec.Group, crd.Spec.Scope, syncGroup)
	}
	root := checkSyncVersion(t, crd)
	if got := slices.Sorted(maps.Keys(root.Properties)); !slices.Equal(got, []string{"apiVersion", "kind", "metadata", "spec", "status"}) {
		t.Errorf("top-level fields %v", got)
	}
	if len(root.Required) != 0 {
		t.Errorf("top-level required %v; upstream requires nothing there", root.Required)
	}
	if diff := cmp.Diff(upstreamSyncSpec(), withoutDescriptions(root.Properties["spec"])); diff != "" {
		t.Errorf("spec schema (-upstream +keymount):\n%s", diff)
	}
	got := map[string]string{}
	schemaPaths(got, "status", root.Properties["status"])
	for path, typ := range upstreamSyncStatus {
		if got[path] != typ {
			t.Errorf("%s has type %q, want upstream's %q", path, got[path], typ)
		}
	}
	conds := root.Properties["status"].Properties["conditions"]
	if conds.MaxItems == nil || *conds.MaxItems != 16 || ptr.Deref(conds.XListType, "") != "map" || !slices.Equal(conds.XListMapKeys, []string{"type"}) {
		t.Errorf("status.conditions: maxItems %v list type %v keys %v, want upstream's 16, map, [type]",
			ptr.Deref(conds.MaxItems, 0), ptr.Deref(conds.XListType, ""), conds.XListMapKeys)
	}
}

// checkSyncVersion checks the SecretSync CRD's one version, v1alpha1 as
// v0.0.5's (served, stored, with the status subresource), and returns its
// schema.
func checkSyncVersion(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions, want v1alpha1 only", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1alpha1" || !v.Served || !v.Storage || v.Deprecated {
		t.Errorf("version %s served %v storage %v deprecated %v; want v1alpha1 served, stored, not deprecated", v.Name, v.Served, v.Storage, v.Deprecated)
	}
	if v.Subresources == nil || v.Subresources.Status == nil || v.Subresources.Scale != nil {
		t.Errorf("subresources %+v, want status only", v.Subresources)
	}
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		t.Fatal("v1alpha1 has no schema")
	}
	return v.Schema.OpenAPIV3Schema
}
