package keymount_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

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
// it uses (SecretSyncs, their status, SecretMirrors, their finalizer and
// status, classes, Secrets without delete,
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
		{APIGroups: []string{"mirrors.kts.studio"}, Resources: []string{"secretmirrors"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{"mirrors.kts.studio"}, Resources: []string{"secretmirrors/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"mirrors.kts.studio"}, Resources: []string{"secretmirrors/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{"keymount.io"}, Resources: []string{"pushsecrets"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{"keymount.io"}, Resources: []string{"pushsecrets/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"keymount.io"}, Resources: []string{"pushsecrets/finalizers"}, Verbs: []string{"update"}},
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
	checkNoWildcardNoDelete(t, slices.Concat(role.Rules, lease.Rules))
	if b := r.bindings[controllerName]; b == nil || b.RoleRef.Name != controllerName || len(b.Subjects) != 1 || !boundTo(b.Subjects, controllerName) {
		t.Errorf("ClusterRoleBinding %s: %+v, want its role bound to its ServiceAccount alone", controllerName, b)
	}
	if b := r.roleBindings[controllerName+"-leader-election"]; b == nil || b.Namespace != namespace || b.RoleRef.Name != controllerName+"-leader-election" ||
		len(b.Subjects) != 1 || !boundTo(b.Subjects, controllerName) {
		t.Errorf("leader election RoleBinding: %+v", b)
	}
	// Its own role, the AWS and Vault providers' for those sidecars,
	// restart on change's (restartOnChange.enabled).
	others := []string{controllerName, releaseName + "-provider-aws", releaseName + "-provider-vault", releaseName + "-restart-on-change", fanoutRole}
	for name, b := range r.bindings {
		if boundTo(b.Subjects, controllerName) && !slices.Contains(others, b.RoleRef.Name) {
			t.Errorf("binding %s gives the controller %s", name, b.RoleRef.Name)
		}
	}
}

// checkNoWildcardNoDelete: no rule names a wildcard or deletes.
func checkNoWildcardNoDelete(t *testing.T, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, rule := range rules {
		for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs} {
			if slices.Contains(list, "*") {
				t.Errorf("rule %+v has a wildcard", rule)
			}
		}
		if slices.Contains(rule.Verbs, "delete") || slices.Contains(rule.Verbs, "deletecollection") {
			t.Errorf("rule %+v deletes", rule)
		}
	}
}

// apiAccess is the volume of the controller's API credentials.
const apiAccess = "api-access"

// saPath is where client-go's in-cluster configuration reads a token, the
// CA and the namespace.
const saPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// checkAPIAccess: the pod mounts no ServiceAccount token by itself; the
// containers named, and only they, mount the API credentials (a token of
// the controller's ServiceAccount) where client-go looks for them. No other
// container mounts anything there but keymount's AWS and Vault provider
// sidecars, their own ServiceAccounts' (checkSidecarIdentity).
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
			return m.Name == apiAccess && m.MountPath == saPath && m.ReadOnly
		})
		if want := slices.Contains(with, c.Name); mounted != want {
			t.Errorf("container %s: API credentials mounted %v, want %v", c.Name, mounted, want)
		}
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(m.MountPath, "/var/run/secrets/kubernetes.io") && m.Name != apiAccess && m.Name != sidecarAPIAccess(c.Name) {
				t.Errorf("container %s mounts volume %s at %s", c.Name, m.Name, m.MountPath)
			}
		}
	}
}

// sidecarAPIAccess is the volume of a keymount provider sidecar's own API
// credentials.
func sidecarAPIAccess(container string) string { return container + "-api-access" }

// checkSidecarIdentity: the keymount provider sidecar container (provider-aws,
// provider-vault) of the controller's pod mounts its own API credentials,
// and no token of the controller's ServiceAccount: a Secret volume of the
// token of its own ServiceAccount <controller>-<container> (token, CA and
// namespace, where client-go reads them), a Secret of type
// service-account-token the chart renders for that ServiceAccount, which
// the provider's ClusterRole alone is bound to.
func checkSidecarIdentity(t *testing.T, r *release, pod *corev1.PodSpec, name string) {
	t.Helper()
	c := container(t, pod, name)
	sa := controllerName + "-" + name
	vol := sidecarAPIAccess(name)
	var got []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if m.MountPath == saPath {
			got = append(got, m)
		}
	}
	if len(got) != 1 || got[0].Name != vol || !got[0].ReadOnly {
		t.Errorf("%s mounts %+v at %s, want its own credentials %s alone, read-only", name, got, saPath, vol)
	}
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == vol })
	if i < 0 || pod.Volumes[i].Secret == nil || pod.Volumes[i].Secret.SecretName != sa+"-token" {
		t.Fatalf("%s: volume %s is not the Secret %s-token", name, vol, sa)
	}
	var keys []string
	for _, it := range pod.Volumes[i].Secret.Items {
		if it.Key != it.Path {
			t.Errorf("%s: key %s at %s", vol, it.Key, it.Path)
		}
		keys = append(keys, it.Key)
	}
	if !slices.Equal(keys, []string{"token", "ca.crt", "namespace"}) || pod.Volumes[i].Secret.Optional != nil && *pod.Volumes[i].Secret.Optional {
		t.Errorf("%s: keys %v (optional %v), want token, ca.crt and namespace, required", vol, keys, pod.Volumes[i].Secret.Optional)
	}
	checkSidecarAccount(t, r, sa, releaseName+"-"+name)
}

// checkSidecarAccount: the release renders the ServiceAccount sa, an
// empty token Secret <sa>-token of it, and binds it the ClusterRole role
// alone.
func checkSidecarAccount(t *testing.T, r *release, sa, role string) {
	t.Helper()
	sec := r.secrets[sa+"-token"]
	if sec == nil || sec.Type != corev1.SecretTypeServiceAccountToken || sec.Annotations[corev1.ServiceAccountNameKey] != sa || sec.Namespace != namespace || len(sec.Data)+len(sec.StringData) > 0 {
		t.Errorf("Secret %s-token: %+v, want an empty token Secret of %s", sa, sec, sa)
	}
	if acct := r.serviceAccounts[sa]; acct == nil || acct.Namespace != namespace {
		t.Errorf("no ServiceAccount %s in %s", sa, namespace)
	}
	var roles []string
	for _, b := range r.bindings {
		if boundTo(b.Subjects, sa) {
			roles = append(roles, b.RoleRef.Name)
			if len(b.Subjects) != 1 {
				t.Errorf("binding %s binds %+v, want %s alone", b.Name, b.Subjects, sa)
			}
		}
	}
	for _, b := range r.roleBindings {
		if boundTo(b.Subjects, sa) {
			roles = append(roles, "Role "+b.RoleRef.Name)
		}
	}
	if want := []string{role}; !slices.Equal(roles, want) {
		t.Errorf("%s is bound to %v, want %v", sa, roles, want)
	}
}
