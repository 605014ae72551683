//go:build integration

package secretsync_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsync "github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// railsFile holds keymount-controller's guard rails as the
// controller-admission component ships them (the chart renders the same,
// deploy/charts/keymount's TestControllerPoliciesMatchKustomize).
const railsFile = "../../deploy/components/controller-admission/admission.yaml"

// The two rails External Secrets' policies widen, and their switches.
const (
	railOwner   = "keymount-controller-secret-owner"
	railDeletes = "keymount-controller-no-secret-deletes"
)

// rails are the secret-owner and no-secret-deletes rails of railsFile in
// force on the shared API server for one controller's user alone (the
// ServiceAccount keymount-controller of the controller's namespace; the
// policies' names carry that namespace).
type rails struct {
	admin        kubernetes.Interface
	controller   kubernetes.Interface
	ns, suffix   string
	switchesTrue []string // variables set to "true" when applied
}

// asGuardedController returns the fixture's controller config for a user
// bound by the rails, with the variables named (of either rail: orphanAllowed,
// mergeAllowed, deleteAllowed) "true", as docs/secrets-without-pods.md
// tells kustomize users; RBAC lets that user do anything (RBAC is not what
// is tested). It waits until the API server enforces the rails.
func asGuardedController(t *testing.T, r **rails, switches ...string) func(env *k8senv.Env, controllerNS string) *rest.Config {
	return func(env *k8senv.Env, controllerNS string) *rest.Config {
		t.Helper()
		ctx := t.Context()
		user := "system:serviceaccount:" + controllerNS + ":keymount-controller"
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + controllerNS, "system:authenticated"}}
		g := &rails{admin: kubernetes.NewForConfigOrDie(env.Config), controller: kubernetes.NewForConfigOrDie(cfg),
			ns: controllerNS, suffix: "-" + controllerNS, switchesTrue: switches}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rails" + g.suffix},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
		if _, err := g.admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = g.admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		})
		g.apply(t, user)
		*r = g
		return cfg
	}
}

// apply creates the two rails and their bindings from railsFile for user,
// with the controller's namespace for the key of its syncHash, and waits
// until both are enforced.
func (g *rails) apply(t *testing.T, user string) {
	t.Helper()
	ctx := t.Context()
	raw, err := os.ReadFile(railsFile)
	if err != nil {
		t.Fatal(err)
	}
	api := g.admin.AdmissionregistrationV1()
	found := 0
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			if err := yaml.UnmarshalStrict(doc, &p); err != nil {
				t.Fatal(err)
			}
			if p.Name != railOwner && p.Name != railDeletes {
				continue
			}
			found++
			g.adapt(&p, user)
			if _, err := api.ValidatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s: %v", p.Name, err)
			}
		case "ValidatingAdmissionPolicyBinding":
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if err := yaml.UnmarshalStrict(doc, &b); err != nil {
				t.Fatal(err)
			}
			if b.Spec.PolicyName != railOwner && b.Spec.PolicyName != railDeletes {
				continue
			}
			found++
			b.Name += g.suffix
			b.Spec.PolicyName += g.suffix
			if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s: %v", b.Name, err)
			}
		}
	}
	if found != 4 {
		t.Fatalf("%s: found %d of the policies %s, %s and their bindings", railsFile, found, railOwner, railDeletes)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, name := range []string{railOwner, railDeletes} {
			_ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, name+g.suffix, metav1.DeleteOptions{})
			_ = api.ValidatingAdmissionPolicies().Delete(ctx, name+g.suffix, metav1.DeleteOptions{})
		}
	})
	// Someone else's Secret: the controller may neither write it as its
	// own nor delete it, with or without the switches.
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: g.ns}, StringData: map[string]string{"k": "v"}}
	if _, err := g.admin.CoreV1().Secrets(g.ns).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.waitEnforced(t, "the rails", func(ctx context.Context) bool {
		_, create := g.controller.CoreV1().Secrets(g.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		del := g.controller.CoreV1().Secrets(g.ns).Delete(ctx, "theirs", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return denied(create, railOwner) && denied(del, railDeletes)
	})
}

// adapt makes p a policy of the fixture's controller: for user, with the
// key of its syncHash in its namespace, the switches on, named with the
// suffix.
func (g *rails) adapt(p *admissionregistrationv1.ValidatingAdmissionPolicy, user string) {
	for i, c := range p.Spec.MatchConditions {
		c.Expression = strings.ReplaceAll(c.Expression, "system:serviceaccount:kube-system:keymount-controller", user)
		c.Expression = strings.ReplaceAll(c.Expression, "request.namespace == 'kube-system'", "request.namespace == '"+g.ns+"'")
		p.Spec.MatchConditions[i] = c
	}
	for i, v := range p.Spec.Variables {
		if slices.Contains(g.switchesTrue, v.Name) {
			p.Spec.Variables[i].Expression = "true"
		}
	}
	p.Name += g.suffix
}

// denied reports whether err is the denial of the policy named (with
// its suffix).
func denied(err error, policy string) bool {
	return err != nil && strings.Contains(err.Error(), policy)
}

// waitEnforced waits until enforced holds.
func (g *rails) waitEnforced(t *testing.T, what string, enforced func(ctx context.Context) bool) {
	t.Helper()
	err := poll.Wait(t.Context(), 60*time.Second, func(ctx context.Context) (bool, error) { return enforced(ctx), nil })
	if err != nil {
		t.Fatalf("the API server never enforced %s: %v", what, err)
	}
}

// set sets the rail's variable to value and waits until the API server
// enforces it, as shown by a dry run of probe.
func (g *rails) set(t *testing.T, rail, variable, value string, enforced func(ctx context.Context) bool) {
	t.Helper()
	p, err := g.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(t.Context(), rail+g.suffix, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	i := -1
	for j, v := range p.Spec.Variables {
		if v.Name == variable {
			i = j
		}
	}
	if i < 0 {
		t.Fatalf("policy %s has no variable %s", p.Name, variable)
	}
	patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/variables/" + strconv.Itoa(i) + "/expression", "value": value}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Patch(t.Context(), p.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	g.waitEnforced(t, variable+" "+value, enforced)
}

// TestSecretSyncPoliciesUnderGuardRails: keymount-controller's own requests
// for creation policies Orphan and Merge and deletion policy Delete pass
// the guard rails of components/controller-admission (the chart's) once
// their switches are on, as docs/secrets-without-pods.md says: the Orphan,
// Merge and Delete cases of TestSecretSyncPolicies run as a user the rails
// bind. With orphanAllowed back to "false", an Orphan SecretSync fails
// with ControllerPatchError naming the rail and the switch.
func TestSecretSyncPoliciesUnderGuardRails(t *testing.T) {
	var g *rails
	f := startFixtureAs(t, secretsync.Config{Backoff: rotation.Backoff{Initial: 200 * time.Millisecond, Max: time.Second}},
		asGuardedController(t, &g, "orphanAllowed", "mergeAllowed", "deleteAllowed"))
	t.Run("Orphan", func(t *testing.T) { checkOrphan(t, f) })
	t.Run("Merge", func(t *testing.T) { checkMerge(t, f) })
	t.Run("Delete", func(t *testing.T) { checkDelete(t, f) })
	t.Run("Orphan without its switch", func(t *testing.T) {
		marked := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe-orphan",
			Annotations: map[string]string{secretsync.AnnotationSecretSyncUID: "0000"}}}
		g.set(t, railOwner, "orphanAllowed", "false", func(ctx context.Context) bool {
			_, err := g.controller.CoreV1().Secrets(g.ns).Create(ctx, marked, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return denied(err, railOwner)
		})
		ns, _ := policyNamespace(t, f, "orphan-refused")
		key := policySync(t, f, ns, "creds", "Orphan", "")
		got := waitCondition(t, f, key, metav1.ConditionFalse, ss1.ReasonControllerPatchError)
		msg := conditionMessage(got, ss1.ConditionReady)
		for _, w := range []string{railOwner, "orphanAllowed", "controller.secretPolicies.orphan"} {
			if !strings.Contains(msg, w) {
				t.Errorf("Ready message %q lacks %s", msg, w)
			}
		}
	})
}
