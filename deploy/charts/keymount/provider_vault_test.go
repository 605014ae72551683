package keymount_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// vaultOn is the one value that turns keymount's Vault provider on.
var vaultOn = map[string]any{"providers": map[string]any{"vault": map[string]any{"enabled": true}}}

// TestVaultProviderOptIn: off by default and with the upstream chart's
// values; providers.vault.enabled renders its DaemonSet serving
// <providersDir>/vault.sock with its metrics port, and the CSIDriver asks
// kubelet for tokens of the audience vault.
func TestVaultProviderOptIn(t *testing.T) {
	const name = releaseName + "-provider-vault"
	for _, f := range []string{"", upstreamValues, upstreamOtherKeys} {
		if ds := render(t, f).daemonSets[name]; ds != nil {
			t.Errorf("values %q: the Vault provider is rendered without providers.vault.enabled", f)
		}
	}
	r := renderValues(t, vaultOn)
	ds := r.daemonSets[name]
	if ds == nil {
		t.Fatalf("providers.vault.enabled: no DaemonSet %s", name)
	}
	c := container(t, &ds.Spec.Template.Spec, "provider")
	if !slices.Equal(c.Command, []string{"/usr/local/bin/keymount-provider-vault"}) {
		t.Errorf("command %q", c.Command)
	}
	for _, arg := range []string{"--provider-dir=/var/run/secrets-store-csi-providers", "--metrics-addr=:8098"} {
		if !hasArg(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8098 {
		t.Errorf("ports %+v: want the metrics port 8098", c.Ports)
	}
	if !strings.HasPrefix(c.Image, "ghcr.io/keymount/keymount-provider-vault:") {
		t.Errorf("image %q", c.Image)
	}
	want := []storagev1.TokenRequest{{Audience: "vault"}}
	if diff := cmp.Diff(want, r.csiDriver.Spec.TokenRequests); diff != "" {
		t.Errorf("tokenRequests (-want +got):\n%s", diff)
	}
}

// TestVaultProviderValues: the all-features values reach the DaemonSet:
// extra args, the CA volume and its mount beside the socket directory, the
// priority class; the audience vault, already in tokenRequests, is asked
// once.
func TestVaultProviderValues(t *testing.T) {
	r := render(t, allFeatures)
	ds := r.daemonSets[releaseName+"-provider-vault"]
	if ds == nil {
		t.Fatal("no Vault provider DaemonSet with the all-features values")
	}
	pod := ds.Spec.Template.Spec
	c := container(t, &pod, "provider")
	if !hasArg(c.Args, "--reissue-margin=10m") || !hasArg(c.Args, "--provider-dir=/run/secrets-store-csi-providers") {
		t.Errorf("args %q", c.Args)
	}
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == "vault-ca" && v.ConfigMap != nil && v.ConfigMap.Name == "vault-ca"
	}) {
		t.Errorf("volumes %+v: want vault-ca from providers.vault.volumes", pod.Volumes)
	}
	wantMounts := []string{"providers-dir", "vault-ca"}
	var mounts []string
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.Name)
	}
	if !slices.Equal(mounts, wantMounts) {
		t.Errorf("mounts %v, want %v", mounts, wantMounts)
	}
	var vault int
	for _, tr := range r.csiDriver.Spec.TokenRequests {
		if tr.Audience == "vault" {
			vault++
		}
	}
	if vault != 1 {
		t.Errorf("tokenRequests %+v: the audience vault %d times, want once", r.csiDriver.Spec.TokenRequests, vault)
	}
}

// TestVaultProviderMatchesKustomize: the chart's Vault provider DaemonSet
// is deploy/providers/vault's (the pod spec but the image), with the same
// ClusterRole rules, and it adds the audience the token-audience-vault
// component adds.
func TestVaultProviderMatchesKustomize(t *testing.T) {
	k := kustomize(t, "providers/vault")
	r := renderValues(t, vaultOn)
	const name = "keymount-provider-vault"
	if diff := cmp.Diff(podSpecToCompare(t, k.daemonSets[name], "provider"), podSpecToCompare(t, r.daemonSets[name], "provider")); diff != "" {
		t.Errorf("Vault provider pod spec (-kustomize +chart):\n%s", diff)
	}
	if diff := cmp.Diff(k.daemonSets[name].Spec.Selector, r.daemonSets[name].Spec.Selector); diff != "" {
		t.Errorf("Vault provider selector (-kustomize +chart):\n%s", diff)
	}
	if k.clusterRoles[name] == nil || r.clusterRoles[name] == nil {
		t.Fatalf("ClusterRole %s: kustomize %v, chart %v", name, k.clusterRoles[name] != nil, r.clusterRoles[name] != nil)
	}
	if diff := cmp.Diff(k.clusterRoles[name].Rules, r.clusterRoles[name].Rules); diff != "" {
		t.Errorf("Vault provider rules (-kustomize +chart):\n%s", diff)
	}
	audiences := kustomize(t, "", "token-audience-vault").csiDriver.Spec.TokenRequests
	if diff := cmp.Diff(audiences, r.csiDriver.Spec.TokenRequests); diff != "" {
		t.Errorf("token requests with providers.vault (-token-audience-vault component +chart):\n%s", diff)
	}
	both := kustomize(t, "", "token-audiences", "token-audience-vault").csiDriver.Spec.TokenRequests
	r = renderValues(t, merge(vaultOn, map[string]any{"providers": map[string]any{"aws": map[string]any{"enabled": true}}}))
	if diff := cmp.Diff(both, r.csiDriver.Spec.TokenRequests); diff != "" {
		t.Errorf("token requests with providers.aws and providers.vault (-both components +chart):\n%s", diff)
	}
}

// TestControllerVaultProvider: with the controller on, the Vault provider
// runs in its pod as components/controller-vault runs it (the same
// container; the controller asks tokens for vault, and only vault, the
// admission policy lets it), its rules bound to the controller; with
// controller.keymountProviders=false it does not.
func TestControllerVaultProvider(t *testing.T) {
	vals := merge(vaultOn, controllerOn)
	r := renderValues(t, vals)
	d, c := r.controller(t)
	pod := d.Spec.Template.Spec
	if got := containerNames(pod.Containers); !slices.Equal(got, []string{"controller", "provider-vault"}) {
		t.Fatalf("containers %v", got)
	}
	if !hasArg(c.Args, "--token-request-audience=vault") {
		t.Errorf("controller args %q: want --token-request-audience=vault", c.Args)
	}
	checkAPIAccess(t, &pod, "controller")
	checkSidecarIdentity(t, r, &pod, "provider-vault")
	for _, sc := range pod.Containers {
		checkContainerNonRoot(t, &pod, &sc)
	}
	if p := r.policies[controllerName+"-token-requests"]; p == nil || p.Spec.Variables[0].Expression != "['vault']" {
		t.Errorf("token-requests policy %+v: want allowedAudiences ['vault']", p)
	}

	k := kustomize(t, "", "controller", "controller-admission", "controller-vault")
	var kd appsv1.Deployment
	if !kustomizedAs(t, k, "Deployment", controllerName, &kd) {
		t.Fatal("no controller Deployment from components/controller-vault")
	}
	kc := container(t, &kd.Spec.Template.Spec, "provider-vault")
	cc := container(t, &pod, "provider-vault")
	kc.Image, cc.Image, kc.ImagePullPolicy, cc.ImagePullPolicy = "", "", "", ""
	if diff := cmp.Diff(kc, cc); diff != "" {
		t.Errorf("provider-vault container (-kustomize +chart):\n%s", diff)
	}
	if !hasArg(kd.Spec.Template.Spec.Containers[0].Args, "--token-request-audience=vault") {
		t.Errorf("kustomize controller args %q", kd.Spec.Template.Spec.Containers[0].Args)
	}
	if diff := cmp.Diff(k.policies[controllerName+"-token-requests"].Spec, r.policies[controllerName+"-token-requests"].Spec); diff != "" {
		t.Errorf("token-requests policy (-kustomize +chart):\n%s", diff)
	}
	if diff := cmp.Diff(k.clusterRoles[controllerName+"-provider-vault"].Rules, r.clusterRoles[releaseName+"-provider-vault"].Rules); diff != "" {
		t.Errorf("the Vault sidecar's rules (-kustomize +chart):\n%s", diff)
	}
	checkVaultSidecarIdentityMatches(t, k, &kd.Spec.Template.Spec, r, &pod)

	off := renderValues(t, merge(vals, map[string]any{"controller": map[string]any{"keymountProviders": false}}))
	d, c = off.controller(t)
	if got := containerNames(d.Spec.Template.Spec.Containers); !slices.Equal(got, []string{"controller"}) {
		t.Errorf("keymountProviders=false: containers %v", got)
	}
	checkNoSidecarAccounts(t, off)
	// The DaemonSet's audience still reaches the controller: it may
	// serve a third-party Vault provider from providerContainer.
	if !hasArg(c.Args, "--token-request-audience=vault") {
		t.Errorf("keymountProviders=false: controller args %q", c.Args)
	}
}

// checkVaultSidecarIdentityMatches: components/controller-vault (k, its
// controller pod kpod) gives the Vault sidecar the identity the chart (r,
// pod) gives it: its own ServiceAccount, its token Secret mounted the same
// way, the rules bound to it alone.
func checkVaultSidecarIdentityMatches(t *testing.T, k *kustomized, kpod *corev1.PodSpec, r *release, pod *corev1.PodSpec) {
	t.Helper()
	var kb rbacv1.ClusterRoleBinding
	if !kustomizedAs(t, k, "ClusterRoleBinding", controllerName+"-provider-vault", &kb) || len(kb.Subjects) != 1 ||
		!boundTo(kb.Subjects, controllerName+"-provider-vault") {
		t.Errorf("kustomize binding %s: %+v, want the sidecar's own ServiceAccount alone", controllerName+"-provider-vault", kb)
	}
	var ksa corev1.ServiceAccount
	if !kustomizedAs(t, k, "ServiceAccount", controllerName+"-provider-vault", &ksa) {
		t.Errorf("components/controller-vault has no ServiceAccount %s-provider-vault", controllerName)
	}
	volOf := func(spec *corev1.PodSpec) *corev1.Volume {
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == sidecarAPIAccess("provider-vault") })
		if i < 0 {
			t.Fatalf("no volume %s", sidecarAPIAccess("provider-vault"))
		}
		return &spec.Volumes[i]
	}
	if diff := cmp.Diff(volOf(kpod), volOf(pod)); diff != "" {
		t.Errorf("the Vault sidecar's credentials volume (-kustomize +chart):\n%s", diff)
	}
	var ksec corev1.Secret
	if !kustomizedAs(t, k, "Secret", controllerName+"-provider-vault-token", &ksec) {
		t.Fatalf("components/controller-vault has no Secret %s-provider-vault-token", controllerName)
	}
	if diff := cmp.Diff(&ksec, r.secrets[controllerName+"-provider-vault-token"],
		cmpopts.IgnoreFields(metav1.ObjectMeta{}, "Labels")); diff != "" {
		t.Errorf("the Vault sidecar's token Secret (-kustomize +chart):\n%s", diff)
	}
}
