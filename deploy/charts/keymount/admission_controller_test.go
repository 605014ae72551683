package keymount_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// controllerRails are the names (after <fullname>-controller-) of
// keymount-controller's admission policies, one per guard rail.
var controllerRails = []string{"configmaps", "copies", "no-sa-tokens", "no-secret-deletes", "secret-owner", "secret-types", "token-requests"}

// controllerPolicyNames returns the names of the policies (and bindings)
// of keymount-controller that r renders.
func controllerPolicyNames(r *release) (policies, bindings []string) {
	for name := range r.policies {
		if strings.Contains(name, "-controller-") {
			policies = append(policies, name)
		}
	}
	for name := range r.policyBinds {
		if strings.Contains(name, "-controller-") {
			bindings = append(bindings, name)
		}
	}
	slices.Sort(policies)
	slices.Sort(bindings)
	return policies, bindings
}

// variable returns the expression of p's variable name.
func variable(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, name string) string {
	t.Helper()
	if p == nil {
		t.Fatalf("no policy with a variable %s", name)
	}
	for _, v := range p.Spec.Variables {
		if v.Name == name {
			return v.Expression
		}
	}
	t.Fatalf("policy %s has no variable %s", p.Name, name)
	return ""
}

// TestControllerPoliciesOptIn: the controller's guard rails are rendered
// only with controller.enabled (not by default, not with upstream's values),
// then all five, each bound with Deny, failing closed, matching the
// controller's ServiceAccount <fullname>-controller in the release
// namespace alone.
func TestControllerPoliciesOptIn(t *testing.T) {
	for _, f := range []string{"", upstreamValues} {
		if p, b := controllerPolicyNames(render(t, f)); len(p)+len(b) > 0 {
			t.Errorf("values %q render the controller's policies %v and bindings %v", f, p, b)
		}
	}
	r := renderValues(t, map[string]any{"fullnameOverride": "km", "controller": map[string]any{"enabled": true}})
	var want []string
	for _, rail := range controllerRails {
		want = append(want, "km-controller-"+rail)
	}
	policies, bindings := controllerPolicyNames(r)
	if !slices.Equal(policies, want) || !slices.Equal(bindings, want) {
		t.Fatalf("policies %v, bindings %v; want %v each", policies, bindings, want)
	}
	match := "request.userInfo.username == 'system:serviceaccount:" + namespace + ":km-controller'"
	for _, name := range want {
		p, b := r.policies[name], r.policyBinds[name]
		conds := p.Spec.MatchConditions
		switch name {
		case "km-controller-secret-owner":
			// The key of the controller's syncHash is its own Secret; copies
			// have their own rail.
			hashKey := "!(request.namespace == '" + namespace + "' && object.metadata.name == 'keymount-controller-hash-key')"
			notCopy := "!(has(object.metadata.labels) && 'fanout.keymount.io/copy' in object.metadata.labels)"
			if len(conds) != 3 || conds[1].Expression != hashKey || conds[2].Expression != notCopy {
				t.Errorf("%s: matchConditions %+v, want the hash key excepted with %q and copies with %q", name, conds, hashKey, notCopy)
			}
			conds = conds[:min(len(conds), 1)]
		case "km-controller-copies":
			copied := "has(object.metadata.labels) && 'fanout.keymount.io/copy' in object.metadata.labels"
			if len(conds) != 2 || conds[1].Expression != copied {
				t.Errorf("%s: matchConditions %+v, want copies only (%q)", name, conds, copied)
			}
			conds = conds[:min(len(conds), 1)]
		}
		if len(conds) != 1 || conds[0].Expression != match {
			t.Errorf("%s: matchConditions %+v, want %q", name, conds, match)
		}
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("%s: failurePolicy %v, want Fail", name, p.Spec.FailurePolicy)
		}
		if b.Spec.PolicyName != name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
			t.Errorf("binding %+v, want %s with Deny", b.Spec, name)
		}
	}
}

// TestControllerPolicyValues: the allowed Secret types are upstream's by
// default and follow controller.allowedSecretTypes; the token audiences are
// controller.tokenRequestAudiences (objects or plain names), with the AWS
// provider's when it is on, each once; none by default. Values the
// policies cannot hold fail the render with the key to fix.
func TestControllerPolicyValues(t *testing.T) {
	on := map[string]any{"enabled": true}
	r := renderValues(t, map[string]any{"controller": on})
	upstreamTypes := "['Opaque', 'kubernetes.io/basic-auth', 'bootstrap.kubernetes.io/token', 'kubernetes.io/dockerconfigjson', " +
		"'kubernetes.io/dockercfg', 'kubernetes.io/ssh-auth', 'kubernetes.io/tls']"
	if got := variable(t, r.policies[releaseName+"-controller-secret-types"], "allowedTypes"); got != upstreamTypes {
		t.Errorf("default allowed types %s, want upstream's %s", got, upstreamTypes)
	}
	if got := variable(t, r.policies[releaseName+"-controller-token-requests"], "allowedAudiences"); got != "[]" {
		t.Errorf("default audiences %s, want none", got)
	}
	r = renderValues(t, map[string]any{
		"controller": map[string]any{"enabled": true, "allowedSecretTypes": []any{"Opaque", "kubernetes.io/tls"},
			"tokenRequestAudiences": []any{map[string]any{"audience": "api://AzureADTokenExchange"}, "vault", map[string]any{"audience": "sts.amazonaws.com"}}},
		"providers": map[string]any{"aws": map[string]any{"enabled": true}},
	})
	if got, want := variable(t, r.policies[releaseName+"-controller-secret-types"], "allowedTypes"), "['Opaque', 'kubernetes.io/tls']"; got != want {
		t.Errorf("allowed types %s, want %s", got, want)
	}
	want := "['api://AzureADTokenExchange', 'vault', 'sts.amazonaws.com', 'pods.eks.amazonaws.com']"
	if got := variable(t, r.policies[releaseName+"-controller-token-requests"], "allowedAudiences"); got != want {
		t.Errorf("audiences %s, want %s", got, want)
	}
	for _, tc := range []struct {
		name       string
		controller map[string]any
		want       string
	}{
		{"service account token type", map[string]any{"allowedSecretTypes": []any{"Opaque", "kubernetes.io/service-account-token"}}, "controller.allowedSecretTypes: kubernetes.io/service-account-token is never allowed"},
		{"quote in a type", map[string]any{"allowedSecretTypes": []any{"x' || true || '"}}, "controller.allowedSecretTypes"},
		{"quote in an audience", map[string]any{"tokenRequestAudiences": []any{"a' || true || '"}}, "controller.tokenRequestAudiences"},
		{"audience without name", map[string]any{"tokenRequestAudiences": []any{map[string]any{"expirationSeconds": 600}}}, "controller.tokenRequestAudiences"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := map[string]any{"controller": merge(on, tc.controller)}
			if _, err := renderRaw(loadChart(t), vals); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestControllerPoliciesMatchKustomize: components/controller-admission
// ships the chart's controller policies and bindings, components/
// push-admission its push-paths policy (for the release keymount in
// kube-system with the default values), spec for spec.
func TestControllerPoliciesMatchKustomize(t *testing.T) {
	k := kustomize(t, "", "controller-admission", "push-admission")
	r := renderValues(t, map[string]any{"controller": map[string]any{"enabled": true}})
	if len(k.policies) != len(controllerRails)+1 {
		t.Errorf("the components ship policies %v, want one per rail and push-paths", slices.Sorted(maps.Keys(k.policies)))
	}
	comparePolicies(t, k, r)
}

// checkControllerPolicies: all-features.yaml's controller values reach the
// guard rails, the AWS provider's audiences with them.
func checkControllerPolicies(t *testing.T, r *release) {
	t.Helper()
	types := variable(t, r.policies[releaseName+"-controller-secret-types"], "allowedTypes")
	audiences := variable(t, r.policies[releaseName+"-controller-token-requests"], "allowedAudiences")
	if types != "['Opaque', 'kubernetes.io/tls']" || audiences != "['vault', 'sts.amazonaws.com', 'pods.eks.amazonaws.com']" {
		t.Errorf("allowed types %s, audiences %s; want all-features.yaml's (and the AWS provider's audiences)", types, audiences)
	}
}

// TestControllerSecretPolicies: each of controller.secretPolicies switches
// its one variable of the guard rails to "true" (the rest of every policy
// as without it, so the kustomize component's documented patch is the same
// switch), and delete alone adds delete on Secrets to the controller's
// ClusterRole.
func TestControllerSecretPolicies(t *testing.T) {
	base := renderValues(t, map[string]any{"controller": map[string]any{"enabled": true}})
	owner, deletes := releaseName+"-controller-secret-owner", releaseName+"-controller-no-secret-deletes"
	for _, tc := range []struct{ value, policy, variable string }{
		{"orphan", owner, "orphanAllowed"},
		{"merge", owner, "mergeAllowed"},
		{"delete", deletes, "deleteAllowed"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			r := renderValues(t, map[string]any{"controller": map[string]any{"enabled": true,
				"secretPolicies": map[string]any{tc.value: true}}})
			if got := variable(t, base.policies[tc.policy], tc.variable); got != "false" {
				t.Errorf("by default %s of %s is %q, want false", tc.variable, tc.policy, got)
			}
			want := base.policies[tc.policy].DeepCopy()
			for i, v := range want.Spec.Variables {
				if v.Name == tc.variable {
					want.Spec.Variables[i].Expression = "true"
				}
			}
			if diff := cmp.Diff(want, r.policies[tc.policy]); diff != "" {
				t.Errorf("%s with %s (-want +got):\n%s", tc.policy, tc.value, diff)
			}
			for name, p := range base.policies {
				if name != tc.policy && !cmp.Equal(p, r.policies[name]) {
					t.Errorf("%s changed with %s", name, tc.value)
				}
			}
			role := r.clusterRoles[releaseName+"-controller"]
			if role == nil {
				t.Fatal("no ClusterRole of the controller")
			}
			deletesSecrets := false
			for _, rule := range role.Rules {
				deletesSecrets = deletesSecrets || slices.Contains(rule.Resources, "secrets") && slices.Contains(rule.Verbs, "delete")
			}
			if deletesSecrets != (tc.value == "delete") {
				t.Errorf("with %s the ClusterRole deletes Secrets: %v, want %v", tc.value, deletesSecrets, tc.value == "delete")
			}
		})
	}
}
