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

// testUnknownKeys: a class with a parameter or an object field the
// provider does not read fails the mount with InvalidArgument naming it,
// before any request reaches Vault (no login, no read in Vault's audit
// log); the same class listing them under keymount.io/ignore-parameters
// mounts.
func (r *rig) testUnknownKeys(t *testing.T) {
	r.identity(t, "unknown-keys", "app", vaultenv.Role{})
	r.vault.Write(t, "kv1/unknown-keys", map[string]any{"k": "the-value"})
	p := r.provider(t, vault.Config{})
	pod := r.pod(t, "unknown-keys", "app", "p1")
	class := params("app", "- {objectName: k, secretPath: kv1/unknown-keys, secretKey: k, secretVersion: \"2\"}",
		"auth", "type: aws")
	reached := func() int {
		n := 0
		for _, e := range r.vault.Audit(t) {
			if strings.HasPrefix(e.Request.Path, "auth/kubernetes/login") || strings.HasPrefix(e.Request.Path, "kv1/unknown-keys") {
				n++
			}
		}
		return n
	}

	before := reached()
	_, err := r.mount(t, p, mount{pod: pod, params: class})
	if server.Code(err) != codes.InvalidArgument {
		t.Fatalf("mount of a class with unknown keys: %v, want InvalidArgument", err)
	}
	for _, s := range []string{`parameter "auth"`, "vault-csi-provider", `field "secretVersion"`, spec.KeyIgnore} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if n := reached() - before; n != 0 {
		t.Errorf("%d requests reached Vault for a refused class, want 0", n)
	}

	class[spec.KeyIgnore] = "auth, secretVersion"
	res := r.mustMount(t, p, mount{pod: pod, params: class})
	if got, _ := files(res); got["k"] != "the-value" {
		t.Errorf("file k = %q, want the value (the ignored keys ignored)", got["k"])
	}
	if n := r.count(t, "read", "kv1/unknown-keys"); n != 1 {
		t.Errorf("%d reads of kv1/unknown-keys, want 1", n)
	}
}
