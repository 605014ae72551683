//go:build integration && vault

package vault_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault"
	"github.com/keymount/keymount/provider/vault/spec"
	"github.com/keymount/keymount/tests/vaultenv"
)

// testProviderDefaults: the provider's defaults (vault-csi-provider's
// -vault-mount and -vault-tls-* flags) serve classes that do not set the
// parameter; a class's parameter wins.
func (r *rig) testProviderDefaults(t *testing.T) {
	r.identity(t, "defaults", "app", vaultenv.Role{})
	r.vault.PutKVv2(t, "defaults", map[string]any{"k": "v"})
	objects := "- {objectName: k, secretPath: secret/data/defaults, secretKey: k}"
	p := r.provider(t, vault.Config{Defaults: spec.Defaults{AuthMount: "jwt"}})
	jwt, kube := r.count(t, "update", "auth/jwt/login"), r.count(t, "update", "auth/kubernetes/login")
	f, _ := files(r.mustMount(t, p, mount{pod: r.pod(t, "defaults", "app", "p1"), params: params("app", objects)}))
	if f["k"] != "v" {
		t.Errorf("file k = %q, want v", f["k"])
	}
	if d := r.count(t, "update", "auth/jwt/login") - jwt; d != 1 {
		t.Errorf("%d JWT logins for a class without %s (the provider's auth mount jwt), want 1", d, spec.KeyAuthMount)
	}
	r.mustMount(t, p, mount{pod: r.pod(t, "defaults", "app", "p2"), params: params("app", objects, spec.KeyAuthMount, "kubernetes")})
	if d := r.count(t, "update", "auth/kubernetes/login") - kube; d != 1 {
		t.Errorf("%d Kubernetes logins for a class with %s: kubernetes, want 1 (the class wins)", d, spec.KeyAuthMount)
	}

	p = r.provider(t, vault.Config{Defaults: spec.Defaults{TLS: spec.TLS{CACert: "/nonexistent/provider-ca.pem"}}})
	pod := r.pod(t, "defaults", "app", "p3")
	for _, tc := range []struct {
		name  string
		extra []string
		path  string
	}{
		{"the provider's CA", nil, "/nonexistent/provider-ca.pem"},
		{"the class's CA", []string{spec.KeyCACert, "/nonexistent/class-ca.pem"}, "/nonexistent/class-ca.pem"},
	} {
		_, err := r.mount(t, p, mount{pod: pod, params: params("app", objects, tc.extra...)})
		if server.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: %v, want FailedPrecondition naming %s", tc.name, err, tc.path)
		}
	}
}
