package deploy_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	controllerPath = "components/controller"
	controllerName = "keymount-controller"
)

// controllerObjects is what components/controller adds to a render.
type controllerObjects struct {
	deployment *appsv1.Deployment
	pdb        *policyv1.PodDisruptionBudget
	sa         *corev1.ServiceAccount
	role       *rbacv1.ClusterRole
	binding    *rbacv1.ClusterRoleBinding
	lease      *rbacv1.Role
	leaseBind  *rbacv1.RoleBinding
	all        []string
}

// renderController renders the kustomization dir and decodes
// keymount-controller's objects strictly.
func renderController(t *testing.T, mem filesys.FileSystem, dir string) *controllerObjects {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, dir)
	if err != nil {
		t.Fatalf("render %s: %v", dir, err)
	}
	out := &controllerObjects{}
	for _, r := range m.Resources() {
		out.all = append(out.all, r.GetKind()+"/"+r.GetName())
		if r.GetName() != controllerName && r.GetName() != controllerName+"-leader-election" {
			continue
		}
		var target any
		switch r.GetKind() {
		case "Deployment":
			out.deployment = &appsv1.Deployment{}
			target = out.deployment
		case "PodDisruptionBudget":
			out.pdb = &policyv1.PodDisruptionBudget{}
			target = out.pdb
		case "ServiceAccount":
			out.sa = &corev1.ServiceAccount{}
			target = out.sa
		case "ClusterRole":
			out.role = &rbacv1.ClusterRole{}
			target = out.role
		case "ClusterRoleBinding":
			out.binding = &rbacv1.ClusterRoleBinding{}
			target = out.binding
		case "Role":
			out.lease = &rbacv1.Role{}
			target = out.lease
		case "RoleBinding":
			out.leaseBind = &rbacv1.RoleBinding{}
			target = out.leaseBind
		default:
			continue
		}
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(data, target); err != nil {
			t.Fatalf("decode %s/%s: %v", r.GetKind(), r.GetName(), err)
		}
	}
	return out
}

// TestControllerComponent: components/controller adds keymount-controller
// (two leader-elected replicas with the Lease in kube-system, a
// PodDisruptionBudget, the local provider as a sidecar on the shared
// socket volume) and its RBAC, bound to its ServiceAccount in kube-system
// (the user components/controller-admission binds), alone and with every
// other component; the base has none of it.
func TestControllerComponent(t *testing.T) {
	mem := deployFS(t)
	if base := renderController(t, mem, "/deploy"); base.deployment != nil || base.role != nil {
		t.Errorf("the base renders keymount-controller: %v", base.all)
	}
	for _, components := range [][]string{
		{controllerPath},
		{registrarSidecarPath, restartOnChangePath, secretSyncPath, tokenAudiencesPath, controllerAdmissionPath, controllerPath},
	} {
		c := renderController(t, mem, overlay(t, mem, components...))
		if c.deployment == nil || c.pdb == nil || c.sa == nil || c.role == nil || c.binding == nil || c.lease == nil || c.leaseBind == nil {
			t.Fatalf("components %v: keymount-controller's objects incomplete: %v", components, c.all)
		}
		checkControllerDeployment(t, c.deployment)
		if c.sa.Namespace != "kube-system" || c.pdb.Spec.MinAvailable.IntValue() != 1 {
			t.Errorf("ServiceAccount in %q, PodDisruptionBudget minAvailable %s", c.sa.Namespace, c.pdb.Spec.MinAvailable)
		}
		checkControllerRBAC(t, c)
	}
}

func checkControllerDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if d.Namespace != "kube-system" || d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || pod.ServiceAccountName != controllerName {
		t.Errorf("Deployment in %q, replicas %v, ServiceAccount %q", d.Namespace, d.Spec.Replicas, pod.ServiceAccountName)
	}
	var names []string
	for _, c := range pod.Containers {
		names = append(names, c.Name)
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "providervol" && m.MountPath == "/provider" }) {
			t.Errorf("container %s does not mount providervol at /provider", c.Name)
		}
	}
	if !slices.Equal(names, []string{"controller", "provider-local"}) {
		t.Fatalf("containers %v, want the controller and the local provider", names)
	}
	for _, arg := range []string{"--provider-volume=/provider", "--leader-elect", "--leader-election-namespace=kube-system"} {
		if !slices.Contains(pod.Containers[0].Args, arg) {
			t.Errorf("controller args %q lack %s", pod.Containers[0].Args, arg)
		}
	}
	if !slices.Contains(pod.Containers[1].Args, "--provider-dir=/provider") {
		t.Errorf("local provider args %q: want its socket in /provider", pod.Containers[1].Args)
	}
}

// checkControllerRBAC: no rule deletes anything or names a wildcard; the
// Lease Role is in kube-system; both bind keymount-controller of kube-system.
func checkControllerRBAC(t *testing.T, c *controllerObjects) {
	t.Helper()
	for _, rule := range slices.Concat(c.role.Rules, c.lease.Rules) {
		for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs} {
			if slices.Contains(list, "*") {
				t.Errorf("rule %+v has a wildcard", rule)
			}
		}
		if slices.Contains(rule.Verbs, "delete") || slices.Contains(rule.Verbs, "deletecollection") {
			t.Errorf("rule %+v deletes", rule)
		}
	}
	if c.lease.Namespace != "kube-system" || !slices.ContainsFunc(c.lease.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Equal(r.APIGroups, []string{"coordination.k8s.io"}) && slices.Equal(r.Resources, []string{"leases"})
	}) {
		t.Errorf("Lease Role in %q: %+v", c.lease.Namespace, c.lease.Rules)
	}
	want := rbacv1.Subject{Kind: "ServiceAccount", Name: controllerName, Namespace: "kube-system"}
	if !slices.Equal(c.binding.Subjects, []rbacv1.Subject{want}) || !slices.Equal(c.leaseBind.Subjects, []rbacv1.Subject{want}) ||
		c.binding.RoleRef.Name != controllerName || c.leaseBind.RoleRef.Name != controllerName+"-leader-election" {
		t.Errorf("bindings %+v %+v, want %s/%s bound to its roles", c.binding, c.leaseBind, want.Namespace, want.Name)
	}
}

// TestControllerComponentExample: the overlay the component's comments
// document adds the audience flag and a third-party provider container on
// the socket volume, and nothing else changes.
func TestControllerComponentExample(t *testing.T) {
	mem := deployFS(t)
	plain := renderController(t, mem, overlay(t, mem, controllerPath))
	if err := mem.WriteFile("/overlay/kustomization.yaml", []byte(documentedExample(t, mem, controllerPath))); err != nil {
		t.Fatal(err)
	}
	example := renderController(t, mem, "/overlay")
	pod := example.deployment.Spec.Template.Spec
	if len(pod.Containers) != 3 || pod.Containers[2].Name != "provider-e2e" ||
		!slices.Contains(pod.Containers[2].Args, "--endpoint=unix:///provider/e2e-provider.sock") {
		t.Fatalf("containers %+v: want the e2e provider third", pod.Containers)
	}
	if !slices.Contains(pod.Containers[0].Args, "--token-request-audience=api://AzureADTokenExchange") {
		t.Errorf("controller args %q lack the documented audience", pod.Containers[0].Args)
	}
	want := plain.deployment.DeepCopy()
	want.Spec.Template.Spec.Containers[0].Args = append(want.Spec.Template.Spec.Containers[0].Args, "--token-request-audience=api://AzureADTokenExchange")
	want.Spec.Template.Spec.Containers = append(want.Spec.Template.Spec.Containers, pod.Containers[2])
	if !yamlEqual(t, want, example.deployment) {
		t.Error("the documented example changes more than the audience and the provider container")
	}
}

func yamlEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ya, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	yb, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ya) == string(yb)
}
