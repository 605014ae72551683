package keymount_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// fanoutRole is the chart's fan-out ClusterRole (and binding).
const fanoutRole = releaseName + "-fanout"

// TestFanout: controller.fanout.enabled turns on --enable-fanout and binds
// the controller the fan-out rules (namespaces read; Secrets and ConfigMaps
// read, written, deleted — the admission policies narrow it to copies);
// off, neither; components/fanout is the same.
func TestFanout(t *testing.T) {
	off := renderValues(t, map[string]any{"controller": map[string]any{"enabled": true}})
	if _, c := off.controller(t); slices.Contains(c.Args, "--enable-fanout") || off.clusterRoles[fanoutRole] != nil {
		t.Fatalf("fan-out off by default: args %v, ClusterRole %v", c.Args, off.clusterRoles[fanoutRole] != nil)
	}
	vals := map[string]any{
		"controller": map[string]any{"enabled": true, "fanout": map[string]any{"enabled": true}},
		"providers":  map[string]any{"local": map[string]any{"enabled": true}},
	}
	r := renderValues(t, vals)
	_, c := r.controller(t)
	if !slices.Contains(c.Args, "--enable-fanout") {
		t.Errorf("controller.fanout.enabled: args %v, want --enable-fanout", c.Args)
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	role := r.clusterRoles[fanoutRole]
	if role == nil {
		t.Fatalf("no ClusterRole %s", fanoutRole)
	}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("ClusterRole %s rules (-want +got):\n%s", fanoutRole, diff)
	}
	if b := r.bindings[fanoutRole]; b == nil || b.RoleRef.Name != fanoutRole || len(b.Subjects) != 1 || !boundTo(b.Subjects, controllerName) {
		t.Errorf("ClusterRoleBinding %s: %+v, want its role bound to the controller's ServiceAccount alone", fanoutRole, b)
	}
	k := kustomize(t, "", "controller", "controller-admission", "fanout")
	var kustD appsv1.Deployment
	if !kustomizedAs(t, k, "Deployment", controllerName, &kustD) {
		t.Fatalf("components/controller has no Deployment %s", controllerName)
	}
	kustArgs := kustD.Spec.Template.Spec.Containers[0].Args
	if diff := cmp.Diff(slices.Sorted(slices.Values(c.Args)), slices.Sorted(slices.Values(kustArgs))); diff != "" {
		t.Errorf("controller args (-chart +kustomize):\n%s", diff)
	}
	if diff := cmp.Diff(role.Rules, k.clusterRoles["keymount-fanout"].Rules); diff != "" {
		t.Errorf("fan-out rules (-chart +components/fanout):\n%s", diff)
	}
}
