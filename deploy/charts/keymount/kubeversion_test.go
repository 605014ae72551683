package keymount_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// oldestKubernetes reads the oldest Kubernetes release docs/compatibility.md
// claims, the one hack/k8s-oldest pins ("v1.34.4"), and its minor.
func oldestKubernetes(t *testing.T) (version string, minor int) {
	t.Helper()
	data, err := os.ReadFile("../../../hack/k8s-oldest/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^require k8s\.io/kubernetes (v1\.(\d+)\.\d+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("hack/k8s-oldest/go.mod requires no k8s.io/kubernetes v1.x.y")
	}
	if _, err := fmt.Sscan(string(m[2]), &minor); err != nil {
		t.Fatal(err)
	}
	return string(m[1]), minor
}

// kubeAt is the KubeVersion capability of Kubernetes version v ("v1.34.4").
func kubeAt(t *testing.T, v string) chartutil.KubeVersion {
	t.Helper()
	kv, err := chartutil.ParseKubeVersion(v)
	if err != nil {
		t.Fatal(err)
	}
	return *kv
}

// installClientOnly runs `helm install --dry-run` without a cluster, as
// `helm template --kube-version kv` does, with vals.
func installClientOnly(t *testing.T, vals map[string]any, kv string) error {
	t.Helper()
	in := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	in.ClientOnly, in.DryRun, in.ReleaseName, in.Namespace = true, true, releaseName, namespace
	v := kubeAt(t, kv)
	in.KubeVersion = &v
	_, err := in.Run(loadChart(t), vals)
	return err
}

// TestChartKubeVersion: Chart.yaml declares the Kubernetes versions the
// chart supports, from the oldest docs/compatibility.md claims (the minor
// hack/k8s-oldest pins) on, with providers' pre-release suffixes; Helm
// installs the chart with every feature on for that release, a provider's
// build of it and the newest tested, and refuses the minor before it,
// naming the version.
func TestChartKubeVersion(t *testing.T) {
	oldest, minor := oldestKubernetes(t)
	ch := loadChart(t)
	if want := fmt.Sprintf(">=1.%d.0-0", minor); ch.Metadata.KubeVersion != want {
		t.Errorf("Chart.yaml kubeVersion %q, want %q (hack/k8s-oldest is %s)", ch.Metadata.KubeVersion, want, oldest)
	}
	all := readValues(t, allFeatures)
	for _, v := range []string{oldest, oldest + "-eks-1b2c3d4", kubeVersion.Version} {
		if err := installClientOnly(t, all, v); err != nil {
			t.Errorf("install for Kubernetes %s: %v", v, err)
		}
	}
	older := fmt.Sprintf("v1.%d.9", minor-1)
	err := installClientOnly(t, map[string]any{}, older)
	if err == nil || !strings.Contains(err.Error(), older) || !strings.Contains(err.Error(), ch.Metadata.KubeVersion) {
		t.Errorf("install for Kubernetes %s: %v, want a refusal naming it and %s", older, err, ch.Metadata.KubeVersion)
	}
}

// TestAdmissionPoliciesRefusedWhereNotEnforced: rendered for a Kubernetes
// that cannot enforce ValidatingAdmissionPolicies (before 1.30; what
// `helm lint` or a chart with its kubeVersion edited would reach), the
// values whose RBAC the guard rails bound fail the render, naming the value
// and the version; the same values render on 1.30, and the chart without
// them renders on 1.29.
func TestAdmissionPoliciesRefusedWhereNotEnforced(t *testing.T) {
	ch := loadChart(t)
	controller := map[string]any{"controller": map[string]any{"enabled": true}}
	for name, vals := range map[string]map[string]any{
		"controller":                 controller,
		"controller and restart":     merge(controller, map[string]any{"restartOnChange": map[string]any{"enabled": true}}),
		"testdata/all-features.yaml": readValues(t, allFeatures),
	} {
		_, err := renderRawAt(ch, vals, kubeAt(t, "v1.29.7"))
		if err == nil || !strings.Contains(err.Error(), "v1.29.7") || !strings.Contains(err.Error(), "ValidatingAdmissionPolicies") ||
			!strings.Contains(err.Error(), "controller.enabled:") && !strings.Contains(err.Error(), "restartOnChange.enabled:") {
			t.Errorf("%s for v1.29.7: %v, want a failure naming the value and the version", name, err)
		}
		if _, err := renderRawAt(ch, vals, kubeAt(t, "v1.30.0")); err != nil {
			t.Errorf("%s for v1.30.0: %v", name, err)
		}
	}
	// Each template's own guard names its value: the chart without the
	// other template.
	restart := merge(controller, map[string]any{"restartOnChange": map[string]any{"enabled": true}})
	for template, value := range map[string]string{
		"templates/admission-controller.yaml":        "restartOnChange.enabled:",
		"templates/admission-restart-on-change.yaml": "controller.enabled:",
	} {
		without := loadChart(t)
		without.Templates = slices.DeleteFunc(without.Templates, func(f *chart.File) bool { return f.Name == template })
		if _, err := renderRawAt(without, restart, kubeAt(t, "v1.29.7")); err == nil || !strings.Contains(err.Error(), value) {
			t.Errorf("without %s, render for v1.29.7: %v, want a failure naming %s", template, err, value)
		}
	}
	if _, err := renderRawAt(ch, map[string]any{}, kubeAt(t, "v1.29.7")); err != nil {
		t.Errorf("the defaults for v1.29.7: %v", err)
	}
}

// notesAt renders NOTES.txt with vals for Kubernetes kv.
func notesAt(t *testing.T, vals map[string]any, kv chartutil.KubeVersion) string {
	t.Helper()
	ch := loadChart(t)
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kv
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatal(err)
	}
	notes, ok := out["keymount/templates/NOTES.txt"]
	if !ok {
		t.Fatal("no NOTES.txt rendered")
	}
	return notes
}

// TestNotesNameWhatTheVersionTurnsOff: on the oldest supported Kubernetes,
// which has no CSIDriver serviceAccountTokenInSecrets, the chart leaves the
// field out and NOTES.txt says so, naming the value and the version; on the
// newest it sets it and says nothing.
func TestNotesNameWhatTheVersionTurnsOff(t *testing.T) {
	oldest, _ := oldestKubernetes(t)
	vals := readValues(t, allFeatures)
	old := renderValuesAt(t, vals, kubeAt(t, oldest))
	if old.csiDriver.Spec.ServiceAccountTokenInSecrets != nil {
		t.Errorf("CSIDriver on %s sets serviceAccountTokenInSecrets", oldest)
	}
	notes := notesAt(t, vals, kubeAt(t, oldest))
	if !strings.Contains(notes, "serviceAccountTokenInSecrets is off") || !strings.Contains(notes, oldest) {
		t.Errorf("NOTES.txt on %s does not name serviceAccountTokenInSecrets and the version:\n%s", oldest, notes)
	}
	if notes := notesAt(t, vals, kubeVersion); strings.Contains(notes, "serviceAccountTokenInSecrets") {
		t.Errorf("NOTES.txt on %s names serviceAccountTokenInSecrets:\n%s", kubeVersion.Version, notes)
	}
	if r := render(t, allFeatures); r.csiDriver.Spec.ServiceAccountTokenInSecrets == nil || !*r.csiDriver.Spec.ServiceAccountTokenInSecrets {
		t.Errorf("CSIDriver on %s: serviceAccountTokenInSecrets not set", kubeVersion.Version)
	}
}
