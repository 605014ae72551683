//go:build integration && vault

package vaultlogin_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/keymount/keymount/internal/vaultlogin"
	"github.com/keymount/keymount/tests/vaultenv"
)

// TestVault runs both policies against a real Vault (tests/vaultenv),
// logging in with AppRole: Renew renews at 2/3 of the TTL (Session and
// RenewDue) and revokes with revoke-self; Relogin logs in again instead.
func TestVault(t *testing.T) {
	v := vaultenv.Start(t, vaultenv.Options{})
	v.Write(t, "sys/auth/approle", map[string]any{"type": "approle"})
	v.Write(t, "auth/approle/role/app", map[string]any{"token_ttl": "1h", "token_max_ttl": "24h"})
	roleID, err := v.Client.Logical().ReadWithContext(t.Context(), "auth/approle/role/app/role-id")
	if err != nil || roleID == nil {
		t.Fatalf("role-id: %v", err)
	}
	secretID := v.Write(t, "auth/approle/role/app/secret-id", map[string]any{})
	logIn := func(ctx context.Context, c *vaultapi.Client) (*vaultapi.Secret, error) {
		return c.Logical().WriteWithContext(ctx, "auth/approle/login",
			map[string]any{"role_id": roleID.Data["role_id"], "secret_id": secretID.Data["secret_id"]})
	}
	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.Addr
	base, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base.ClearToken()
	count := func(op, path string) int { return v.Audit(t).Count(op, path) }

	t.Run("renew", func(t *testing.T) {
		r := newRig(vaultlogin.Renew, 10*time.Minute)
		l := r.cache.Get("app", vaultlogin.Identity{Path: "auth/approle/login", Role: "app"})
		logins, renewals := count("update", "auth/approle/login"), count("update", "auth/token/renew-self")
		s := session(t, l, base, logIn)
		r.step(40 * time.Minute)
		if again := session(t, l, base, logIn); again != s {
			t.Error("at 2/3 of the TTL: a new token, want the token renewed")
		}
		r.step(40 * time.Minute)
		l.RenewDue(t.Context())
		if d, e := count("update", "auth/approle/login")-logins, count("update", "auth/token/renew-self")-renewals; d != 1 || e != 2 {
			t.Errorf("%d logins and %d renewals, want 1 and 2", d, e)
		}
		revocations := count("update", "auth/token/revoke-self")
		l.Revoke(t.Context())
		if d := count("update", "auth/token/revoke-self") - revocations; d != 1 || !s.Revoked() {
			t.Errorf("%d revocations (revoked: %t), want 1", d, s.Revoked())
		}
		_, err := s.Client().Auth().Token().LookupSelfWithContext(t.Context())
		if re := (*vaultapi.ResponseError)(nil); !errors.As(err, &re) || re.StatusCode != http.StatusForbidden {
			t.Errorf("the revoked token's lookup-self: %v, want 403", err)
		}
	})

	t.Run("relogin", func(t *testing.T) {
		r := newRig(vaultlogin.Relogin, 0)
		l := r.cache.Get("app", vaultlogin.Identity{Role: "app"})
		logins, renewals := count("update", "auth/approle/login"), count("update", "auth/token/renew-self")
		s := session(t, l, base, logIn)
		r.step(40 * time.Minute)
		if again := session(t, l, base, logIn); again == s || again.Token() == s.Token() {
			t.Error("at 2/3 of the TTL: the same token, want a new login")
		}
		if d, e := count("update", "auth/approle/login")-logins, count("update", "auth/token/renew-self")-renewals; d != 2 || e != 0 {
			t.Errorf("%d logins and %d renewals, want 2 and 0", d, e)
		}
	})
}
