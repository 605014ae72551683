//go:build vault

package vaultenv_test

import (
	"testing"

	vaultapi "github.com/hashicorp/vault/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/motoserver"
	"github.com/keymount/keymount/tests/vaultenv"
)

// TestVault starts Vault with everything and uses each part once: KV v1 and
// v2, PKI, a renewable AWS lease, Kubernetes and JWT logins with a real
// TokenRequest token, and the audit log counting them.
func TestVault(t *testing.T) {
	// Own control plane: the package's only test (Shared would save nothing).
	env := k8senv.Start(t, k8senv.Options{})
	v := vaultenv.Start(t, vaultenv.Options{Kube: env, AWSEndpoint: motoserver.Start(t)})

	t.Run("KV", func(t *testing.T) {
		v.Write(t, "kv1/app", map[string]any{"password": "one"})
		if got := read(t, v.Client, "kv1/app").Data["password"]; got != "one" {
			t.Errorf("kv1/app password = %v, want one", got)
		}
		if n := v.PutKVv2(t, "app", map[string]any{"password": "two"}); n != 1 {
			t.Errorf("first KV v2 version = %d, want 1", n)
		}
		if n := v.PutKVv2(t, "app", map[string]any{"password": "three"}); n != 2 {
			t.Errorf("second KV v2 version = %d, want 2", n)
		}
		data, _ := read(t, v.Client, "secret/data/app").Data["data"].(map[string]any)
		if data["password"] != "three" {
			t.Errorf("secret/app password = %v, want three", data["password"])
		}
	})
	t.Run("PKI", func(t *testing.T) {
		v.PKIRole(t, "web", 3600e9, true)
		s := v.Write(t, "pki/issue/web", map[string]any{"common_name": "a.example.com"})
		if s.Data["certificate"] == "" || s.LeaseID == "" || s.Renewable {
			t.Errorf("pki issue: certificate %t, lease %q, renewable %t; want a certificate with a non-renewable lease",
				s.Data["certificate"] != "", s.LeaseID, s.Renewable)
		}
	})
	t.Run("AWS", func(t *testing.T) {
		v.AWSRole(t, "app", 600e9, 3600e9)
		s := read(t, v.Client, "aws/creds/app")
		if s.Data["access_key"] == nil || s.LeaseID == "" || !s.Renewable {
			t.Fatalf("aws creds: lease %q renewable %t; want a renewable lease with an access key", s.LeaseID, s.Renewable)
		}
		if _, err := v.Client.Sys().RenewWithContext(t.Context(), s.LeaseID, 300); err != nil {
			t.Errorf("renewing the AWS lease: %v", err)
		}
	})
	t.Run("Logins", func(t *testing.T) { testLogins(t, env, v) })
}

// testLogins: Kubernetes and JWT logins with a TokenRequest token of the
// role's audience succeed (renewable, with the role's policy only); a token
// of another audience does not; the audit log counts each once.
func testLogins(t *testing.T, env *k8senv.Env, v *vaultenv.Vault) {
	token := serviceAccountToken(t, env, "app", "reader", "vault")
	v.Policy(t, "read-app", `path "secret/data/app" { capabilities = ["read"] }`)
	v.KubernetesRole(t, vaultenv.Role{Name: "reader", Namespace: "app", ServiceAccount: "reader", Policies: []string{"read-app"}})
	for _, mount := range []string{vaultenv.KubernetesMount, vaultenv.JWTMount} {
		s := v.Write(t, "auth/"+mount+"/login", map[string]any{"role": "reader", "jwt": token})
		if s.Auth == nil || s.Auth.ClientToken == "" || !s.Auth.Renewable {
			t.Fatalf("%s login: %+v, want a renewable token", mount, s.Auth)
		}
		c, err := v.Client.Clone()
		if err != nil {
			t.Fatal(err)
		}
		c.SetToken(s.Auth.ClientToken)
		if _, err := c.Logical().ReadWithContext(t.Context(), "secret/data/app"); err != nil {
			t.Errorf("%s login's token cannot read secret/data/app: %v", mount, err)
		}
		if _, err := c.Logical().ReadWithContext(t.Context(), "kv1/app"); err == nil {
			t.Errorf("%s login's token reads kv1/app, which its policy does not grant", mount)
		}
	}
	wrong := serviceAccountToken(t, env, "app", "reader", "other")
	if _, err := v.Client.Logical().WriteWithContext(t.Context(), "auth/kubernetes/login", map[string]any{"role": "reader", "jwt": wrong}); err == nil {
		t.Error("a token of another audience logged in")
	}
	audit := v.Audit(t)
	for _, mount := range []string{vaultenv.KubernetesMount, vaultenv.JWTMount} {
		if n := audit.Count("update", "auth/"+mount+"/login"); n != 1 {
			t.Errorf("audit log: %d successful %s logins, want 1", n, mount)
		}
	}
}

func read(t *testing.T, c *vaultapi.Client, path string) *vaultapi.Secret {
	t.Helper()
	s, err := c.Logical().ReadWithContext(t.Context(), path)
	if err != nil || s == nil {
		t.Fatalf("vault read %s: %v (secret %v)", path, err, s != nil)
	}
	return s
}

// serviceAccountToken creates namespace/name if needed and mints a token for
// audience through the TokenRequest API.
func serviceAccountToken(t *testing.T, env *k8senv.Env, namespace, name, audience string) string {
	t.Helper()
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	_, _ = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	_, _ = kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}
