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
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
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
		if len(p.Spec.MatchConditions) != 1 || !strings.Contains(p.Spec.MatchConditions[0].Expression, "'"+user+"'") {
			t.Errorf("policy %s does not bind the controller's ServiceAccount %s: %+v", name, user, p.Spec.MatchConditions)
		}
	}
	checkControllerSpread(t, d)
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

// upstreamProviderContainer is the sync controller chart's (v0.0.5)
// providerContainer example, as its values.yaml gives it.
const upstreamProviderContainer = `
- name: provider-e2e-installer
  image: aramase/e2e-provider:v0.0.1
  imagePullPolicy: IfNotPresent
  args:
    - --endpoint=unix:///provider/e2e-provider.sock
  resources:
    requests: {cpu: 50m, memory: 100Mi}
    limits: {cpu: 50m, memory: 100Mi}
  securityContext:
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    runAsUser: 0
    capabilities:
      drop: [ALL]
  volumeMounts:
    - mountPath: "/provider"
      name: providervol
`

// TestControllerProviderContainer: a third-party provider attached with
// the sync controller chart's providerContainer value, unchanged, runs in
// the controller's pod and shares the socket volume at --provider-volume;
// no keymount provider is added when none is enabled.
func TestControllerProviderContainer(t *testing.T) {
	var sidecars []any
	if err := yaml.Unmarshal([]byte(upstreamProviderContainer), &sidecars); err != nil {
		t.Fatal(err)
	}
	r := renderValues(t, map[string]any{"controller": map[string]any{"enabled": true, "providerContainer": sidecars}})
	d, c := r.controller(t)
	pod := d.Spec.Template.Spec
	if got := containerNames(pod.Containers); !slices.Equal(got, []string{"controller", "provider-e2e-installer"}) {
		t.Fatalf("containers %v", got)
	}
	var want []corev1.Container
	if err := yaml.UnmarshalStrict([]byte(upstreamProviderContainer), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[0], pod.Containers[1]); diff != "" {
		t.Errorf("the provider container is not as given (-want +got):\n%s", diff)
	}
	if !hasArg(c.Args, "--provider-volume=/provider") {
		t.Errorf("args %q: want --provider-volume=/provider, where the sidecar serves its socket", c.Args)
	}
	if len(pod.Volumes) != 2 || pod.Volumes[0].Name != "providervol" || pod.Volumes[0].EmptyDir == nil || pod.Volumes[1].Name != apiAccess {
		t.Errorf("volumes %+v: want the emptyDir providervol and the API credentials", pod.Volumes)
	}
	checkAPIAccess(t, &pod, "controller")
	if pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil {
		t.Error("runAsNonRoot set for the pod: the sync controller's provider example runs as root and would not start")
	}
}

// TestControllerKeymountProviders: keymount's enabled providers run in the
// controller's pod without any controller value: their sidecars serve
// their sockets in providervol with their DaemonSets' settings, the AWS
// provider's audiences join the controller's and its ClusterRole is bound
// to the controller; controller.keymountProviders=false leaves them out.
func TestControllerKeymountProviders(t *testing.T) {
	r := render(t, allFeatures)
	d, _ := r.controller(t)
	pod := d.Spec.Template.Spec
	if got := containerNames(pod.Containers); !slices.Equal(got, []string{"controller", "provider-local", "provider-aws"}) {
		t.Fatalf("containers %v", got)
	}
	local := container(t, &pod, "provider-local")
	for _, arg := range []string{"--provider-dir=/provider", "--name=files", "--root=/secrets", "--allowed-namespaces=shop,demo"} {
		if !hasArg(local.Args, arg) {
			t.Errorf("local provider args %q lack %s", local.Args, arg)
		}
	}
	aws := container(t, &pod, "provider-aws")
	for _, arg := range []string{"--provider-dir=/provider", "--region=eu-west-1", "--freshness=1m"} {
		if !hasArg(aws.Args, arg) {
			t.Errorf("AWS provider args %q lack %s", aws.Args, arg)
		}
	}
	for _, c := range []*corev1.Container{local, aws} {
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "providervol" && m.MountPath == "/provider" }) {
			t.Errorf("%s does not mount providervol at /provider: %+v", c.Name, c.VolumeMounts)
		}
	}
	checkAPIAccess(t, &pod, "controller", "provider-aws")
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "provider-local-files" })
	if i < 0 || pod.Volumes[i].Secret == nil || pod.Volumes[i].Secret.SecretName != "local-provider-files" {
		t.Errorf("volumes %+v: want provider-local-files from providers.local.secretsVolume", pod.Volumes)
	}
	_, c := r.controller(t)
	if !hasArg(c.Args, "--token-request-audience=vault,sts.amazonaws.com,pods.eks.amazonaws.com") {
		t.Errorf("args %q: want the audiences of controller.tokenRequestAudiences and the AWS provider's", c.Args)
	}
	b := r.bindings[controllerName+"-provider-aws"]
	if b == nil || b.RoleRef.Name != releaseName+"-provider-aws" || !boundTo(b.Subjects, controllerName) {
		t.Errorf("binding %s: %+v, want the AWS provider's ClusterRole bound to the controller", controllerName+"-provider-aws", b)
	}

	off := renderValues(t, merge(readValues(t, allFeatures), map[string]any{"controller": map[string]any{"keymountProviders": false}}))
	d, _ = off.controller(t)
	if got := containerNames(d.Spec.Template.Spec.Containers); !slices.Equal(got, []string{"controller"}) {
		t.Errorf("keymountProviders=false: containers %v", got)
	}
	if _, ok := off.bindings[controllerName+"-provider-aws"]; ok {
		t.Error("keymountProviders=false, yet the AWS provider's ClusterRole is bound to the controller")
	}
}

// boundTo reports whether subjects name the ServiceAccount sa of the
// release namespace.
func boundTo(subjects []rbacv1.Subject, sa string) bool {
	return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
		return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == namespace
	})
}

// TestControllerHardened: every container keymount puts in the
// controller's pod runs as non-root 65532 with a read-only root file
// system, no privilege escalation, every capability dropped, under the
// RuntimeDefault seccomp profile; no host path but the local provider's
// files, no host network.
func TestControllerHardened(t *testing.T) {
	d, _ := render(t, allFeatures).controller(t)
	pod := d.Spec.Template.Spec
	if pod.HostNetwork || pod.HostPID {
		t.Error("the controller's pod shares a host namespace")
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: no securityContext", c.Name)
			continue
		}
		if effectiveSeccomp(&pod, &c) != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: seccomp not RuntimeDefault", c.Name)
		}
		if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
			t.Errorf("%s: runAsNonRoot %v runAsUser %v, want non-root 65532", c.Name, sc.RunAsNonRoot, sc.RunAsUser)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Privileged != nil && *sc.Privileged || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s: securityContext %+v", c.Name, sc)
		}
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a host path %s", v.Name, v.HostPath.Path)
		}
	}
}

// kustomizedAs decodes the object kind/name of k into target; false when
// k has none.
func kustomizedAs(t *testing.T, k *kustomized, kind, name string, target any) bool {
	t.Helper()
	for _, o := range k.objects {
		if o.GetKind() != kind || o.GetName() != name {
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, target); err != nil {
			t.Fatalf("%s %s: %v", kind, name, err)
		}
		return true
	}
	return false
}

// TestControllerMatchesKustomize: components/controller is the chart's
// keymount-controller with controller.enabled and providers.local.enabled
// (the release keymount in kube-system): the pod spec but the images and
// pull policies, replicas, selector, PodDisruptionBudget and the rules of
// its roles.
func TestControllerMatchesKustomize(t *testing.T) {
	k := kustomize(t, "", "controller")
	r := renderValues(t, map[string]any{
		"controller": map[string]any{"enabled": true},
		"providers":  map[string]any{"local": map[string]any{"enabled": true}},
	})
	chartD, _ := r.controller(t)
	var kustD appsv1.Deployment
	if !kustomizedAs(t, k, "Deployment", controllerName, &kustD) {
		t.Fatalf("components/controller has no Deployment %s", controllerName)
	}
	spec := func(d *appsv1.Deployment) corev1.PodSpec {
		s := *d.Spec.Template.Spec.DeepCopy()
		for i := range s.Containers {
			s.Containers[i].Image, s.Containers[i].ImagePullPolicy = "", ""
		}
		return s
	}
	if diff := cmp.Diff(spec(&kustD), spec(chartD)); diff != "" {
		t.Errorf("controller pod spec (-kustomize +chart):\n%s", diff)
	}
	if diff := cmp.Diff(kustD.Spec.Replicas, chartD.Spec.Replicas); diff != "" {
		t.Errorf("replicas (-kustomize +chart):\n%s", diff)
	}
	if diff := cmp.Diff(kustD.Spec.Selector, chartD.Spec.Selector); diff != "" {
		t.Errorf("selector (-kustomize +chart):\n%s", diff)
	}
	if diff := cmp.Diff(kustD.Spec.Template.Annotations, chartD.Spec.Template.Annotations); diff != "" {
		t.Errorf("pod annotations (-kustomize +chart):\n%s", diff)
	}
	var pdb policyv1.PodDisruptionBudget
	if !kustomizedAs(t, k, "PodDisruptionBudget", controllerName, &pdb) {
		t.Fatal("components/controller has no PodDisruptionBudget")
	}
	if diff := cmp.Diff(pdb.Spec, r.pdbs[controllerName].Spec); diff != "" {
		t.Errorf("PodDisruptionBudget (-kustomize +chart):\n%s", diff)
	}
	if diff := cmp.Diff(k.clusterRoles[controllerName].Rules, r.clusterRoles[controllerName].Rules); diff != "" {
		t.Errorf("ClusterRole rules (-kustomize +chart):\n%s", diff)
	}
	var role rbacv1.Role
	if !kustomizedAs(t, k, "Role", controllerName+"-leader-election", &role) {
		t.Fatal("components/controller has no leader election Role")
	}
	if diff := cmp.Diff(role.Rules, r.roles[controllerName+"-leader-election"].Rules); diff != "" {
		t.Errorf("leader election Role rules (-kustomize +chart):\n%s", diff)
	}
}

// TestControllerRBAC: keymount-controller's ClusterRole grants exactly what
// it uses (SecretSyncs, their status, classes, Secrets without delete,
// service account tokens, events), no wildcard and no delete anywhere in
// its roles; its Lease Role is in the release namespace; both are bound to
// its ServiceAccount alone; and no rule of the driver's reaches it.
func TestControllerRBAC(t *testing.T) {
	r := render(t, allFeatures)
	role := r.clusterRoles[controllerName]
	if role == nil {
		t.Fatalf("no ClusterRole %s", controllerName)
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"secret-sync.x-k8s.io"}, Resources: []string{"secretsyncs"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"secret-sync.x-k8s.io"}, Resources: []string{"secretsyncs/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"secrets-store.csi.x-k8s.io"}, Resources: []string{"secretproviderclasses"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("ClusterRole %s rules (-want +got):\n%s", controllerName, diff)
	}
	lease := r.roles[controllerName+"-leader-election"]
	if lease == nil || lease.Namespace != namespace {
		t.Fatalf("leader election Role %+v: want one in %s", lease, namespace)
	}
	for _, rule := range slices.Concat(role.Rules, lease.Rules) {
		for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs} {
			if slices.Contains(list, "*") {
				t.Errorf("rule %+v has a wildcard", rule)
			}
		}
		if slices.Contains(rule.Verbs, "delete") || slices.Contains(rule.Verbs, "deletecollection") {
			t.Errorf("rule %+v deletes", rule)
		}
	}
	if b := r.bindings[controllerName]; b == nil || b.RoleRef.Name != controllerName || len(b.Subjects) != 1 || !boundTo(b.Subjects, controllerName) {
		t.Errorf("ClusterRoleBinding %s: %+v, want its role bound to its ServiceAccount alone", controllerName, b)
	}
	if b := r.roleBindings[controllerName+"-leader-election"]; b == nil || b.Namespace != namespace || b.RoleRef.Name != controllerName+"-leader-election" ||
		len(b.Subjects) != 1 || !boundTo(b.Subjects, controllerName) {
		t.Errorf("leader election RoleBinding: %+v", b)
	}
	// Its own role, the AWS provider's for that sidecar, restart on
	// change's (restartOnChange.enabled).
	others := []string{controllerName, releaseName + "-provider-aws", releaseName + "-restart-on-change"}
	for name, b := range r.bindings {
		if boundTo(b.Subjects, controllerName) && !slices.Contains(others, b.RoleRef.Name) {
			t.Errorf("binding %s gives the controller %s", name, b.RoleRef.Name)
		}
	}
}

// apiAccess is the volume of the controller's API credentials.
const apiAccess = "api-access"

// checkAPIAccess: the pod mounts no ServiceAccount token by itself; the
// containers named, and only they, mount the API credentials (a token of
// the controller's ServiceAccount) where client-go looks for them.
func checkAPIAccess(t *testing.T, pod *corev1.PodSpec, with ...string) {
	t.Helper()
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pod mounts the ServiceAccount token into every container")
	}
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == apiAccess })
	if i < 0 || pod.Volumes[i].Projected == nil || pod.Volumes[i].Projected.Sources[0].ServiceAccountToken == nil ||
		pod.Volumes[i].Projected.Sources[0].ServiceAccountToken.Audience != "" {
		t.Fatalf("no projected volume %s with a token for the API server", apiAccess)
	}
	for _, c := range pod.Containers {
		mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == apiAccess && m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" && m.ReadOnly
		})
		if want := slices.Contains(with, c.Name); mounted != want {
			t.Errorf("container %s: API credentials mounted %v, want %v", c.Name, mounted, want)
		}
	}
}
