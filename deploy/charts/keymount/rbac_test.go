package keymount_test

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// rules returns every rule of every Role and ClusterRole rendered, by
// object name.
func (r *release) rules(t *testing.T) map[string][]rbacv1.PolicyRule {
	t.Helper()
	out := map[string][]rbacv1.PolicyRule{}
	for _, u := range r.objects {
		if u.GetKind() != "Role" && u.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole // a Role's rules have the same shape
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		out[u.GetKind()+"/"+u.GetName()] = role.Rules
	}
	return out
}

// grants reports whether rule allows verb on resource of group.
func grants(rule rbacv1.PolicyRule, group, resource, verb string) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	return has(rule.APIGroups, group) && has(rule.Resources, resource) && has(rule.Verbs, verb)
}

// touchesSecrets reports whether rule allows anything on core Secrets.
func touchesSecrets(rule rbacv1.PolicyRule) bool {
	return (slices.Contains(rule.APIGroups, "") || slices.Contains(rule.APIGroups, "*")) &&
		(slices.Contains(rule.Resources, "secrets") || slices.Contains(rule.Resources, "*"))
}

// boundToDriver reports whether a ClusterRoleBinding gives the ClusterRole
// name to the driver's ServiceAccount.
func (r *release) boundToDriver(name string) bool {
	for _, b := range r.bindings {
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != name {
			continue
		}
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == releaseName && s.Namespace == namespace {
				return true
			}
		}
	}
	return false
}

// TestSecretsOnlyWithSync: with syncSecret.enabled off no rendered role
// but keymount-controller's has a rule on Secrets and the driver runs with --sync-secrets=false
// (never auto, which would look for such rules); on, the secret-sync
// ClusterRole grants exactly what sync uses, bound to the driver, and the
// driver runs with --sync-secrets=true.
func TestSecretsOnlyWithSync(t *testing.T) {
	syncOff := map[string]any{"syncSecret": map[string]any{"enabled": false}}
	syncOn := map[string]any{"syncSecret": map[string]any{"enabled": true}}
	for _, f := range valuesFiles {
		for _, sync := range []bool{false, true} {
			layer := map[bool]map[string]any{false: syncOff, true: syncOn}[sync]
			name := map[bool]string{false: "off", true: "on"}[sync]
			t.Run(name+"/"+f, func(t *testing.T) {
				r := renderValues(t, merge(readValues(t, f), layer))
				_, c := r.driver(t)
				want := map[bool]string{false: "--sync-secrets=false", true: "--sync-secrets=true"}[sync]
				if !hasArg(c.Args, want) {
					t.Errorf("args %q lack %s", c.Args, want)
				}
				var secretRoles []string
				for role, rules := range r.rules(t) {
					// keymount-controller's own role, bound to its own
					// ServiceAccount (TestControllerRBAC).
					if role == "ClusterRole/"+controllerName {
						continue
					}
					if slices.ContainsFunc(rules, touchesSecrets) {
						secretRoles = append(secretRoles, role)
					}
				}
				if !sync {
					if len(secretRoles) > 0 {
						t.Errorf("sync off, yet %v have rules on Secrets", secretRoles)
					}
					return
				}
				role := "ClusterRole/" + releaseName + "-secret-sync"
				if !slices.Equal(secretRoles, []string{role}) {
					t.Errorf("roles with rules on Secrets %v, want %s alone", secretRoles, role)
				}
				for _, verb := range []string{"get", "list", "watch", "create", "patch", "delete"} {
					if !slices.ContainsFunc(r.rules(t)[role], func(rule rbacv1.PolicyRule) bool { return grants(rule, "", "secrets", verb) }) {
						t.Errorf("%s does not grant %s on secrets", role, verb)
					}
				}
				if !r.boundToDriver(releaseName + "-secret-sync") {
					t.Errorf("%s is not bound to the driver's ServiceAccount", role)
				}
			})
		}
	}
}

// TestRestartOnChangeOptIn: no rule lets the driver patch workloads unless
// restartOnChange.enabled; on, the rules restart on change uses are bound
// to the driver.
func TestRestartOnChangeOptIn(t *testing.T) {
	patchesWorkloads := func(rules map[string][]rbacv1.PolicyRule) []string {
		var names []string
		for name, rs := range rules {
			for _, res := range []string{"deployments", "statefulsets", "daemonsets"} {
				if slices.ContainsFunc(rs, func(rule rbacv1.PolicyRule) bool { return grants(rule, "apps", res, "patch") }) {
					names = append(names, name)
					break
				}
			}
		}
		return names
	}
	if got := patchesWorkloads(render(t, "").rules(t)); len(got) > 0 {
		t.Errorf("by default %v may patch workloads", got)
	}
	if got := patchesWorkloads(render(t, upstreamValues).rules(t)); len(got) > 0 {
		t.Errorf("with upstream's values %v may patch workloads", got)
	}
	r := renderValues(t, map[string]any{"restartOnChange": map[string]any{"enabled": true}})
	role := releaseName + "-restart-on-change"
	if got := patchesWorkloads(r.rules(t)); !slices.Equal(got, []string{"ClusterRole/" + role}) {
		t.Errorf("roles that may patch workloads %v, want %s alone", got, role)
	}
	if !r.boundToDriver(role) {
		t.Errorf("%s is not bound to the driver's ServiceAccount", role)
	}
}

// TestRestartOnChangePolicy: the admission policy that limits the driver's
// workload patches comes with the rules that allow them, and not without
// them, bound with Deny, matching the release's own ServiceAccount.
func TestRestartOnChangePolicy(t *testing.T) {
	if r := render(t, ""); len(r.policies)+len(r.policyBinds) > 0 {
		t.Errorf("by default the chart renders admission policies %v %v", r.policies, r.policyBinds)
	}
	r := renderValues(t, map[string]any{
		"restartOnChange": map[string]any{"enabled": true},
		"serviceAccount":  map[string]any{"name": "node-sa"},
	})
	name := releaseName + "-restart-on-change"
	p, b := r.policies[name], r.policyBinds[name]
	if p == nil || b == nil {
		t.Fatalf("policies %v, bindings %v; want %s", r.policies, r.policyBinds, name)
	}
	want := "request.userInfo.username == 'system:serviceaccount:" + namespace + ":node-sa'"
	if len(p.Spec.MatchConditions) != 1 || p.Spec.MatchConditions[0].Expression != want {
		t.Errorf("matchConditions %+v, want %q", p.Spec.MatchConditions, want)
	}
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", p.Spec.FailurePolicy)
	}
	if b.Spec.PolicyName != name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v, want %s with Deny", b.Spec, name)
	}
}

// TestAggregatedRolesAsUpstream: upstream's three aggregated ClusterRoles
// exist under upstream's names with their aggregation labels, and with
// rbac.install off none of the chart's RBAC is rendered.
func TestAggregatedRolesAsUpstream(t *testing.T) {
	want := map[string][]string{
		"secretproviderclasses-admin-role":           {"rbac.authorization.k8s.io/aggregate-to-admin", "rbac.authorization.k8s.io/aggregate-to-edit"},
		"secretproviderclasses-viewer-role":          {"rbac.authorization.k8s.io/aggregate-to-view"},
		"secretproviderclasspodstatuses-viewer-role": {"rbac.authorization.k8s.io/aggregate-to-view"},
	}
	r := render(t, "")
	for name, labels := range want {
		role := r.clusterRoles[name]
		if role == nil {
			t.Errorf("no ClusterRole %s", name)
			continue
		}
		for _, l := range labels {
			if role.Labels[l] != "true" {
				t.Errorf("%s lacks label %s=true", name, l)
			}
		}
	}
	off := renderValues(t, map[string]any{"rbac": map[string]any{"install": false}})
	for _, u := range off.objects {
		switch u.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			t.Errorf("rbac.install=false renders %s %s", u.GetKind(), u.GetName())
		}
	}
	if _, c := off.driver(t); !hasArg(c.Args, "--sync-secrets=false") {
		t.Errorf("rbac.install=false: args %q lack --sync-secrets=false", c.Args)
	}
}
