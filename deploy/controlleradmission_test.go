package deploy_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

const controllerAdmissionPath = "components/controller-admission"

// The component's policies, one per guard rail of keymount-controller.
var controllerPolicies = []string{
	"keymount-controller-configmaps", "keymount-controller-copies", "keymount-controller-no-sa-tokens", "keymount-controller-no-secret-deletes", "keymount-controller-secret-owner",
	"keymount-controller-secret-types", "keymount-controller-token-requests",
}

// TestControllerAdmissionComponent: the component adds keymount-controller's
// seven policies, each bound with Deny and matching the controller's
// ServiceAccount in the base's namespace, alone and with every other
// component, and changes nothing else; the overlay its comments document
// sets the allowed token audiences and nothing more.
func TestControllerAdmissionComponent(t *testing.T) {
	mem := deployFS(t)
	base := mustRender(t, mem, "/deploy")
	for _, components := range [][]string{
		{controllerAdmissionPath},
		{registrarSidecarPath, restartOnChangePath, secretSyncPath, tokenAudiencesPath, controllerAdmissionPath},
	} {
		r := mustRender(t, mem, overlay(t, mem, components...))
		for _, name := range controllerPolicies {
			checkControllerPolicy(t, r.policies[name], r.policyBinds[name], name)
		}
		if diff := cmp.Diff(base.daemonSet, r.daemonSet); diff != "" && len(components) == 1 {
			t.Errorf("the component changed the DaemonSet (-base +with it):\n%s", diff)
		}
	}
	alone := mustRender(t, mem, overlay(t, mem, controllerAdmissionPath))
	if got := slices.Sorted(maps.Keys(alone.policies)); !slices.Equal(got, controllerPolicies) {
		t.Errorf("policies %v, want %v", got, controllerPolicies)
	}
	if err := mem.WriteFile("/overlay/kustomization.yaml", []byte(documentedExample(t, mem, controllerAdmissionPath))); err != nil {
		t.Fatal(err)
	}
	example := mustRender(t, mem, "/overlay")
	const tokens = "keymount-controller-token-requests"
	got, want := example.policies[tokens], alone.policies[tokens].DeepCopy()
	want.Spec.Variables[0].Expression = "['sts.amazonaws.com', 'pods.eks.amazonaws.com']"
	if want.Spec.Variables[0].Name != "allowedAudiences" || alone.policies[tokens].Spec.Variables[0].Expression != "[]" {
		t.Errorf("the shipped variables of %s: %+v, want allowedAudiences first and empty", tokens, alone.policies[tokens].Spec.Variables)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the documented example's %s (-want +got):\n%s", tokens, diff)
	}
}

// checkControllerPolicy: p matches requests of keymount-controller's
// ServiceAccount alone, fails closed, and b binds it with Deny.
func checkControllerPolicy(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, name string) {
	t.Helper()
	if p == nil || b == nil {
		t.Fatalf("no ValidatingAdmissionPolicy and binding %s", name)
	}
	want := []admissionregistrationv1.MatchCondition{{Name: "keymount-controller",
		Expression: "request.userInfo.username == 'system:serviceaccount:kube-system:keymount-controller'"}}
	copied := "has(object.metadata.labels) && 'fanout.keymount.io/copy' in object.metadata.labels"
	switch name {
	case "keymount-controller-secret-owner":
		// The key of the controller's syncHash is its own Secret; copies
		// have their own rail.
		want = append(want, admissionregistrationv1.MatchCondition{Name: "not-hash-key",
			Expression: "!(request.namespace == 'kube-system' && object.metadata.name == 'keymount-controller-hash-key')"},
			admissionregistrationv1.MatchCondition{Name: "not-copy", Expression: "!(" + copied + ")"})
	case "keymount-controller-copies":
		want = append(want, admissionregistrationv1.MatchCondition{Name: "copy", Expression: copied})
	}
	if diff := cmp.Diff(want, p.Spec.MatchConditions); diff != "" {
		t.Errorf("%s: matchConditions (-want +got):\n%s", name, diff)
	}
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("%s: failurePolicy %v, want Fail", name, p.Spec.FailurePolicy)
	}
	if p.Namespace != "" || b.Namespace != "" {
		t.Errorf("%s: namespaced (%q, %q); policies are cluster-scoped", name, p.Namespace, b.Namespace)
	}
	if b.Spec.PolicyName != name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v, want %s with Deny", b.Spec, name)
	}
}
