package keymount_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestControllerDeployment: keymount-controller is installed only with
// controller.enabled: two leader-electing replicas with the sync
// controller's flags, its own ServiceAccount (the one the guard rails
// match), the token audiences of controller.tokenRequestAudiences plus the
// AWS provider's, and the provider directory mounted at /provider.
func TestControllerDeployment(t *testing.T) {
	name := releaseName + "-controller"
	if r := renderValues(t, nil); r.deployments[name] != nil || r.clusterRoles[name] != nil {
		t.Fatalf("keymount-controller rendered without controller.enabled")
	}
	r := renderValues(t, map[string]any{
		"controller": map[string]any{"enabled": true, "tokenRequestAudiences": []any{map[string]any{"audience": "api://x"}}},
		"providers":  map[string]any{"aws": map[string]any{"enabled": true}},
	})
	d := r.deployments[name]
	if d == nil {
		t.Fatalf("no Deployment %s", name)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || d.Spec.Template.Spec.ServiceAccountName != name {
		t.Errorf("replicas %v, service account %q: want 2 and %s", d.Spec.Replicas, d.Spec.Template.Spec.ServiceAccountName, name)
	}
	c := container(t, &d.Spec.Template.Spec, "controller")
	for _, want := range []string{"--leader-elect", "--provider-volume=/provider", "--rotation-poll-interval=12h",
		"--token-request-audience=api://x", "--token-request-audience=sts.amazonaws.com", "--token-request-audience=pods.eks.amazonaws.com"} {
		if !hasArg(c.Args, want) {
			t.Errorf("controller args %q lack %s", c.Args, want)
		}
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/provider" }) {
		t.Errorf("the provider directory is not mounted at /provider: %+v", c.VolumeMounts)
	}
	bound := false
	for _, b := range r.bindings {
		for _, s := range b.Subjects {
			bound = bound || (b.RoleRef.Name == name && s.Kind == "ServiceAccount" && s.Name == name && s.Namespace == namespace)
		}
	}
	if !bound {
		t.Errorf("ClusterRole %s is not bound to the ServiceAccount %s", name, name)
	}
}
