package deploy_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	restartOnChangePath = "components/restart-on-change"
	restartRole         = "keymount-restart-on-change"
)

// restartRules are the rules keymount-controller's restart on change needs
// (controller/restart): pod statuses (the node's change reports), the pod and
// its class, a ReplicaSet (its selector and owner) to find its Deployment,
// the workloads (a trimmed watch, get and patch), the synced Secrets (a
// watch by label), and events.
var restartRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list", "watch", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
	{APIGroups: []string{"secrets-store.csi.x-k8s.io"}, Resources: []string{"secretproviderclasses"}, Verbs: []string{"get"}},
	{APIGroups: []string{"secrets-store.csi.x-k8s.io"}, Resources: []string{"secretproviderclasspodstatuses"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
}

// controllerSubject is keymount-controller's ServiceAccount.
var controllerSubject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "keymount-controller", Namespace: "kube-system"}

// driverSubject is the node driver's ServiceAccount.
var driverSubject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "keymount", Namespace: "kube-system"}

// clusterRoleBindings renders dir and returns its ClusterRoleBindings by name.
func clusterRoleBindings(t *testing.T, mem filesys.FileSystem, dir string) map[string]*rbacv1.ClusterRoleBinding {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, dir)
	if err != nil {
		t.Fatalf("render %s: %v", dir, err)
	}
	out := map[string]*rbacv1.ClusterRoleBinding{}
	for _, r := range m.Resources() {
		if r.GetKind() != "ClusterRoleBinding" {
			continue
		}
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		b := &rbacv1.ClusterRoleBinding{}
		if err := yaml.UnmarshalStrict(data, b); err != nil {
			t.Fatalf("decode ClusterRoleBinding/%s: %v", r.GetName(), err)
		}
		out[b.Name] = b
	}
	return out
}

// grantsApps reports whether role has a rule on the apps group.
func grantsApps(role *rbacv1.ClusterRole) bool {
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, "apps") || slices.Contains(r.APIGroups, "*") {
			return true
		}
	}
	return false
}

// TestBaseCannotRestart: without the component no role reaches workloads,
// and no admission policy is needed.
func TestBaseCannotRestart(t *testing.T) {
	r := mustRender(t, deployFS(t), "/deploy")
	if len(r.policies)+len(r.policyBinds) > 0 {
		t.Errorf("the base ships admission policies: %v", r.kinds)
	}
	for _, name := range slices.Sorted(maps.Keys(r.clusterRoles)) {
		if grantsApps(r.clusterRoles[name]) {
			t.Errorf("the base ClusterRole %s has a rule on apps: %+v", name, r.clusterRoles[name].Rules)
		}
	}
}

// TestDriverNeverReachesWorkloads: restart on change left the nodes. With
// any set of components, no ClusterRole bound to the node driver's
// ServiceAccount has a rule on the apps group.
func TestDriverNeverReachesWorkloads(t *testing.T) {
	mem := deployFS(t)
	for _, components := range [][]string{
		nil, {restartOnChangePath}, {registrarSidecarPath, restartOnChangePath, secretSyncPath, tokenAudiencesPath},
	} {
		dir := "/deploy"
		if components != nil {
			dir = overlay(t, mem, components...)
		}
		r := mustRender(t, mem, dir)
		for name, b := range clusterRoleBindings(t, mem, dir) {
			role := r.clusterRoles[b.RoleRef.Name]
			if role != nil && slices.Contains(b.Subjects, driverSubject) && grantsApps(role) {
				t.Errorf("components %v: binding %s gives the driver %s, which has a rule on apps: %+v", components, name, role.Name, role.Rules)
			}
		}
	}
}

// TestRestartOnChangeComponent: the component adds one ClusterRole with
// exactly the rules a restart needs, bound to keymount-controller's service
// account, and changes nothing else, alone and with the other components.
func TestRestartOnChangeComponent(t *testing.T) {
	mem := deployFS(t)
	base := mustRender(t, mem, "/deploy")
	tests := []struct {
		name       string
		components []string
	}{
		{name: "alone", components: []string{restartOnChangePath}},
		{name: "with secret-sync", components: []string{secretSyncPath, restartOnChangePath}},
		{name: "with every component", components: []string{registrarSidecarPath, restartOnChangePath, secretSyncPath, tokenAudiencesPath}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := overlay(t, mem, tc.components...)
			r := mustRender(t, mem, dir)
			role, ok := r.clusterRoles[restartRole]
			if !ok {
				t.Fatalf("no ClusterRole %s in %v", restartRole, r.kinds)
			}
			if diff := cmp.Diff(restartRules, role.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			b, ok := clusterRoleBindings(t, mem, dir)[restartRole]
			wantSubjects := []rbacv1.Subject{controllerSubject}
			switch {
			case !ok:
				t.Errorf("no ClusterRoleBinding %s", restartRole)
			case b.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: restartRole}):
				t.Errorf("binding's roleRef %+v", b.RoleRef)
			case !cmp.Equal(wantSubjects, b.Subjects):
				t.Errorf("binding's subjects %+v, want keymount-controller's service account", b.Subjects)
			}
			checkRestartPolicy(t, r)
			// The component is RBAC only: no other role changes.
			for name, want := range base.clusterRoles {
				if diff := cmp.Diff(want, r.clusterRoles[name]); diff != "" {
					t.Errorf("ClusterRole %s changed (-base +with the component):\n%s", name, diff)
				}
			}
		})
	}
	// Without it, the rest of the output is what the other components make.
	without := mustRender(t, mem, overlay(t, mem, secretSyncPath))
	with := mustRender(t, mem, overlay(t, mem, secretSyncPath, restartOnChangePath))
	if diff := cmp.Diff(without.daemonSet, with.daemonSet); diff != "" {
		t.Errorf("the component changed the DaemonSet (-without +with):\n%s", diff)
	}
}

// checkRestartPolicy: the component's admission policy matches updates of
// the workloads the role may patch, by keymount-controller's service
// account alone,
// and is bound with Deny; kustomize's namespace leaves both cluster-scoped.
func checkRestartPolicy(t *testing.T, r *rendered) {
	t.Helper()
	p, b := r.policies[restartRole], r.policyBinds[restartRole]
	if p == nil || b == nil {
		t.Fatalf("no ValidatingAdmissionPolicy and binding %s in %v", restartRole, r.kinds)
	}
	if p.Namespace != "" || b.Namespace != "" {
		t.Errorf("namespaces %q, %q on cluster-scoped objects", p.Namespace, b.Namespace)
	}
	want := "request.userInfo.username == 'system:serviceaccount:kube-system:keymount-controller'"
	if len(p.Spec.MatchConditions) != 1 || p.Spec.MatchConditions[0].Expression != want {
		t.Errorf("matchConditions %+v, want %q", p.Spec.MatchConditions, want)
	}
	rules := p.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Equal(rules[0].Resources, restartRules[1].Resources) ||
		!slices.Equal(rules[0].APIGroups, []string{"apps"}) || !slices.Equal(rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}) {
		t.Errorf("resource rules %+v, want updates of %v", rules, restartRules[1].Resources)
	}
	if b.Spec.PolicyName != restartRole || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v, want %s with Deny", b.Spec, restartRole)
	}
}
