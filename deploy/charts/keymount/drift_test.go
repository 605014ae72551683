package keymount_test

import (
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// deployDir is the kustomize base, relative to the chart.
const deployDir = "../.."

// kustomized is what a kustomization renders to.
type kustomized struct {
	objects      []*unstructured.Unstructured
	daemonSets   map[string]*appsv1.DaemonSet
	clusterRoles map[string]*rbacv1.ClusterRole
	csiDriver    *storagev1.CSIDriver
	policies     map[string]*admissionregistrationv1.ValidatingAdmissionPolicy
	policyBinds  map[string]*admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// kustomize renders the kustomization in deploy/ dir with components, as
// `kubectl apply -k` of an overlay listing them does.
func kustomize(t *testing.T, dir string, components ...string) *kustomized {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(deployDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "charts" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(deployDir, p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/deploy", filepath.ToSlash(rel)), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../deploy/" + dir + "\n"
	if len(components) > 0 {
		k += "components:\n"
		for _, c := range components {
			k += "  - ../deploy/components/" + c + "\n"
		}
	}
	if err := mem.WriteFile("/overlay/kustomization.yaml", []byte(k)); err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/overlay")
	if err != nil {
		t.Fatalf("kustomize deploy/%s with %v: %v", dir, components, err)
	}
	out := &kustomized{
		daemonSets: map[string]*appsv1.DaemonSet{}, clusterRoles: map[string]*rbacv1.ClusterRole{},
		policies:    map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{},
		policyBinds: map[string]*admissionregistrationv1.ValidatingAdmissionPolicyBinding{},
	}
	for _, r := range res.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			t.Fatal(err)
		}
		out.objects = append(out.objects, u)
		target := out.target(r.GetKind(), r.GetName())
		if target == nil {
			continue
		}
		if err := yaml.UnmarshalStrict(data, target); err != nil {
			t.Fatalf("decode %s/%s: %v", r.GetKind(), r.GetName(), err)
		}
	}
	return out
}

// target returns the typed object a rendered object of kind decodes into,
// kept by name; nil for a kind the tests do not compare.
func (k *kustomized) target(kind, name string) any {
	switch kind {
	case "DaemonSet":
		ds := &appsv1.DaemonSet{}
		k.daemonSets[name] = ds
		return ds
	case "ClusterRole":
		role := &rbacv1.ClusterRole{}
		k.clusterRoles[name] = role
		return role
	case "CSIDriver":
		k.csiDriver = &storagev1.CSIDriver{}
		return k.csiDriver
	case "ValidatingAdmissionPolicy":
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		k.policies[name] = p
		return p
	case "ValidatingAdmissionPolicyBinding":
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		k.policyBinds[name] = b
		return b
	}
	return nil
}

// podSpecToCompare returns the pod spec of ds as the drift test compares it: the
// container named main without its image and pull policy (the chart names
// the release image, kustomize a local one), every container's args sorted,
// and --sync-secrets spelt out (kustomize's component passes the bare flag;
// the chart passes =false where the base passes none: dropped, since
// without the secret-sync RBAC auto means off).
func podSpecToCompare(t *testing.T, ds *appsv1.DaemonSet, main string) corev1.PodSpec {
	t.Helper()
	if ds == nil {
		t.Fatal("no DaemonSet")
	}
	spec := *ds.Spec.Template.Spec.DeepCopy()
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.Name == main {
			c.Image = ""
		}
		c.ImagePullPolicy = ""
		var args []string
		for _, a := range c.Args {
			switch a {
			case "--sync-secrets":
				a = "--sync-secrets=true"
			case "--sync-secrets=false":
				continue
			}
			args = append(args, a)
		}
		slices.Sort(args)
		c.Args = args
	}
	return spec
}

// TestDriverMatchesKustomize: the chart's node DaemonSet is the kustomize
// base's (the pod spec but the image, the update strategy, the default
// container), the CSIDriver's spec is the same, and so are the rules of
// every ClusterRole both ship, for the base and for each component against
// the chart values that mean the same.
func TestDriverMatchesKustomize(t *testing.T) {
	awsAudiences := []any{
		map[string]any{"audience": "sts.amazonaws.com"}, map[string]any{"audience": "pods.eks.amazonaws.com"},
	}
	cases := []struct {
		name       string
		values     map[string]any
		components []string
	}{
		// The chart sets serviceAccountTokenInSecrets where the API server
		// takes it (1.35+, as the test's, and with tokenRequests); the base
		// leaves it to a component listed after token-audiences.
		{name: "base"},
		{name: "base without the field", values: map[string]any{"serviceAccountTokenInSecrets": false}},
		{name: "secret-sync", values: map[string]any{"syncSecret": map[string]any{"enabled": true}}, components: []string{"secret-sync"}},
		{name: "registrar-sidecar", values: map[string]any{"linux": map[string]any{"registrar": map[string]any{"enabled": true}}}, components: []string{"registrar-sidecar"}},
		{name: "restart-on-change", values: map[string]any{"restartOnChange": map[string]any{"enabled": true}, "controller": map[string]any{"enabled": true}},
			components: []string{"restart-on-change", "controller", "controller-admission", "push-admission"}},
		{name: "fanout", values: map[string]any{"controller": map[string]any{"enabled": true, "fanout": map[string]any{"enabled": true}}},
			components: []string{"controller", "controller-admission", "push-admission", "fanout"}},
		{name: "token-audiences", values: map[string]any{"serviceAccountTokenInSecrets": false, "tokenRequests": awsAudiences}, components: []string{"token-audiences"}},
		{name: "token-in-secrets", values: map[string]any{"tokenRequests": awsAudiences}, components: []string{"token-audiences", "token-in-secrets"}},
		{name: "all components", values: map[string]any{
			"syncSecret":      map[string]any{"enabled": true},
			"restartOnChange": map[string]any{"enabled": true},
			"controller":      map[string]any{"enabled": true},
			"linux":           map[string]any{"registrar": map[string]any{"enabled": true}},
			"tokenRequests":   awsAudiences,
		}, components: []string{"secret-sync", "registrar-sidecar", "restart-on-change", "token-audiences", "token-in-secrets", "controller", "controller-admission", "push-admission"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := kustomize(t, "", tc.components...)
			r := renderValues(t, tc.values)
			chartDS, _ := r.driver(t)
			kustDS := k.daemonSets["keymount"]
			if diff := cmp.Diff(podSpecToCompare(t, kustDS, driverContainer), podSpecToCompare(t, chartDS, driverContainer)); diff != "" {
				t.Errorf("driver pod spec (-kustomize +chart):\n%s", diff)
			}
			// The same selector: `helm install --take-ownership` adopts the
			// base's DaemonSet (a selector cannot change).
			if diff := cmp.Diff(kustDS.Spec.Selector, chartDS.Spec.Selector); diff != "" {
				t.Errorf("selector (-kustomize +chart):\n%s", diff)
			}
			if diff := cmp.Diff(kustDS.Spec.UpdateStrategy, chartDS.Spec.UpdateStrategy); diff != "" {
				t.Errorf("update strategy (-kustomize +chart):\n%s", diff)
			}
			key := "kubectl.kubernetes.io/default-container"
			if a, b := kustDS.Spec.Template.Annotations[key], chartDS.Spec.Template.Annotations[key]; a != b {
				t.Errorf("%s: kustomize %q, chart %q", key, a, b)
			}
			if diff := cmp.Diff(k.csiDriver.Spec, r.csiDriver.Spec); diff != "" {
				t.Errorf("CSIDriver spec (-kustomize +chart):\n%s", diff)
			}
			compareRoles(t, k.clusterRoles, r.clusterRoles)
			comparePolicies(t, k, r)
		})
	}
}

// compareRoles: both ship the same ClusterRoles (by name) with the same
// rules and aggregation labels.
func compareRoles(t *testing.T, kust, chart map[string]*rbacv1.ClusterRole) {
	t.Helper()
	names := func(m map[string]*rbacv1.ClusterRole) []string {
		var out []string
		for n := range m {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	if diff := cmp.Diff(names(kust), names(chart)); diff != "" {
		t.Errorf("ClusterRoles (-kustomize +chart):\n%s", diff)
	}
	for name, kr := range kust {
		cr := chart[name]
		if cr == nil {
			continue
		}
		if diff := cmp.Diff(kr.Rules, cr.Rules); diff != "" {
			t.Errorf("ClusterRole %s rules (-kustomize +chart):\n%s", name, diff)
		}
		for l, v := range kr.Labels {
			if strings.HasPrefix(l, "rbac.authorization.k8s.io/") && cr.Labels[l] != v {
				t.Errorf("ClusterRole %s: label %s=%q, chart has %q", name, l, v, cr.Labels[l])
			}
		}
	}
}

// comparePolicies: both ship the same admission policies (by name), with
// the same spec, bound the same way.
func comparePolicies(t *testing.T, k *kustomized, r *release) {
	t.Helper()
	if diff := cmp.Diff(slices.Sorted(maps.Keys(k.policies)), slices.Sorted(maps.Keys(r.policies))); diff != "" {
		t.Errorf("ValidatingAdmissionPolicies (-kustomize +chart):\n%s", diff)
	}
	for name, kp := range k.policies {
		if cp := r.policies[name]; cp != nil {
			if diff := cmp.Diff(kp.Spec, cp.Spec); diff != "" {
				t.Errorf("ValidatingAdmissionPolicy %s spec (-kustomize +chart):\n%s", name, diff)
			}
		}
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(k.policyBinds)), slices.Sorted(maps.Keys(r.policyBinds))); diff != "" {
		t.Errorf("ValidatingAdmissionPolicyBindings (-kustomize +chart):\n%s", diff)
	}
	for name, kb := range k.policyBinds {
		if cb := r.policyBinds[name]; cb != nil {
			if diff := cmp.Diff(kb.Spec, cb.Spec); diff != "" {
				t.Errorf("ValidatingAdmissionPolicyBinding %s spec (-kustomize +chart):\n%s", name, diff)
			}
		}
	}
}

// TestAWSProviderMatchesKustomize: the chart's AWS provider DaemonSet is
// deploy/providers/aws's (the pod spec but the image), with the same
// ClusterRole rules, and it adds the audiences the token-audiences
// component adds.
func TestAWSProviderMatchesKustomize(t *testing.T) {
	k := kustomize(t, "providers/aws")
	r := renderValues(t, map[string]any{"providers": map[string]any{"aws": map[string]any{"enabled": true}}})
	const name = "keymount-provider-aws"
	if diff := cmp.Diff(podSpecToCompare(t, k.daemonSets[name], "provider"), podSpecToCompare(t, r.daemonSets[name], "provider")); diff != "" {
		t.Errorf("AWS provider pod spec (-kustomize +chart):\n%s", diff)
	}
	if diff := cmp.Diff(k.daemonSets[name].Spec.Selector, r.daemonSets[name].Spec.Selector); diff != "" {
		t.Errorf("AWS provider selector (-kustomize +chart):\n%s", diff)
	}
	if r.clusterRoles[name] == nil {
		t.Fatalf("the chart renders no ClusterRole %s", name)
	}
	if diff := cmp.Diff(k.clusterRoles[name].Rules, r.clusterRoles[name].Rules); diff != "" {
		t.Errorf("AWS provider rules (-kustomize +chart):\n%s", diff)
	}
	audiences := kustomize(t, "", "token-audiences").csiDriver.Spec.TokenRequests
	if diff := cmp.Diff(audiences, r.csiDriver.Spec.TokenRequests); diff != "" {
		t.Errorf("token requests with providers.aws (-token-audiences component +chart):\n%s", diff)
	}
}
