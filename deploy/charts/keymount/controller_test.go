package keymount_test

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// controllerName names keymount-controller's objects in the test release:
// <fullname>-controller, the ServiceAccount the guard rails bind.
const controllerName = releaseName + "-controller"

// controllerOn is the one value that turns keymount-controller on.
var controllerOn = map[string]any{"controller": map[string]any{"enabled": true}}

// controller returns keymount-controller's Deployment and its controller
// container.
func (r *release) controller(t *testing.T) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	d := r.deployments[controllerName]
	if d == nil {
		t.Fatalf("no Deployment %s: %v", controllerName, slices.Sorted(maps.Keys(r.deployments)))
	}
	return d, container(t, &d.Spec.Template.Spec, "controller")
}

// controllerObjects lists the objects of keymount-controller a render holds
// (kind/name), its admission policies aside.
func (r *release) controllerObjects() []string {
	var out []string
	for _, o := range r.objects {
		if strings.HasPrefix(o.GetName(), controllerName) && !strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			out = append(out, o.GetKind()+"/"+o.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// TestControllerOptIn: keymount-controller is off by default and with the
// upstream driver chart's values; controller.enabled alone installs its
// ServiceAccount, Deployment, PodDisruptionBudget, metrics Service and RBAC.
func TestControllerOptIn(t *testing.T) {
	for _, f := range []string{"", upstreamValues, upstreamOtherKeys} {
		if got := render(t, f).controllerObjects(); len(got) > 0 {
			t.Errorf("values %q: controller off, yet %v rendered", f, got)
		}
	}
	got := renderValues(t, controllerOn).controllerObjects()
	want := []string{
		"ClusterRole/" + controllerName, "ClusterRoleBinding/" + controllerName,
		"Deployment/" + controllerName, "PodDisruptionBudget/" + controllerName,
		"Role/" + controllerName + "-leader-election", "RoleBinding/" + controllerName + "-leader-election",
		"Service/" + controllerName + "-metrics", "ServiceAccount/" + controllerName,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("controller.enabled: objects (-want +got):\n%s", diff)
	}
}

// TestControllerDeployment: with controller.enabled alone, two
// leader-elected replicas (the Lease in the release namespace) that prefer
// different nodes, kept by a PodDisruptionBudget; the sync controller's
// flags and pod variables; probes on /healthz and /readyz; the image named
// as the chart names its others; the ServiceAccount the guard rails bind.
func TestControllerDeployment(t *testing.T) {
	r := renderValues(t, controllerOn)
	d, c := r.controller(t)
	pod := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	wantArgs := []string{
		"--provider-volume=/provider", "--leader-elect", "--leader-election-namespace=" + namespace,
		"--metrics-bind-address=:8085", "--health-probe-bind-address=:8081", "-v=0",
	}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if want := "ghcr.io/keymount/keymount-controller:" + loadChart(t).Metadata.AppVersion; c.Image != want {
		t.Errorf("image %q, want %q", c.Image, want)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	for name, path := range map[string]string{
		"SYNC_CONTROLLER_POD_NAME": "metadata.name", "SYNC_CONTROLLER_POD_UID": "metadata.uid",
		"SYNC_CONTROLLER_POD_NAMESPACE": "metadata.namespace",
	} {
		if env[name] != path {
			t.Errorf("env %s from %q, want %s", name, env[name], path)
		}
	}
	checkControllerProbes(t, c)
	if pod.ServiceAccountName != controllerName {
		t.Errorf("ServiceAccount %q, want %q", pod.ServiceAccountName, controllerName)
	}
	user := "system:serviceaccount:" + namespace + ":" + controllerName
	for name, p := range r.policies {
		if !strings.Contains(name, "-controller-") {
			continue // push-paths binds PushSecrets' authors, not the controller
		}
		if len(p.Spec.MatchConditions) == 0 || !strings.Contains(p.Spec.MatchConditions[0].Expression, "'"+user+"'") {
			t.Errorf("policy %s does not bind the controller's ServiceAccount %s: %+v", name, user, p.Spec.MatchConditions)
		}
	}
	checkControllerSpread(t, d)
	checkControllerPDBAndService(t, r, d)
}

// checkControllerPDBAndService: the PodDisruptionBudget keeps one replica,
// the metrics Service reaches the pods' metrics port; both select the
// Deployment's pods.
func checkControllerPDBAndService(t *testing.T, r *release, d *appsv1.Deployment) {
	t.Helper()
	pdb := r.pdbs[controllerName]
	if pdb == nil || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Fatalf("PodDisruptionBudget %s: %+v, want minAvailable 1", controllerName, pdb)
	}
	if !maps.Equal(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget selects %v, the Deployment %v", pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels)
	}
	svc := r.services[controllerName+"-metrics"]
	if svc == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8085 || svc.Spec.Ports[0].TargetPort.String() != "metrics" ||
		!maps.Equal(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
		t.Errorf("metrics Service %+v: want port 8085 to the pods' metrics port", svc)
	}
}

func checkControllerProbes(t *testing.T, c *corev1.Container) {
	t.Helper()
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 8085 || ports["healthz"] != 8081 {
		t.Errorf("ports %v, want metrics 8085 and healthz 8081", ports)
	}
	for what, probe := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != what || probe.HTTPGet.Port.String() != "healthz" {
			t.Errorf("probe %s: %+v, want an HTTP GET of %s on port healthz", what, probe, what)
		}
	}
}

// checkControllerSpread: the replicas prefer different nodes.
func checkControllerSpread(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	aff := d.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("affinity %+v: want a preferred pod anti-affinity", aff)
	}
	term := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if term.TopologyKey != "kubernetes.io/hostname" || !maps.Equal(term.LabelSelector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("anti-affinity term %+v: want the Deployment's own pods per kubernetes.io/hostname", term)
	}
}

// TestControllerValues: each controller value reaches the Deployment.
func TestControllerValues(t *testing.T) {
	r := renderValues(t, map[string]any{"controller": map[string]any{
		"enabled": true, "replicas": 3, "rotationPollInterval": "1h", "maxCallRecvMsgSize": 8388608,
		"metricsPort": 9085, "healthPort": 9081, "logVerbosity": 4, "providerVolume": "/sockets",
		"tokenRequestAudiences": []any{map[string]any{"audience": "vault"}, "api://AzureADTokenExchange"},
		"extraArgs":             []any{"--workers=20"}, "goMemLimit": "",
		"podDisruptionBudget": map[string]any{"minAvailable": 2},
		"affinity":            map[string]any{"nodeAffinity": map[string]any{}},
		"image":               map[string]any{"repository": "registry.example.com/kc", "tag": "v9", "pullPolicy": "Always"},
	}})
	d, c := r.controller(t)
	for _, arg := range []string{
		"--provider-volume=/sockets", "--rotation-poll-interval=1h", "--max-call-recv-msg-size=8388608",
		"--metrics-bind-address=:9085", "--health-probe-bind-address=:9081", "-v=4", "--workers=20",
		"--token-request-audience=vault,api://AzureADTokenExchange",
	} {
		if !hasArg(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	if *d.Spec.Replicas != 3 || c.Image != "registry.example.com/kc:v9" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("replicas %d, image %q (%s)", *d.Spec.Replicas, c.Image, c.ImagePullPolicy)
	}
	if aff := d.Spec.Template.Spec.Affinity; aff.PodAntiAffinity != nil || aff.NodeAffinity == nil {
		t.Errorf("affinity %+v: want controller.affinity instead of the default", aff)
	}
	if got := r.pdbs[controllerName].Spec.MinAvailable.IntValue(); got != 2 {
		t.Errorf("PodDisruptionBudget minAvailable %d, want 2", got)
	}
	if slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" }) {
		t.Error("goMemLimit empty, yet GOMEMLIMIT is set")
	}
	if m := c.VolumeMounts; len(m) != 2 || m[0].Name != "providervol" || m[0].MountPath != "/sockets" || m[1].Name != apiAccess {
		t.Errorf("mounts %+v: want providervol at /sockets and the API credentials", m)
	}
	off := renderValues(t, map[string]any{"controller": map[string]any{"enabled": true, "podDisruptionBudget": map[string]any{"enabled": false}}})
	if len(off.pdbs) != 0 {
		t.Errorf("podDisruptionBudget.enabled=false, yet %v", slices.Collect(maps.Keys(off.pdbs)))
	}
}

// TestControllerValuesDocumented: every key of the controller block of
// values.yaml is named in the chart README as controller.<key>.
func TestControllerValuesDocumented(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	controller, _ := readValues(t, "values.yaml")["controller"].(map[string]any)
	if len(controller) < 10 {
		t.Fatalf("values.yaml has %d controller keys", len(controller))
	}
	for key := range controller {
		if !regexp.MustCompile(`controller\.` + regexp.QuoteMeta(key) + `\b`).Match(readme) {
			t.Errorf("README.md does not document controller.%s", key)
		}
	}
}
