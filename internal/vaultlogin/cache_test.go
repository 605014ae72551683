package vaultlogin_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/keymount/keymount/internal/vaultlogin"
)

// TestLoginFailures: a failed login returns the LogInFunc's error as it is
// (counted as a failed login), an answer without a token ErrNoToken; the
// next use logs in again.
func TestLoginFailures(t *testing.T) {
	r := newRig(vaultlogin.Renew, 0)
	base := deadVault(t)
	l := r.cache.Get("k", vaultlogin.Identity{Path: "auth/kubernetes/login", Role: "app"})
	refused := errors.New("vault login auth/kubernetes/login (role \"app\"): HTTP 400: invalid role name")
	if _, err := l.Session(t.Context(), base, func(context.Context, *vaultapi.Client) (*vaultapi.Secret, error) {
		return nil, refused
	}); err != refused { //nolint:errorlint // the very error, not one wrapping it
		t.Errorf("Session: %v, want the login's error as it is", err)
	}
	for _, ans := range []*vaultapi.Secret{nil, {}, {Auth: &vaultapi.SecretAuth{}}} {
		if _, err := l.Session(t.Context(), base, func(context.Context, *vaultapi.Client) (*vaultapi.Secret, error) {
			return ans, nil
		}); !errors.Is(err, vaultlogin.ErrNoToken) {
			t.Errorf("an answer %+v: %v, want ErrNoToken", ans, err)
		}
	}
	want := []string{"login", "login failed", "login", "login", "login"}
	if diff := cmp.Diff(want, r.obs.take()); diff != "" {
		t.Errorf("told (-want +got):\n%s", diff)
	}
	is := &issuer{ttl: time.Hour}
	if s := session(t, l, base, is.logIn); s.Token() != "t1" {
		t.Errorf("after failures: token %q, want t1", s.Token())
	}
}

// TestLoginClient: the login is sent with a clone of the base client in
// its Vault namespace and without a token; the Session's client sends the
// token in that namespace; the base client is left as it was.
func TestLoginClient(t *testing.T) {
	r := newRig(vaultlogin.Relogin, 0)
	base := deadVault(t)
	base.SetNamespace("team-a")
	var sentWith *vaultapi.Client
	s := session(t, r.cache.Get("k", vaultlogin.Identity{Role: "r"}), base, func(_ context.Context, c *vaultapi.Client) (*vaultapi.Secret, error) {
		sentWith = c
		if c.Token() != "" || c.Namespace() != "team-a" {
			t.Errorf("login sent with token %q in namespace %q, want none in team-a", c.Token(), c.Namespace())
		}
		return &vaultapi.Secret{Auth: &vaultapi.SecretAuth{ClientToken: "hvs.x", LeaseDuration: 60}}, nil
	})
	if sentWith == base || s.Client() == base {
		t.Error("the base client was used, not a clone")
	}
	if s.Token() != "hvs.x" || s.Client().Namespace() != "team-a" || base.Token() != "" {
		t.Errorf("session token %q in namespace %q, base token %q; want hvs.x in team-a, none", s.Token(), s.Client().Namespace(), base.Token())
	}
}

// TestOneLoginAtOnce: uses of one login at the same time log in once.
func TestOneLoginAtOnce(t *testing.T) {
	r := newRig(vaultlogin.Relogin, 0)
	base := deadVault(t)
	is := &issuer{ttl: time.Hour}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := r.cache.Get("k", vaultlogin.Identity{Role: "r"}).Session(t.Context(), base, is.logIn); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := is.logins(); n != 1 {
		t.Errorf("%d logins for 8 uses at once, want 1", n)
	}
}

// TestSweep: Sweep forgets and returns the logins not kept, returns those
// kept, and a forgotten key starts afresh.
func TestSweep(t *testing.T) {
	r := newRig(vaultlogin.Renew, 0)
	a := r.cache.Get("a", vaultlogin.Identity{Role: "a"})
	b := r.cache.Get("b", vaultlogin.Identity{Role: "b"})
	if r.cache.Get("a", vaultlogin.Identity{Role: "other"}) != a || a.Key() != "a" || a.Identity().Role != "a" {
		t.Error("Get of a cached key did not return its Login as created")
	}
	gone, kept := r.cache.Sweep(func(k string) bool { return k == "a" })
	if len(gone) != 1 || gone[0] != b || len(kept) != 1 || kept[0] != a {
		t.Errorf("Sweep keeping a: gone %v, kept %v", gone, kept)
	}
	if r.cache.Get("b", vaultlogin.Identity{Role: "b"}) == b || r.cache.Get("a", vaultlogin.Identity{Role: "a"}) != a {
		t.Error("after Sweep: b not started afresh, or a not kept")
	}
}
