// Package keymount_test renders keymount's Helm chart with Helm's own
// library (the code of `helm lint` and `helm template`, no helm binary) and
// checks what comes out: with its defaults, with the upstream chart's
// values files unchanged, and with every feature on.
package keymount_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The release the tests render: named as the kustomize base names its
// objects, in the namespace it deploys to.
const (
	chartDir    = "."
	releaseName = "keymount"
	namespace   = "kube-system"
)

// Values files, relative to the chart.
const (
	upstreamValues    = "testdata/upstream-v1.6-values.yaml"
	upstreamOtherKeys = "testdata/upstream-other-keys.yaml"
	allFeatures       = "testdata/all-features.yaml"
)

// valuesFiles are the files every render test runs with; "" is the chart's
// defaults alone.
var valuesFiles = []string{"", upstreamValues, upstreamOtherKeys, allFeatures}

// kubeVersion is the Kubernetes version of the test control plane.
var kubeVersion = chartutil.KubeVersion{Version: "v1.37.1", Major: "1", Minor: "37"}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load the chart: %v", err)
	}
	return ch
}

// readValues reads a values file; "" is no values.
func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	vals, err := chartutil.ReadValuesFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	return vals
}

// merge returns the values of files given in order, as `helm -f a -f b`:
// maps merge, a later file's other values win.
func merge(layers ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, l := range layers {
		mergeInto(out, l)
	}
	return out
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeInto(dm, sm)
				continue
			}
			cp := map[string]any{}
			mergeInto(cp, sm)
			dst[k] = cp
			continue
		}
		dst[k] = v
	}
}

// renderRaw renders the chart's templates with vals as `helm template`
// does and returns the manifests by template name, without NOTES.txt and
// the empty ones.
func renderRaw(ch *chart.Chart, vals map[string]any) (map[string]string, error) {
	return renderRawAt(ch, vals, kubeVersion)
}

// renderRawAt is renderRaw for a cluster of version kv.
func renderRawAt(ch *chart.Chart, vals map[string]any, kv chartutil.KubeVersion) (map[string]string, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kv
	opts := chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValues(ch, vals, opts, caps)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	for name, text := range out {
		if strings.HasSuffix(name, "NOTES.txt") || strings.TrimSpace(text) == "" {
			delete(out, name)
		}
	}
	return out, nil
}

// release is what one render produced, decoded.
type release struct {
	objects      []*unstructured.Unstructured
	daemonSets   map[string]*appsv1.DaemonSet
	clusterRoles map[string]*rbacv1.ClusterRole
	bindings     map[string]*rbacv1.ClusterRoleBinding
	csiDriver    *storagev1.CSIDriver
	services     map[string]*corev1.Service
	policies     map[string]*admissionregistrationv1.ValidatingAdmissionPolicy
	policyBinds  map[string]*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	deployments  map[string]*appsv1.Deployment
	pdbs         map[string]*policyv1.PodDisruptionBudget
	roles        map[string]*rbacv1.Role
	roleBindings map[string]*rbacv1.RoleBinding
	// prometheusRule is the alert examples (metrics.prometheusRule).
	prometheusRule *prometheusRule
	// serviceAccounts and secrets by name.
	serviceAccounts map[string]*corev1.ServiceAccount
	secrets         map[string]*corev1.Secret
}

// render renders the chart with the values of files (merged in order) and
// decodes every object strictly: a field Kubernetes does not know fails.
func render(t *testing.T, files ...string) *release {
	t.Helper()
	var layers []map[string]any
	for _, f := range files {
		layers = append(layers, readValues(t, f))
	}
	return renderValues(t, merge(layers...))
}

func renderValues(t *testing.T, vals map[string]any) *release {
	t.Helper()
	return renderValuesAt(t, vals, kubeVersion)
}

// renderValuesAt is renderValues for a cluster of Kubernetes version kv (the
// chart asks .Capabilities.KubeVersion for fields a version knows).
func renderValuesAt(t *testing.T, vals map[string]any, kv chartutil.KubeVersion) *release {
	t.Helper()
	out, err := renderRawAt(loadChart(t), vals, kv)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	r := &release{
		daemonSets:   map[string]*appsv1.DaemonSet{},
		clusterRoles: map[string]*rbacv1.ClusterRole{},
		bindings:     map[string]*rbacv1.ClusterRoleBinding{},
		services:     map[string]*corev1.Service{},
		policies:     map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{},
		policyBinds:  map[string]*admissionregistrationv1.ValidatingAdmissionPolicyBinding{},
		deployments:  map[string]*appsv1.Deployment{},
		pdbs:         map[string]*policyv1.PodDisruptionBudget{},
		roles:        map[string]*rbacv1.Role{},
		roleBindings: map[string]*rbacv1.RoleBinding{},

		serviceAccounts: map[string]*corev1.ServiceAccount{},
		secrets:         map[string]*corev1.Secret{},
	}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		for _, doc := range releaseutil.SplitManifests(out[name]) {
			r.add(t, name, doc)
		}
	}
	return r
}

func (r *release) add(t *testing.T, template, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("%s: %v\n%s", template, err, doc)
	}
	if len(u.Object) == 0 {
		return
	}
	r.objects = append(r.objects, u)
	var target any
	switch u.GetKind() {
	case "DaemonSet":
		ds := &appsv1.DaemonSet{}
		r.daemonSets[u.GetName()] = ds
		target = ds
	case "ClusterRole":
		role := &rbacv1.ClusterRole{}
		r.clusterRoles[u.GetName()] = role
		target = role
	case "ClusterRoleBinding":
		b := &rbacv1.ClusterRoleBinding{}
		r.bindings[u.GetName()] = b
		target = b
	case "CSIDriver":
		r.csiDriver = &storagev1.CSIDriver{}
		target = r.csiDriver
	case "Service":
		svc := &corev1.Service{}
		r.services[u.GetName()] = svc
		target = svc
	case "ServiceAccount":
		sa := &corev1.ServiceAccount{}
		r.serviceAccounts[u.GetName()] = sa
		target = sa
	case "Secret":
		sec := &corev1.Secret{}
		r.secrets[u.GetName()] = sec
		target = sec
	case "ValidatingAdmissionPolicy":
		p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		r.policies[u.GetName()] = p
		target = p
	case "ValidatingAdmissionPolicyBinding":
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		r.policyBinds[u.GetName()] = b
		target = b
	case "Deployment":
		d := &appsv1.Deployment{}
		r.deployments[u.GetName()] = d
		target = d
	case "PodDisruptionBudget":
		p := &policyv1.PodDisruptionBudget{}
		r.pdbs[u.GetName()] = p
		target = p
	case "Role":
		role := &rbacv1.Role{}
		r.roles[u.GetName()] = role
		target = role
	case "RoleBinding":
		b := &rbacv1.RoleBinding{}
		r.roleBindings[u.GetName()] = b
		target = b
	case "PriorityClass":
		return
	case "PrometheusRule":
		rule := &prometheusRule{}
		r.prometheusRule = rule
		target = rule
	default:
		t.Fatalf("%s renders a %s, which the tests do not know", template, u.GetKind())
	}
	if err := yaml.UnmarshalStrict([]byte(doc), target); err != nil {
		t.Fatalf("%s: decode %s/%s: %v", template, u.GetKind(), u.GetName(), err)
	}
}

// driver returns the node DaemonSet and its driver container (named
// secrets-store, as upstream's).
func (r *release) driver(t *testing.T) (*appsv1.DaemonSet, *corev1.Container) {
	t.Helper()
	ds := r.daemonSets[releaseName]
	if ds == nil {
		t.Fatalf("no DaemonSet %s: %v", releaseName, slices.Sorted(maps.Keys(r.daemonSets)))
	}
	return ds, container(t, &ds.Spec.Template.Spec, driverContainer)
}

func container(t *testing.T, spec *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %s in the pod spec", name)
	return nil
}

// hasArg reports whether args has arg exactly.
func hasArg(args []string, arg string) bool { return slices.Contains(args, arg) }

// TestRenders: the chart renders with each values file, and every object
// decodes strictly into its Kubernetes type.
func TestRenders(t *testing.T) {
	for _, f := range valuesFiles {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := render(t, f)
			if len(r.objects) == 0 || r.csiDriver == nil {
				t.Fatalf("rendered %d objects, no CSIDriver", len(r.objects))
			}
		})
	}
}

// TestChartCRDsAreDeploys: the chart's crds/ are byte for byte the CRDs the
// kustomize base applies (deploy/crds), so the two installs never differ in
// their API.
func TestChartCRDsAreDeploys(t *testing.T) {
	const deployCRDs = "../../crds"
	list := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	chartNames, deployNames := list("crds"), list(deployCRDs)
	if !slices.Equal(chartNames, deployNames) {
		t.Fatalf("chart crds/ %v, deploy/crds %v: want the same files (cp deploy/crds/*.yaml deploy/charts/keymount/crds/)", chartNames, deployNames)
	}
	for _, name := range chartNames {
		a, err := os.ReadFile(filepath.Join("crds", name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(deployCRDs, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("crds/%s differs from deploy/crds/%s: copy it again (cp deploy/crds/*.yaml deploy/charts/keymount/crds/)", name, name)
		}
	}
	if got := len(loadChart(t).CRDObjects()); got != len(deployNames) {
		t.Errorf("Helm loads %d CRDs from crds/, want %d", got, len(deployNames))
	}
}
