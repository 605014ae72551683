//go:build integration && vault

package vault_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault"
	"github.com/keymount/keymount/tests/vaultenv"
)

// testEnvironmentToken: a root token in VAULT_TOKEN is not used: a role
// without the policy is still refused, after a login.
func (r *rig) testEnvironmentToken(t *testing.T) {
	t.Setenv("VAULT_TOKEN", r.vault.RootToken)
	r.identity(t, "envtoken", "app", vaultenv.Role{Policies: []string{"default"}})
	r.vault.PutKVv2(t, "envtoken", map[string]any{"k": "v"})
	p := r.provider(t, vault.Config{})
	logins := r.count(t, "update", "auth/kubernetes/login")
	_, err := r.mount(t, p, mount{pod: r.pod(t, "envtoken", "app", "p1"), params: params("app", "- {objectName: k, secretPath: secret/data/envtoken, secretKey: k}")})
	if server.Code(err) != codes.PermissionDenied {
		t.Fatalf("mount with VAULT_TOKEN=<root> and a role without the policy: %v, want PermissionDenied", err)
	}
	if d := r.count(t, "update", "auth/kubernetes/login") - logins; d != 1 {
		t.Errorf("%d logins, want 1: the pod's token, not VAULT_TOKEN", d)
	}
}

// testLyingCaller: a token of another service account, or of another
// audience, is refused before anything reaches Vault.
func (r *rig) testLyingCaller(t *testing.T) {
	r.identity(t, "liar", "app", vaultenv.Role{})
	r.identity(t, "liar", "other", vaultenv.Role{})
	r.vault.PutKVv2(t, "liar", map[string]any{"k": "v"})
	p := r.provider(t, vault.Config{})
	pod := r.pod(t, "liar", "app", "p1")
	otherPod := r.pod(t, "liar", "other", "p2")
	ps := params("app", "- {objectName: k, secretPath: secret/data/liar, secretKey: k}")
	before := len(r.vault.Audit(t))
	for name, token := range map[string]string{
		"another service account's token": r.token(t, otherPod, "other", "vault"),
		"a token of another audience":     r.token(t, pod, "app", "sts.amazonaws.com"),
		"not a token":                     "eyJhbGciOiJub25lIn0.e30.",
	} {
		_, err := r.mount(t, p, mount{pod: pod, params: ps, token: token})
		if server.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", name, err)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("%s: the error quotes the token", name)
		}
	}
	if d := len(r.vault.Audit(t)) - before; d != 0 {
		t.Errorf("%d requests reached Vault for lying callers, want 0", d)
	}
}

func (r *rig) testErrorCodes(t *testing.T) {
	r.identity(t, "errors", "app", vaultenv.Role{})
	p := r.provider(t, vault.Config{})
	pod := r.pod(t, "errors", "app", "p1")
	for _, tc := range []struct {
		name   string
		params map[string]string
		code   codes.Code
		says   []string
	}{
		{"missing secret", params("app", "- {objectName: k, secretPath: secret/data/nothing-here, secretKey: k}"),
			codes.NotFound, []string{"secret/data/nothing-here", `role "app"`, "HTTP 404"}},
		{"missing key", params("app", "- {objectName: k, secretPath: kv1/params, secretKey: nope}"),
			codes.NotFound, []string{`secretKey "nope"`, "kv1/params"}},
		// The app policy grants secret/data/* and secret/metadata/*, not the
		// KV engine's configuration. (Not cubbyhole/: Vault's default
		// policy, which Kubernetes auth roles carry, grants it.)
		{"not allowed", params("app", "- {objectName: k, secretPath: secret/config, secretKey: k}"),
			codes.PermissionDenied, []string{"secret/config", `role "app"`, "HTTP 403", "permission denied"}},
		{"unknown role", params("nobody", "- {objectName: k, secretPath: kv1/params}"),
			codes.PermissionDenied, []string{"auth/kubernetes/login", `role "nobody"`, "HTTP 400"}},
		{"unreachable", params("app", "- {objectName: k, secretPath: kv1/params}", "vaultAddress", "http://127.0.0.1:1"),
			codes.Unavailable, []string{"auth/kubernetes/login"}},
		{"bad objects", params("app", "- {objectName: k}"), codes.InvalidArgument, []string{"secretPath is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.mount(t, p, mount{pod: pod, params: tc.params})
			if server.Code(err) != tc.code {
				t.Fatalf("%v, want %v", err, tc.code)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "hvs.") || strings.Contains(err.Error(), "eyJ") {
				t.Errorf("error %q holds a token", err)
			}
		})
	}
}

// testSealed: a sealed Vault is Unavailable (kubelet retries).
func (r *rig) testSealed(t *testing.T) {
	r.identity(t, "sealed", "app", vaultenv.Role{})
	p := r.provider(t, vault.Config{})
	if err := r.vault.Client.Sys().SealWithContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := r.mount(t, p, mount{pod: r.pod(t, "sealed", "app", "p1"), params: params("app", "- {objectName: k, secretPath: kv1/params}")})
	if server.Code(err) != codes.Unavailable {
		t.Fatalf("mount against a sealed Vault: %v, want Unavailable", err)
	}
}

// testHour runs an hour of refreshes compressed 30×: a refresh every 4 s
// (2 minutes) for 120 s, certificates valid 100 s (50 minutes), logins
// valid 30 s (15 minutes, renewable to 10 minutes of test time = 5 hours),
// --reissue-margin 20 s (10 minutes). At most 2 certificates are issued
// and 1 login made; a lease whose deadline counted its login's current
// expiry would re-issue at every login renewal (≈ 8 in the hour).
func (r *rig) testHour(t *testing.T) {
	r.identity(t, "hour", "app", vaultenv.Role{TTL: 30 * time.Second, MaxTTL: 10 * time.Minute})
	r.vault.PKIRole(t, "hour", 100*time.Second, true)
	obs := &countingObserver{}
	p := r.provider(t, vault.Config{ReissueMargin: 20 * time.Second, Observer: obs})
	pod := r.pod(t, "hour", "app", "p1")
	objects := strings.ReplaceAll(pkiObjects, "pki/issue/web", "pki/issue/hour")
	issued, logins := r.count(t, "update", "pki/issue/hour"), r.count(t, "update", "auth/kubernetes/login")
	var current map[string]string
	refresh := time.NewTicker(4 * time.Second) // the compressed rotation interval
	defer refresh.Stop()
	for i := 0; i < 30; i++ {
		_, current = files(r.mustMount(t, p, mount{pod: pod, params: params("app", objects), current: current}))
		p.Maintain(t.Context())
		<-refresh.C
	}
	d := r.count(t, "update", "pki/issue/hour") - issued
	if d < 1 || d > 2 {
		t.Errorf("%d certificates issued in an hour of refreshes, want 1 or 2", d)
	}
	// Every certificate after the first replaced one about to end: the
	// Observer (keymount_vault_lease_reissues_total) heard each.
	if got := obs.reissues.Load(); got != int64(d-1) {
		t.Errorf("the Observer heard %d re-issues, want %d (certificates issued %d)", got, d-1, d)
	}
	if d := r.count(t, "update", "auth/kubernetes/login") - logins; d != 1 {
		t.Errorf("%d logins in an hour, want 1 (renewed)", d)
	}
	if r.count(t, "update", "auth/token/renew-self") == 0 {
		t.Error("the login was never renewed")
	}
}

// countingObserver counts the provider's re-issues.
type countingObserver struct{ reissues atomic.Int64 }

func (*countingObserver) VaultRequest(string, bool) {}

func (o *countingObserver) LeaseReissued() { o.reissues.Add(1) }
