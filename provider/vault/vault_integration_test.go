//go:build integration && vault

package vault_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/keymount/keymount/tests/poll"

	"github.com/keymount/keymount/provider/vault"
	"github.com/keymount/keymount/provider/vault/spec"
	"github.com/keymount/keymount/tests/vaultenv"
)

// TestVault runs the provider in process against a real Vault whose
// Kubernetes auth reviews tokens with the real API server.
func TestVault(t *testing.T) {
	r := newRig(t)
	t.Run("Parameters", r.testParameters)
	t.Run("ProviderDefaults", r.testProviderDefaults)
	t.Run("KVv2UnchangedIsOneMetadataRead", r.testKVv2Unchanged)
	t.Run("PKIIssuedOncePerVolume", r.testPKI)
	t.Run("OneLoginForThreePods", r.testOneLogin)
	t.Run("SharedLeaseRenewed", r.testSharedLease)
	t.Run("RevokedWithTheLastVolume", r.testRevoke)
	t.Run("RevokeOnUnpublish", r.testRevokeOnUnpublish)
	t.Run("UnpublishSignal", r.testUnpublishSignal)
	t.Run("SecretSyncsOfTwoIdentities", r.testSecretSyncsOfTwoIdentities)
	t.Run("EnvironmentTokenIgnored", r.testEnvironmentToken)
	t.Run("LyingCallerRefused", r.testLyingCaller)
	t.Run("ErrorCodes", r.testErrorCodes)
	t.Run("UnknownKeysRefusedBeforeVault", r.testUnknownKeys)
	t.Run("HourOfRefreshesLeasedCertificates", r.testHour)
	t.Run("SealedIsUnavailable", r.testSealed) // last: Vault stays sealed
}

func (r *rig) testParameters(t *testing.T) {
	r.identity(t, "params", "app", vaultenv.Role{})
	r.vault.Write(t, "kv1/params", map[string]any{"password": "v1-secret", "blob": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255})})
	r.vault.PutKVv2(t, "params", map[string]any{"password": "v2-secret", "port": 5432})
	p := r.provider(t, vault.Config{})
	res := r.mustMount(t, p, mount{pod: r.pod(t, "params", "app", "p1"), params: params("app", `
- {objectName: v1, secretPath: kv1/params, secretKey: password}
- {objectName: v2, secretPath: secret/data/params, secretKey: password, filePermission: 0600}
- {objectName: port, secretPath: secret/data/params, secretKey: port}
- {objectName: whole, secretPath: secret/data/params}
- {objectName: blob, secretPath: kv1/params, secretKey: blob, encoding: base64}
- {objectName: pinned, secretPath: "secret/data/params?version=1", secretKey: password}
`, spec.KeyAuthMount, "jwt")})
	got, versions := files(res)
	for name, want := range map[string]string{"v1": "v1-secret", "v2": "v2-secret", "port": "5432", "blob": "\x00\x01\x02\xff", "pinned": "v2-secret"} {
		if got[name] != want {
			t.Errorf("file %s = %q, want %q", name, got[name], want)
		}
	}
	if !strings.Contains(got["whole"], `"password":"v2-secret"`) || !strings.Contains(got["whole"], `"metadata"`) {
		t.Errorf("file whole (no secretKey) = %q, want Vault's whole JSON answer", got["whole"])
	}
	if versions["v2"] != "1" || versions["pinned"] != "1" {
		t.Errorf("KV v2 versions = %q, %q, want the KV version 1", versions["v2"], versions["pinned"])
	}
	for _, f := range res.Files {
		want := 0o644
		if f.Path == "v2" {
			want = 0o600
		}
		if int(f.Mode) != want {
			t.Errorf("file %s mode %#o, want %#o", f.Path, f.Mode, want)
		}
	}
	if n := r.count(t, "update", "auth/jwt/login"); n != 1 {
		t.Errorf("%d JWT logins (vaultAuthMountPath: jwt), want 1", n)
	}
}

func (r *rig) testKVv2Unchanged(t *testing.T) {
	r.identity(t, "kv", "app", vaultenv.Role{})
	r.vault.PutKVv2(t, "kv", map[string]any{"password": "one"})
	p := r.provider(t, vault.Config{})
	pod := r.pod(t, "kv", "app", "p1")
	ps := params("app", "- {objectName: pw, secretPath: secret/data/kv, secretKey: password}")
	_, v := files(r.mustMount(t, p, mount{pod: pod, params: ps}))
	reads, metas := r.count(t, "read", "secret/data/kv"), r.count(t, "read", "secret/metadata/kv")
	_, v2 := files(r.mustMount(t, p, mount{pod: pod, params: ps, current: v}))
	if d := r.count(t, "read", "secret/data/kv") - reads; d != 0 {
		t.Errorf("an unchanged refresh read the secret %d times, want 0", d)
	}
	if d := r.count(t, "read", "secret/metadata/kv") - metas; d != 1 {
		t.Errorf("an unchanged refresh read the metadata %d times, want 1", d)
	}
	if v2["pw"] != v["pw"] {
		t.Errorf("version moved from %s to %s with no change", v["pw"], v2["pw"])
	}
	r.vault.PutKVv2(t, "kv", map[string]any{"password": "two"})
	f3, v3 := files(r.mustMount(t, p, mount{pod: pod, params: ps, current: v2}))
	if f3["pw"] != "two" || v3["pw"] != "2" {
		t.Errorf("after a new KV version: %q version %s, want two version 2", f3["pw"], v3["pw"])
	}
}

const pkiObjects = `
- objectName: cert
  secretPath: pki/issue/web
  method: PUT
  secretArgs: {common_name: a.example.com}
`

func (r *rig) testPKI(t *testing.T) {
	r.identity(t, "pki", "app", vaultenv.Role{})
	r.vault.PKIRole(t, "web", time.Hour, false)
	p := r.provider(t, vault.Config{})
	pod := r.pod(t, "pki", "app", "p1")
	issued := r.count(t, "update", "pki/issue/web")
	// The driver's first publish sends a staging directory, its refreshes
	// the mount directory: one volume, one certificate.
	f, v := files(r.mustMount(t, p, mount{pod: pod, params: params("app", pkiObjects), stage: true}))
	if !strings.Contains(f["cert"], "BEGIN CERTIFICATE") || !strings.Contains(f["cert"], "private_key") {
		t.Fatalf("cert = %.80q..., want Vault's issue answer", f["cert"])
	}
	f2, v2 := files(r.mustMount(t, p, mount{pod: pod, params: params("app", pkiObjects), current: v}))
	if f2["cert"] != f["cert"] || v2["cert"] != v["cert"] {
		t.Error("a refresh re-issued the certificate")
	}
	other := r.pod(t, "pki", "app", "p2")
	f3, _ := files(r.mustMount(t, p, mount{pod: other, params: params("app", pkiObjects)}))
	if f3["cert"] == f["cert"] {
		t.Error("another volume got the first volume's certificate (no shareAcrossReplicas)")
	}
	if d := r.count(t, "update", "pki/issue/web") - issued; d != 2 {
		t.Errorf("%d certificates issued for two volumes and a refresh, want 2", d)
	}
}

func (r *rig) testOneLogin(t *testing.T) {
	r.identity(t, "three", "app", vaultenv.Role{})
	r.vault.PutKVv2(t, "three", map[string]any{"k": "v"})
	p := r.provider(t, vault.Config{})
	logins := r.count(t, "update", "auth/kubernetes/login")
	for _, name := range []string{"p1", "p2", "p3"} {
		r.mustMount(t, p, mount{pod: r.pod(t, "three", "app", name), params: params("app", "- {objectName: k, secretPath: secret/data/three, secretKey: k}")})
	}
	if d := r.count(t, "update", "auth/kubernetes/login") - logins; d != 1 {
		t.Errorf("%d logins for three pods of one service account, want 1", d)
	}
}

const awsObjects = "- {objectName: creds, secretPath: aws/creds/app, secretKey: access_key}"

func (r *rig) testSharedLease(t *testing.T) {
	r.identity(t, "shared", "app", vaultenv.Role{})
	r.vault.AWSRole(t, "app", 6*time.Second, time.Hour)
	p := r.provider(t, vault.Config{})
	issued, renewed := r.count(t, "read", "aws/creds/app"), r.count(t, "update", "sys/leases/renew")
	ps := params("app", awsObjects, spec.KeyShare, "true")
	var first string
	pods := []string{"p1", "p2", "p3"}
	for _, name := range pods {
		f, _ := files(r.mustMount(t, p, mount{pod: r.pod(t, "shared", "app", name), params: ps}))
		if first == "" {
			first = f["creds"]
		}
		if f["creds"] != first || first == "" {
			t.Errorf("pod %s got access key %q, want the shared %q", name, f["creds"], first)
		}
	}
	if d := r.count(t, "read", "aws/creds/app") - issued; d != 1 {
		t.Errorf("%d AWS credentials issued for three replicas with %s, want 1", d, spec.KeyShare)
	}
	pod := r.pod(t, "shared", "app", "p4")
	poll.Until(t, "a renewal of the 6s lease", func(ctx context.Context) (bool, error) {
		f, _ := files(r.mustMount(t, p, mount{pod: pod, params: ps}))
		if f["creds"] != first {
			t.Fatalf("the lease was issued again (%q), not renewed", f["creds"])
		}
		return r.count(t, "update", "sys/leases/renew") > renewed, nil
	})
	if d := r.count(t, "read", "aws/creds/app") - issued; d != 1 {
		t.Errorf("%d AWS credentials issued across renewals, want 1", d)
	}
}

func (r *rig) testRevoke(t *testing.T) {
	r.identity(t, "revoke", "app", vaultenv.Role{})
	r.vault.AWSRole(t, "app", time.Hour, 2*time.Hour)
	p := r.provider(t, vault.Config{VolumeIdle: time.Second})
	revoked := r.count(t, "update", "auth/token/revoke-self")
	lease := leaseOf(t, r.mustMount(t, p, mount{pod: r.pod(t, "revoke", "app", "p1"), params: params("app",
		"- {objectName: lease, secretPath: aws/creds/app}")}))
	poll.Until(t, "revoke-self once the volume is idle", func(ctx context.Context) (bool, error) {
		p.Maintain(ctx)
		return r.count(t, "update", "auth/token/revoke-self") > revoked, nil
	})
	// revoke-self expires the token's leases at once; Vault's expiration
	// manager revokes them in the background.
	poll.Until(t, "Vault to revoke the lease of the revoked login", func(context.Context) (bool, error) {
		return !r.leaseExists(t, lease), nil
	})
}
