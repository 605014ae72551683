package keymount_test

import (
	"slices"
	"strings"
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
// has a rule on Secrets and the driver runs with --sync-secrets=false
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
					// keymount-controller's roles (SecretSync, restart on
					// change) are not the driver's.
					if role == "ClusterRole/"+releaseName+"-controller" || role == "ClusterRole/"+releaseName+"-restart-on-change" {
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

// boundTo reports whether a ClusterRoleBinding gives the ClusterRole name to
// the ServiceAccount sa of the release's namespace.
func (r *release) boundTo(name, sa string) bool {
	for _, b := range r.bindings {
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != name {
			continue
		}
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == namespace {
				return true
			}
		}
	}
	return false
}

// onWorkloads returns the roles with a rule on apps workloads.
func onWorkloads(rules map[string][]rbacv1.PolicyRule) []string {
	var names []string
	for name, rs := range rules {
		for _, res := range []string{"deployments", "statefulsets", "daemonsets", "replicasets"} {
			if slices.ContainsFunc(rs, func(rule rbacv1.PolicyRule) bool {
				return slices.ContainsFunc([]string{"get", "list", "watch", "patch", "update"}, func(v string) bool { return grants(rule, "apps", res, v) })
			}) {
				names = append(names, name)
				break
			}
		}
	}
	slices.Sort(names)
	return names
}

// TestRestartOnChangeOptIn: restart on change is keymount-controller's: no
// rule on workloads is ever bound to the node driver, whatever the values;
// the rules restart on change uses exist only with restartOnChange.enabled
// and controller.enabled, bound to the controller's ServiceAccount.
func TestRestartOnChangeOptIn(t *testing.T) {
	role := releaseName + "-restart-on-change"
	both := map[string]any{"restartOnChange": map[string]any{"enabled": true}, "controller": map[string]any{"enabled": true}}
	releases := map[string]*release{
		"default": render(t, ""), "upstream's values": render(t, upstreamValues), "all features": render(t, allFeatures),
		"restartOnChange alone":          renderValues(t, map[string]any{"restartOnChange": map[string]any{"enabled": true}}),
		"restartOnChange and controller": renderValues(t, both),
	}
	for name, r := range releases {
		for _, role := range onWorkloads(r.rules(t)) {
			if r.boundToDriver(strings.TrimPrefix(role, "ClusterRole/")) {
				t.Errorf("%s: the driver's ServiceAccount is bound to %s, which reaches workloads", name, role)
			}
		}
	}
	for _, name := range []string{"default", "upstream's values", "restartOnChange alone"} {
		if got := onWorkloads(releases[name].rules(t)); len(got) > 0 {
			t.Errorf("%s: %v reach workloads, want none", name, got)
		}
	}
	r := releases["restartOnChange and controller"]
	if got := onWorkloads(r.rules(t)); !slices.Equal(got, []string{"ClusterRole/" + role}) {
		t.Errorf("roles that reach workloads %v, want %s alone", got, role)
	}
	if !r.boundTo(role, releaseName+"-controller") {
		t.Errorf("%s is not bound to the controller's ServiceAccount %s-controller", role, releaseName)
	}
}

// TestRestartOnChangePolicy: the admission policy that limits the
// controller's workload patches comes with the rules that allow them, and
// not without them, bound with Deny, matching the release's controller
// ServiceAccount (never the driver's).
func TestRestartOnChangePolicy(t *testing.T) {
	if r := render(t, ""); len(r.policies)+len(r.policyBinds) > 0 {
		t.Errorf("by default the chart renders admission policies %v %v", r.policies, r.policyBinds)
	}
	name := releaseName + "-restart-on-change"
	if r := renderValues(t, map[string]any{"restartOnChange": map[string]any{"enabled": true}}); r.policies[name] != nil {
		t.Errorf("without the controller the chart renders the policy %s", name)
	}
	r := renderValues(t, map[string]any{
		"restartOnChange": map[string]any{"enabled": true},
		"controller":      map[string]any{"enabled": true},
		"serviceAccount":  map[string]any{"name": "node-sa"},
	})
	p, b := r.policies[name], r.policyBinds[name]
	if p == nil || b == nil {
		t.Fatalf("policies %v, bindings %v; want %s", r.policies, r.policyBinds, name)
	}
	want := "request.userInfo.username == 'system:serviceaccount:" + namespace + ":" + releaseName + "-controller'"
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
