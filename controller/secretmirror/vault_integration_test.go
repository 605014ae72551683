//go:build integration && vault

package secretmirror_test

import (
	"context"
	"strings"
	"testing"

	"github.com/keymount/keymount/tests/poll"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/secretmirror"
	"github.com/keymount/keymount/tests/vaultenv"
)

// TestSecretMirrorVault runs SecretMirrors with a Vault source against a
// real Vault (tests/vaultenv: KV version 2 at secret/, Kubernetes auth
// against the test API server) and a real API server.
func TestSecretMirrorVault(t *testing.T) {
	f := startOwnFixture(t)
	v := vaultenv.Start(t, vaultenv.Options{Kube: f.cfg})
	v.Policy(t, "mirror-read", `
path "secret/data/team/*" { capabilities = ["read"] }
path "secret/metadata/team/*" { capabilities = ["read"] }
`)
	t.Run("kubernetes auth, KV v2, unchanged = metadata reads", func(t *testing.T) { testVaultKubernetes(t, f, v) })
	t.Run("approle and token auth as mirrors writes them", func(t *testing.T) { testVaultAppRoleToken(t, f, v) })
	t.Run("denied: path, role and Vault's message", func(t *testing.T) { testVaultDenied(t, f, v) })
}

// vaultMirror creates a SecretMirror of ns copying the Vault secret at
// path (named name) into the namespaces matching dest, polled every 2 s.
func vaultMirror(t *testing.T, f *fixture, ns, name, path string, auth *mirrorsv1alpha2.VaultAuth, v *vaultenv.Vault, dest string) {
	t.Helper()
	m := &mirrorsv1alpha2.SecretMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: mirrorsv1alpha2.SecretMirrorSpec{
			Source: mirrorsv1alpha2.SecretMirrorSource{Type: mirrorsv1alpha2.SourceTypeVault, Name: name,
				Vault: &mirrorsv1alpha2.VaultSpec{Addr: v.Addr, Path: path, Auth: auth}},
			Destination:       mirrorsv1alpha2.SecretMirrorDestination{Namespaces: []string{dest}},
			PollPeriodSeconds: 2,
		},
	}
	if err := f.c.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

// testVaultKubernetes: a KV v2 secret is copied (fields as keys, mirrors'
// annotations with source-type vault and the KV version), after one login
// as the ServiceAccount; polls of an unchanged secret read its metadata
// only; a new version reaches the copies.
func testVaultKubernetes(t *testing.T, f *fixture, v *vaultenv.Vault) {
	f.namespace(t, "vk-src", "vk-dst-1", "vk-dst-2")
	if err := f.c.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "vk-src", Name: "reader"}}); err != nil {
		t.Fatal(err)
	}
	v.KubernetesRole(t, vaultenv.Role{Name: "mirror", Namespace: "vk-src", ServiceAccount: "reader", Policies: []string{"mirror-read"}})
	v.PutKVv2(t, "team/db", map[string]any{"k": "one", "user": "app"})
	auth := &mirrorsv1alpha2.VaultAuth{Kubernetes: &mirrorsv1alpha2.VaultKubernetesAuth{Role: "mirror", ServiceAccountName: "reader"}}
	vaultMirror(t, f, "vk-src", "db", "/secret/data/team/db", auth, v, `^vk-dst-\d$`)
	for _, ns := range []string{"vk-dst-1", "vk-dst-2"} {
		c := f.copyHolds(t, ns, "db", "one")
		if string(c.Data["user"]) != "app" || c.Type != corev1.SecretTypeOpaque ||
			c.Annotations[secretmirror.AnnotationSourceType] != "vault" || c.Annotations[secretmirror.AnnotationParentVersion] != "1" {
			t.Errorf("%s: type %q data %q annotations %v: want Opaque, user=app, source-type vault, parent-version 1", ns, c.Type, c.Data["user"], c.Annotations)
		}
	}
	f.status(t, "vk-src", "db", mirrorsv1alpha2.MirrorStatusActive, "Vault secret /secret/data/team/db copied to 2 namespaces")
	reads := v.Audit(t).Count("read", "secret/data/team/db")
	// Polls of the unchanged secret: metadata reads, no more full reads.
	poll.Until(t, "three metadata reads of secret/metadata/team/db", func(context.Context) (bool, error) {
		return v.Audit(t).Count("read", "secret/metadata/team/db") >= 3, nil
	})
	a := v.Audit(t)
	if got := a.Count("read", "secret/data/team/db"); got != reads {
		t.Errorf("%d full reads after polls of an unchanged secret, want %d (metadata reads only)", got, reads)
	}
	if got := a.Count("update", "auth/kubernetes/login"); got != 1 {
		t.Errorf("%d logins, want 1: the login is kept until 2/3 of its TTL", got)
	}
	v.PutKVv2(t, "team/db", map[string]any{"k": "two", "user": "app"})
	c := f.copyHolds(t, "vk-dst-1", "db", "two")
	if c.Annotations[secretmirror.AnnotationParentVersion] != "2" {
		t.Errorf("parent-version %q, want 2", c.Annotations[secretmirror.AnnotationParentVersion])
	}
}

// testVaultAppRoleToken: mirrors' AppRole login (its default keys role-id
// and secret-id, its default mount approle) and token login (key token)
// read the secret; values mirrors' Vault destination wrote as base64 are
// decoded.
func testVaultAppRoleToken(t *testing.T, f *fixture, v *vaultenv.Vault) {
	f.namespace(t, "va-src", "va-dst")
	v.Write(t, "sys/auth/approle", map[string]any{"type": "approle"})
	v.Write(t, "auth/approle/role/mirror", map[string]any{"token_policies": "mirror-read", "token_ttl": "1h"})
	roleID, err := v.Client.Logical().ReadWithContext(t.Context(), "auth/approle/role/mirror/role-id")
	if err != nil || roleID == nil {
		t.Fatalf("role-id: %v", err)
	}
	secretID := v.Write(t, "auth/approle/role/mirror/secret-id", map[string]any{})
	rid, ok1 := roleID.Data["role_id"].(string)
	sid, ok2 := secretID.Data["secret_id"].(string)
	if !ok1 || !ok2 {
		t.Fatalf("AppRole answers without role_id or secret_id strings: %T, %T", roleID.Data["role_id"], secretID.Data["secret_id"])
	}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "va-src", Name: "vault-approle"},
		StringData: map[string]string{"role-id": rid, "secret-id": sid}}
	tok, err := v.Client.Auth().Token().CreateWithContext(t.Context(), &vaultapi.TokenCreateRequest{Policies: []string{"mirror-read"}, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	tokenSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "va-src", Name: "vault-token"},
		StringData: map[string]string{"token": tok.Auth.ClientToken}}
	for _, s := range []*corev1.Secret{creds, tokenSecret} {
		if err := f.c.Create(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	v.PutKVv2(t, "team/api", map[string]any{"k": "aGVsbG8="}) // "hello", as mirrors' destination writes it
	vaultMirror(t, f, "va-src", "api", "secret/data/team/api",
		&mirrorsv1alpha2.VaultAuth{AppRole: &mirrorsv1alpha2.VaultAppRoleAuth{SecretRef: &corev1.SecretReference{Name: "vault-approle"}}}, v, "^va-dst$")
	f.copyHolds(t, "va-dst", "api", "hello")
	v.PutKVv2(t, "team/tok", map[string]any{"k": "plain text"})
	vaultMirror(t, f, "va-src", "tok", "secret/data/team/tok",
		&mirrorsv1alpha2.VaultAuth{Token: &mirrorsv1alpha2.VaultTokenAuth{SecretRef: &corev1.SecretReference{Name: "vault-token"}}}, v, "^va-dst$")
	f.copyHolds(t, "va-dst", "tok", "plain text")
	if got := v.Audit(t).Count("update", "auth/approle/login"); got != 1 {
		t.Errorf("%d AppRole logins, want 1", got)
	}
}

// testVaultDenied: a path the role's policy does not grant is an Error
// whose message and VaultError event name the path, the role and Vault's
// own message, and hold no token; nothing is copied.
func testVaultDenied(t *testing.T, f *fixture, v *vaultenv.Vault) {
	f.namespace(t, "vd-src", "vd-dst")
	tok, err := v.Client.Auth().Token().CreateWithContext(t.Context(), &vaultapi.TokenCreateRequest{Policies: []string{"mirror-read"}, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "vd-src", Name: "vault-token"},
		StringData: map[string]string{"token": tok.Auth.ClientToken}}); err != nil {
		t.Fatal(err)
	}
	v.PutKVv2(t, "other/x", map[string]any{"k": "no"})
	vaultMirror(t, f, "vd-src", "x", "secret/data/other/x",
		&mirrorsv1alpha2.VaultAuth{Token: &mirrorsv1alpha2.VaultTokenAuth{SecretRef: &corev1.SecretReference{Name: "vault-token"}}}, v, "^vd-dst$")
	const want = "read secret/data/other/x as the token of Secret vd-src/vault-token: Vault answered 403: permission denied"
	m := f.status(t, "vd-src", "x", mirrorsv1alpha2.MirrorStatusError, want)
	f.event(t, "vd-src", "x", secretmirror.EventMirrorVaultError, want)
	if strings.Contains(m.Status.Message, tok.Auth.ClientToken) {
		t.Error("the status message holds the Vault token")
	}
	if s, err := f.secret(t.Context(), "vd-dst", "x"); err != nil || s != nil {
		t.Errorf("vd-dst/x = %v (err %v): a denied read copies nothing", s, err)
	}
}
