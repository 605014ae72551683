//go:build integration && vault

package secretmirror_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/tests/motoserver"
	"github.com/keymount/keymount/tests/poll"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/controller/push"
	"github.com/keymount/keymount/controller/secretmirror"
	"github.com/keymount/keymount/internal/vaultkv"
	"github.com/keymount/keymount/tests/vaultenv"
)

// TestSecretMirrorVault runs SecretMirrors with a Vault source against a
// real Vault (tests/vaultenv: KV version 2 at secret/, Kubernetes auth
// against the test API server) and a real API server.
func TestSecretMirrorVault(t *testing.T) {
	f := startOwnFixture(t)
	v := vaultenv.Start(t, vaultenv.Options{Kube: f.cfg, AWSEndpoint: motoserver.Start(t)})
	v.Policy(t, "mirror-read", `
path "secret/data/team/*" { capabilities = ["read"] }
path "secret/metadata/team/*" { capabilities = ["read"] }
`)
	t.Run("kubernetes auth, KV v2, unchanged = metadata reads", func(t *testing.T) { testVaultKubernetes(t, f, v) })
	t.Run("approle and token auth as mirrors writes them", func(t *testing.T) { testVaultAppRoleToken(t, f, v) })
	t.Run("denied: path, role and Vault's message", func(t *testing.T) { testVaultDenied(t, f, v) })
	t.Run("destination: a TLS Secret to KV v2, check-and-set, conflicts", func(t *testing.T) { testVaultDestination(t, f, v) })
	t.Run("Vault to Vault, two servers", func(t *testing.T) { testVaultToVault(t, f, v) })
	t.Run("dynamic source: one lease renewed until its max TTL", func(t *testing.T) { testVaultLease(t, f, v) })
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

// tokenSecret creates the Secret ns/name holding a Vault token of c with
// policies, as mirrors' auth.token reads it.
func tokenSecret(t *testing.T, f *fixture, c *vaultapi.Client, ns, name string, policies ...string) {
	t.Helper()
	tok, err := c.Auth().Token().CreateWithContext(t.Context(), &vaultapi.TokenCreateRequest{Policies: policies, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		StringData: map[string]string{"token": tok.Auth.ClientToken}}); err != nil {
		t.Fatal(err)
	}
}

// kvHolds waits until the KV version 2 secret at path of c holds want
// (decoded as mirrors reads it) and returns its version and metadata.
func kvHolds(t *testing.T, c *vaultapi.Client, path string, want map[string]string) (int, map[string]any) {
	t.Helper()
	var version int
	var md map[string]any
	poll.Until(t, path+" holding "+fmt.Sprint(want), func(ctx context.Context) (bool, error) {
		s, err := c.Logical().ReadWithContext(ctx, path)
		if err != nil || s == nil {
			return false, err
		}
		fields, _ := s.Data["data"].(map[string]any)
		got := vaultkv.Decode(fields).Data
		if len(got) != len(want) {
			return false, nil
		}
		for k, v := range want {
			if string(got[k]) != v {
				return false, nil
			}
		}
		md, _ = s.Data["metadata"].(map[string]any)
		num, _ := md["version"].(json.Number)
		n, err := num.Int64()
		version = int(n)
		return err == nil, err
	})
	return version, md
}

// testVaultDestination: mirrors' destination.type vault with keymount's
// Kubernetes login writes a cert-manager-like TLS Secret to KV v2 as
// mirrors does (base64 fields) with its type in custom_metadata; polls of
// an unchanged Secret write nothing; a renewal is one new version; a
// version someone else wrote is reported (VaultConflict, Error), kept,
// and replaced only once the SecretMirror is annotated to.
func testVaultDestination(t *testing.T, f *fixture, v *vaultenv.Vault) {
	f.namespace(t, "vw-src")
	v.Policy(t, "mirror-write", `
path "secret/data/push/*" { capabilities = ["create", "update", "read"] }
path "secret/metadata/push/*" { capabilities = ["read", "update"] }
`)
	if err := f.c.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "vw-src", Name: "writer"}}); err != nil {
		t.Fatal(err)
	}
	v.KubernetesRole(t, vaultenv.Role{Name: "writer", Namespace: "vw-src", ServiceAccount: "writer", Policies: []string{"mirror-write"}})
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "vw-src", Name: "wildcard-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("CERT-1"), "tls.key": []byte("KEY-1\x00\xff")}}
	if err := f.c.Create(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	m := &mirrorsv1alpha2.SecretMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vw-src", Name: "wildcard-tls"},
		Spec: mirrorsv1alpha2.SecretMirrorSpec{
			Destination: mirrorsv1alpha2.SecretMirrorDestination{Type: mirrorsv1alpha2.DestinationTypeVault, Vault: &mirrorsv1alpha2.VaultSpec{
				Addr: v.Addr, Path: "/secret/data/push/wildcard-tls",
				Auth: &mirrorsv1alpha2.VaultAuth{Kubernetes: &mirrorsv1alpha2.VaultKubernetesAuth{Role: "writer", ServiceAccountName: "writer"}}}},
			PollPeriodSeconds: 2,
		},
	}
	if err := f.c.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	const path = "secret/data/push/wildcard-tls"
	ver, md := kvHolds(t, v.Client, path, map[string]string{"tls.crt": "CERT-1", "tls.key": "KEY-1\x00\xff"})
	if ver != 1 || vaultkv.TypeOf(md["custom_metadata"]) != corev1.SecretTypeTLS {
		t.Errorf("version %d, custom_metadata %v: want 1 and the type kubernetes.io/tls", ver, md["custom_metadata"])
	}
	got := f.status(t, "vw-src", m.Name, mirrorsv1alpha2.MirrorStatusActive, "Secret vw-src/wildcard-tls written to Vault /secret/data/push/wildcard-tls (version 1)")
	if d := got.Status.VaultDestination; d == nil || d.Version != 1 || d.Addr != v.Addr {
		t.Errorf("status.vaultDestination %+v, want version 1 at %s", d, v.Addr)
	}
	f.event(t, "vw-src", m.Name, secretmirror.EventMirrorSynced, "Synced Secret vw-src/wildcard-tls to Vault /secret/data/push/wildcard-tls (version 1) (created)")
	writes := v.Audit(t).Count("update", path)
	meta := v.Audit(t).Count("read", "secret/metadata/push/wildcard-tls")
	poll.Until(t, "three more polls of the unchanged Secret", func(context.Context) (bool, error) {
		return v.Audit(t).Count("read", "secret/metadata/push/wildcard-tls") >= meta+3, nil
	})
	if got := v.Audit(t).Count("update", path); got != writes {
		t.Errorf("%d writes after polls of an unchanged Secret, want %d", got, writes)
	}
	if got := v.Audit(t).Count("update", "auth/kubernetes/login"); got < 1 {
		t.Errorf("%d Kubernetes logins, want at least one", got)
	}

	// cert-manager renews: one new version.
	src.Data = map[string][]byte{"tls.crt": []byte("CERT-2"), "tls.key": []byte("KEY-2")}
	if err := f.c.Update(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	if ver, _ := kvHolds(t, v.Client, path, map[string]string{"tls.crt": "CERT-2", "tls.key": "KEY-2"}); ver != 2 {
		t.Errorf("the renewal is version %d, want 2", ver)
	}

	// Someone else writes: reported and kept, through renewals.
	v.PutKVv2(t, "push/wildcard-tls", map[string]any{"tls.crt": "hand written", "tls.key": "hand written"})
	src.Data = map[string][]byte{"tls.crt": []byte("CERT-3"), "tls.key": []byte("KEY-3")}
	if err := f.c.Update(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	const conflict = "is at version 3, the value there was not written by keymount (keymount wrote version 2): not replaced"
	f.status(t, "vw-src", m.Name, mirrorsv1alpha2.MirrorStatusError, conflict)
	f.event(t, "vw-src", m.Name, secretmirror.EventMirrorVaultConflict, secretmirror.AnnotationVaultOverwrite+"=true")
	if ver, _ := kvHolds(t, v.Client, path, map[string]string{"tls.crt": "hand written", "tls.key": "hand written"}); ver != 3 {
		t.Fatalf("their value is at version %d, want 3", ver)
	}
	f.waitMetric(t, push.MetricWrites, map[string]string{"store": "vault-kv2", "result": "conflict"}, 1)

	// The owner says to replace it.
	patch := client.MergeFrom(m.DeepCopy())
	m.Annotations = map[string]string{secretmirror.AnnotationVaultOverwrite: "true"}
	if err := f.c.Patch(t.Context(), m, patch); err != nil {
		t.Fatal(err)
	}
	if ver, _ := kvHolds(t, v.Client, path, map[string]string{"tls.crt": "CERT-3", "tls.key": "KEY-3"}); ver != 4 {
		t.Errorf("replaced at version %d, want 4", ver)
	}
	f.status(t, "vw-src", m.Name, mirrorsv1alpha2.MirrorStatusActive, "(version 4)")
	if f.metric(t, push.MetricWrites, map[string]string{"store": "vault-kv2", "result": "created"}) < 1 ||
		f.metric(t, push.MetricWrites, map[string]string{"store": "vault-kv2", "result": "updated"}) < 2 {
		t.Error("the created and updated pushes are not counted")
	}
}

// testVaultToVault: a SecretMirror with a Vault source and a Vault
// destination copies a KV secret from one Vault server to another, each
// with its own token (mirrors' auth.token), and follows its new versions.
func testVaultToVault(t *testing.T, f *fixture, v *vaultenv.Vault) {
	f.namespace(t, "vv-src")
	other := vaultenv.Start(t, vaultenv.Options{})
	other.Policy(t, "copy-write", `
path "secret/data/copied/*" { capabilities = ["create", "update", "read"] }
path "secret/metadata/copied/*" { capabilities = ["read"] }
`)
	tokenSecret(t, f, v.Client, "vv-src", "from-token", "mirror-read")
	tokenSecret(t, f, other.Client, "vv-src", "to-token", "copy-write")
	v.PutKVv2(t, "team/shared", map[string]any{"k": "one", "user": "app"})
	m := &mirrorsv1alpha2.SecretMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vv-src", Name: "shared"},
		Spec: mirrorsv1alpha2.SecretMirrorSpec{
			Source: mirrorsv1alpha2.SecretMirrorSource{Type: mirrorsv1alpha2.SourceTypeVault, Name: "shared", Vault: &mirrorsv1alpha2.VaultSpec{
				Addr: v.Addr, Path: "/secret/data/team/shared",
				Auth: &mirrorsv1alpha2.VaultAuth{Token: &mirrorsv1alpha2.VaultTokenAuth{SecretRef: &corev1.SecretReference{Name: "from-token"}}}}},
			Destination: mirrorsv1alpha2.SecretMirrorDestination{Type: mirrorsv1alpha2.DestinationTypeVault, Vault: &mirrorsv1alpha2.VaultSpec{
				Addr: other.Addr, Path: "/secret/data/copied/shared",
				Auth: &mirrorsv1alpha2.VaultAuth{Token: &mirrorsv1alpha2.VaultTokenAuth{SecretRef: &corev1.SecretReference{Name: "to-token"}}}}},
			PollPeriodSeconds: 2,
		},
	}
	if err := f.c.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	kvHolds(t, other.Client, "secret/data/copied/shared", map[string]string{"k": "one", "user": "app"})
	f.status(t, "vv-src", "shared", mirrorsv1alpha2.MirrorStatusActive, "Vault secret /secret/data/team/shared written to Vault /secret/data/copied/shared (version 1)")
	v.PutKVv2(t, "team/shared", map[string]any{"k": "two", "user": "app"})
	if ver, _ := kvHolds(t, other.Client, "secret/data/copied/shared", map[string]string{"k": "two", "user": "app"}); ver != 2 {
		t.Errorf("the new version is %d at the destination, want 2", ver)
	}
}

// testVaultLease: a dynamic source (the AWS engine's IAM user credentials
// against moto: a renewable lease of 6 s, at most 30 s) is read once; every
// poll renews that lease (status.vaultSource and the copies' lease
// annotations keep it, VaultLeaseRenew events) without new credentials,
// through a restart of the controller too (the lease renewed from what a
// copy holds); near its max TTL new credentials are read under a new lease
// and reach the copies.
func testVaultLease(t *testing.T, f *fixture, v *vaultenv.Vault) {
	f.namespace(t, "vl-src", "vl-dst")
	v.AWSRole(t, "mirror", 6*time.Second, 30*time.Second)
	v.Policy(t, "mirror-creds", `
path "aws/creds/mirror" { capabilities = ["read"] }
path "sys/leases/renew" { capabilities = ["update"] }
`)
	tokenSecret(t, f, v.Client, "vl-src", "vault-token", "mirror-creds")
	vaultMirror(t, f, "vl-src", "aws-creds", "aws/creds/mirror",
		&mirrorsv1alpha2.VaultAuth{Token: &mirrorsv1alpha2.VaultTokenAuth{SecretRef: &corev1.SecretReference{Name: "vault-token"}}}, v, "^vl-dst$")
	var first *corev1.Secret
	poll.Until(t, "the copy vl-dst/aws-creds with an access key", func(ctx context.Context) (bool, error) {
		s, err := f.secret(ctx, "vl-dst", "aws-creds")
		first = s
		return s != nil && len(s.Data["access_key"]) > 0, err
	})
	lease := first.Annotations[secretmirror.AnnotationVaultLeaseID]
	if !strings.HasPrefix(lease, "aws/creds/mirror/") || first.Annotations[secretmirror.AnnotationVaultPath] != "aws/creds/mirror" {
		t.Fatalf("the copy's annotations %v: want mirrors' vault-path and vault-lease-id", first.Annotations)
	}
	f.waitMetric(t, push.MetricLeases, map[string]string{"result": "renewed"}, 2)
	f.event(t, "vl-src", "aws-creds", secretmirror.EventMirrorVaultLeaseRenew, "Renewed lease successfully")
	m := f.status(t, "vl-src", "aws-creds", mirrorsv1alpha2.MirrorStatusActive, "")
	if m.Status.VaultSource == nil || m.Status.VaultSource.LeaseID != lease {
		t.Errorf("status.vaultSource %+v, want the lease %s", m.Status.VaultSource, lease)
	}

	// keymount-controller restarts: the new one renews the same lease.
	f.stop()
	f = newFixture(t, f.cfg, f.run)
	f.waitMetric(t, push.MetricLeases, map[string]string{"result": "renewed"}, 1)
	if got := f.metric(t, push.MetricLeases, map[string]string{"result": "issued"}); got != 0 {
		t.Errorf("the restarted controller issued %v leases before renewing, want 0", got)
	}
	if got := v.Audit(t).Count("read", "aws/creds/mirror"); got != 1 {
		t.Errorf("%d credential reads after renewals and a restart, want 1", got)
	}
	if s, err := f.secret(t.Context(), "vl-dst", "aws-creds"); err != nil || s == nil || string(s.Data["access_key"]) != string(first.Data["access_key"]) {
		t.Errorf("the copy after the restart: %v (%v), want the same credentials", s, err)
	}

	// Near the max TTL: new credentials, under a new lease.
	poll.Until(t, "new credentials in vl-dst/aws-creds", func(ctx context.Context) (bool, error) {
		s, err := f.secret(ctx, "vl-dst", "aws-creds")
		return s != nil && s.Annotations[secretmirror.AnnotationVaultLeaseID] != lease &&
			string(s.Data["access_key"]) != string(first.Data["access_key"]), err
	})
	f.event(t, "vl-src", "aws-creds", secretmirror.EventMirrorVaultNewCreds, "Fetched new credentials under the lease aws/creds/mirror/")
	if got := v.Audit(t).Count("read", "aws/creds/mirror"); got != 2 {
		t.Errorf("%d credential reads once the lease neared its max TTL, want 2", got)
	}
}
