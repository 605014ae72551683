package keymount_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

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
// provider's audiences join the controller's; the AWS and Vault sidecars
// run as their own ServiceAccounts, bound to their providers' ClusterRoles,
// with no token of the controller's; controller.keymountProviders=false
// leaves them out.
func TestControllerKeymountProviders(t *testing.T) {
	r := render(t, allFeatures)
	d, _ := r.controller(t)
	pod := d.Spec.Template.Spec
	if got := containerNames(pod.Containers); !slices.Equal(got, []string{"controller", "provider-local", "provider-aws", "provider-vault"}) {
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
	checkAPIAccess(t, &pod, "controller")
	checkSidecarIdentity(t, r, &pod, "provider-aws")
	checkSidecarIdentity(t, r, &pod, "provider-vault")
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "provider-local-files" })
	if i < 0 || pod.Volumes[i].Secret == nil || pod.Volumes[i].Secret.SecretName != "local-provider-files" {
		t.Errorf("volumes %+v: want provider-local-files from providers.local.secretsVolume", pod.Volumes)
	}
	_, c := r.controller(t)
	if !hasArg(c.Args, "--token-request-audience=vault,sts.amazonaws.com,pods.eks.amazonaws.com") {
		t.Errorf("args %q: want the audiences of controller.tokenRequestAudiences and the AWS provider's", c.Args)
	}
	for name, b := range r.bindings {
		if boundTo(b.Subjects, controllerName) && strings.Contains(b.RoleRef.Name, "provider") {
			t.Errorf("binding %s gives the controller's ServiceAccount the role %s", name, b.RoleRef.Name)
		}
	}

	off := renderValues(t, merge(readValues(t, allFeatures), map[string]any{"controller": map[string]any{"keymountProviders": false}}))
	d, _ = off.controller(t)
	if got := containerNames(d.Spec.Template.Spec.Containers); !slices.Equal(got, []string{"controller"}) {
		t.Errorf("keymountProviders=false: containers %v", got)
	}
	checkNoSidecarAccounts(t, off)
}

// checkNoSidecarAccounts: r has no ServiceAccount, token Secret or binding
// of keymount's provider sidecars in the controller's pod.
func checkNoSidecarAccounts(t *testing.T, r *release) {
	t.Helper()
	for _, name := range []string{controllerName + "-provider-aws", controllerName + "-provider-vault"} {
		_, bound := r.bindings[name]
		_, acct := r.serviceAccounts[name]
		_, token := r.secrets[name+"-token"]
		if bound || acct || token {
			t.Errorf("keymountProviders=false, yet %s: binding %v, ServiceAccount %v, token Secret %v", name, bound, acct, token)
		}
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
		checkContainerNonRoot(t, &pod, &c)
	}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a host path %s", v.Name, v.HostPath.Path)
		}
	}
}

// checkContainerNonRoot: c runs as non-root 65532, read-only root, no
// privilege escalation, no capability, RuntimeDefault seccomp.
func checkContainerNonRoot(t *testing.T, pod *corev1.PodSpec, c *corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("%s: no securityContext", c.Name)
		return
	}
	if effectiveSeccomp(pod, c) != corev1.SeccompProfileTypeRuntimeDefault {
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
