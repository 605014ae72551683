package vaultlogin_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/internal/vaultlogin"
)

// TestReloginAtTwoThirds: under Relogin a token is reused until 2/3 of its
// TTL, then a new login replaces it; nothing is ever renewed, even a
// renewable token, and RenewDue sends nothing.
func TestReloginAtTwoThirds(t *testing.T) {
	r := newRig(vaultlogin.Relogin, 0)
	base := deadVault(t)
	is := &issuer{ttl: 90 * time.Second, renewable: true}
	l := r.cache.Get("k", vaultlogin.Identity{Role: "AppRole r-1"})

	first := session(t, l, base, is.logIn)
	r.step(59 * time.Second)
	if s := session(t, l, base, is.logIn); s != first || s.Token() != "t1" {
		t.Errorf("before 2/3 of the TTL: token %q, want t1 reused", s.Token())
	}
	l.RenewDue(t.Context())
	r.step(time.Second)
	if s := session(t, l, base, is.logIn); s.Token() != "t2" {
		t.Errorf("at 2/3 of the TTL: token %q, want a new login t2", s.Token())
	}
	want := []string{"login", "logged in as AppRole r-1 (ttl 1m30s, renewable true)", "login", "logged in as AppRole r-1 (ttl 1m30s, renewable true)"}
	if diff := cmp.Diff(want, r.obs.take()); diff != "" {
		t.Errorf("told (-want +got):\n%s", diff)
	}
}

// TestReloginTokenWithoutTTL: under Relogin a token Vault gives without a
// TTL is due at once, so every use logs in (the SecretMirror source's
// rule, kept as it was).
func TestReloginTokenWithoutTTL(t *testing.T) {
	r := newRig(vaultlogin.Relogin, 0)
	is := &issuer{}
	l := r.cache.Get("k", vaultlogin.Identity{Role: "r"})
	for range 3 {
		session(t, l, deadVault(t), is.logIn)
	}
	if n := is.logins(); n != 3 {
		t.Errorf("%d logins for three uses of a token without TTL, want 3", n)
	}
}

// TestForget: a forgotten login (Vault refused its token) logs in again
// on its next use, though its token is not due.
func TestForget(t *testing.T) {
	r := newRig(vaultlogin.Relogin, 0)
	base := deadVault(t)
	is := &issuer{ttl: time.Hour}
	session(t, r.cache.Get("k", vaultlogin.Identity{Role: "r"}), base, is.logIn)
	session(t, r.cache.Get("k", vaultlogin.Identity{Role: "r"}), base, is.logIn)
	r.cache.Forget("k")
	if s := session(t, r.cache.Get("k", vaultlogin.Identity{Role: "r"}), base, is.logIn); s.Token() != "t2" || is.logins() != 2 {
		t.Errorf("after Forget: token %q after %d logins, want t2 after 2", s.Token(), is.logins())
	}
}
