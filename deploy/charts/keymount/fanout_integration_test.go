//go:build integration

package keymount_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/reflector"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/k8senv"
)

// TestFanoutUnderGuardRails: the reflector reconcilers, acting as the
// chart's controller ServiceAccount with the chart's guard rails in force,
// create, update (server-side apply, dropped keys), adopt and delete
// copies and keep a manual mirror, all admitted; a same-named Secret they
// did not write stays untouched.
func TestFanoutUnderGuardRails(t *testing.T) {
	vals := map[string]any{"controller": map[string]any{"enabled": true, "fanout": map[string]any{"enabled": true},
		"tokenRequestAudiences": []any{map[string]any{"audience": policyAudience}}}}
	g, env := startGuardRailsEnv(t, controllerPolicies(t, vals))
	ctx := t.Context()
	g.waitInForce(t, g.namespace(t))
	// The fan-out rules beyond the test's Secret rights: namespaces, events.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-fanout"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}}
	if _, err := g.admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-fanout"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: controllerUser}}}
	if _, err := g.admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"f-src", "f-1", "f-adopt", "f-theirs", "f-manual"} {
		if _, err := g.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	secret := func(ns, name string, annotations, data map[string]string) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}, Type: corev1.SecretTypeTLS,
			StringData: map[string]string{corev1.TLSCertKey: "cert", corev1.TLSPrivateKeyKey: "key"}}
		for k, v := range data {
			s.StringData[k] = v
		}
		if _, err := g.admin.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{FieldManager: "someone"}); err != nil {
			t.Fatal(err)
		}
	}
	secret("f-theirs", "tls", nil, map[string]string{"mine": "keep"})
	secret("f-adopt", "tls", map[string]string{reflector.AnnotationReflects: "f-src/tls", reflector.AnnotationAutoReflects: "True"},
		map[string]string{"stale": "x"})
	secret("f-manual", "mirror", map[string]string{reflector.AnnotationReflects: "f-src/tls"}, nil)
	secret("f-src", "tls", map[string]string{
		reflector.AnnotationAllowed: "true", reflector.AnnotationAutoEnabled: "true",
		reflector.AnnotationAllowedNamespaces: "f-.*", reflector.AnnotationAutoNamespaces: "f-1,f-adopt,f-theirs",
	}, map[string]string{"extra": "1"})

	runReflector(t, env)
	want := map[string]string{corev1.TLSCertKey: "cert", corev1.TLSPrivateKeyKey: "key", "extra": "1"}
	for _, key := range [][2]string{{"f-1", "tls"}, {"f-adopt", "tls"}, {"f-manual", "mirror"}} {
		ctrltest.WaitSecret(t, g.admin, key[0], key[1], ctrltest.HasData(want))
	}
	// The source loses a key: every copy drops it (a merge patch beside
	// the apply), admitted.
	src, err := g.admin.CoreV1().Secrets("f-src").Get(ctx, "tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(src.Data, "extra")
	if _, err := g.admin.CoreV1().Secrets("f-src").Update(ctx, src, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	delete(want, "extra")
	for _, key := range [][2]string{{"f-1", "tls"}, {"f-adopt", "tls"}, {"f-manual", "mirror"}} {
		ctrltest.WaitSecret(t, g.admin, key[0], key[1], ctrltest.HasData(want))
	}
	ctrltest.WaitSecret(t, g.admin, "f-theirs", "tls",
		ctrltest.HasData(map[string]string{corev1.TLSCertKey: "cert", corev1.TLSPrivateKeyKey: "key", "mine": "keep"}))
	// The source goes: its automatic copies with it (deletes admitted),
	// the manual mirror and the unowned Secret stay.
	if err := g.admin.CoreV1().Secrets("f-src").Delete(ctx, "tls", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"f-1", "f-adopt"} {
		ctrltest.WaitSecret(t, g.admin, ns, "tls", func(s *corev1.Secret) error {
			if s != nil {
				return fmt.Errorf("still exists")
			}
			return nil
		})
	}
	for _, key := range [][2]string{{"f-manual", "mirror"}, {"f-theirs", "tls"}} {
		if _, err := g.admin.CoreV1().Secrets(key[0]).Get(ctx, key[1], metav1.GetOptions{}); err != nil {
			t.Errorf("%s/%s after the source's deletion: %v, want it kept", key[0], key[1], err)
		}
	}
}

// startGuardRailsEnv is startGuardRails, also returning the environment.
func startGuardRailsEnv(t *testing.T, objs []*unstructured.Unstructured) (*guardRails, *k8senv.Env) {
	t.Helper()
	var env *k8senv.Env
	g := startGuardRailsWith(t, objs, func(e *k8senv.Env) { env = e })
	return g, env
}

// runReflector starts the reflector reconcilers as the controller's
// ServiceAccount, until the test ends.
func runReflector(t *testing.T, env *k8senv.Env) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr := ctrltest.NewManager(t, cfg, ctrl.Options{Scheme: scheme})
	c, err := fanout.NewCache(mgr)
	if err != nil {
		t.Fatal(err)
	}
	if err := reflector.SetupWithManager(t.Context(), mgr, reflector.Options{Cache: c}); err != nil {
		t.Fatal(err)
	}
	ctrltest.Start(t, mgr)
}
