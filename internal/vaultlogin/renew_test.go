package vaultlogin_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/internal/vaultlogin"
)

// TestRenewTokenWithoutTTL: under Renew a token Vault gives without a TTL
// never ends: it is neither renewed nor replaced.
func TestRenewTokenWithoutTTL(t *testing.T) {
	r := newRig(vaultlogin.Renew, 10*time.Minute)
	base := deadVault(t)
	is := &issuer{}
	l := r.cache.Get("k", vaultlogin.Identity{Role: "r"})
	first := session(t, l, base, is.logIn)
	r.step(10 * 365 * 24 * time.Hour)
	l.RenewDue(t.Context())
	if s := session(t, l, base, is.logIn); s != first || is.logins() != 1 {
		t.Errorf("ten years on: %d logins, want the first token kept", is.logins())
	}
	if got := r.obs.take(); len(got) != 2 {
		t.Errorf("told %q, want one login only", got)
	}
}

// TestRenewNotRenewable: under Renew a token that cannot be renewed is
// replaced at 2/3 of its TTL; the token replaced is kept until Revoke and
// its LastEnd is its end, the new one's its own end.
func TestRenewNotRenewable(t *testing.T) {
	r := newRig(vaultlogin.Renew, 10*time.Minute)
	base := deadVault(t)
	is := &issuer{ttl: time.Hour}
	l := r.cache.Get("k", vaultlogin.Identity{Role: "r"})
	t0 := r.clock.Now()
	first := session(t, l, base, is.logIn)
	if got := first.LastEnd(); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("LastEnd of a token not renewable = %s, want its end %s", got, t0.Add(time.Hour))
	}
	r.step(39 * time.Minute)
	l.RenewDue(t.Context())
	if s := session(t, l, base, is.logIn); s != first {
		t.Errorf("before 2/3 of the TTL: token %q, want t1", s.Token())
	}
	r.step(time.Minute)
	second := session(t, l, base, is.logIn)
	if second.Token() != "t2" || !first.LastEnd().Equal(t0.Add(time.Hour)) || !second.LastEnd().Equal(t0.Add(100*time.Minute)) {
		t.Errorf("at 2/3: token %q, LastEnd %s and %s; want t2, %s and %s", second.Token(),
			first.LastEnd(), second.LastEnd(), t0.Add(time.Hour), t0.Add(100*time.Minute))
	}
	if got := r.obs.take(); count(got, "renew-self") != 0 {
		t.Errorf("told %q: a token not renewable was renewed", got)
	}
	l.Revoke(t.Context()) // Vault is not there: both revocations fail
	want := []string{"revoke-self", "revoke-self failed", "revoking r failed", "revoke-self", "revoke-self failed", "revoking r failed"}
	if diff := cmp.Diff(want, r.obs.take()); diff != "" {
		t.Errorf("Revoke told (-want +got):\n%s", diff)
	}
	if !first.Revoked() || !second.Revoked() {
		t.Errorf("revoked: %t, %t; want both", first.Revoked(), second.Revoked())
	}
	if s := session(t, l, base, is.logIn); s.Token() != "t3" {
		t.Errorf("after Revoke: token %q, want a new login t3", s.Token())
	}
}

// TestRenewFailed: under Renew a renewable token due is renewed; when the
// renewal fails the Observer is told and a new login replaces it, the
// token replaced ending at its own end. RenewDue renews only what is due.
func TestRenewFailed(t *testing.T) {
	r := newRig(vaultlogin.Renew, 10*time.Minute)
	base := deadVault(t)
	is := &issuer{ttl: 90 * time.Second, renewable: true}
	l := r.cache.Get("k", vaultlogin.Identity{Role: "r"})
	t0 := r.clock.Now()
	first := session(t, l, base, is.logIn)
	if !first.LastEnd().IsZero() {
		t.Errorf("LastEnd of a renewable token = %s, want zero (not known)", first.LastEnd())
	}
	r.obs.take()
	l.RenewDue(t.Context())
	if got := r.obs.take(); len(got) != 0 {
		t.Errorf("RenewDue before 2/3 of the TTL told %q, want nothing", got)
	}
	r.step(time.Minute)
	l.RenewDue(t.Context())
	want := []string{"renew-self", "renew-self failed", "renewing r failed"}
	if diff := cmp.Diff(want, r.obs.take()); diff != "" {
		t.Errorf("RenewDue at 2/3 told (-want +got):\n%s", diff)
	}
	second := session(t, l, base, is.logIn)
	want = []string{"renew-self", "renew-self failed", "renewing r failed", "login", "logged in as r (ttl 1m30s, renewable true)"}
	if diff := cmp.Diff(want, r.obs.take()); diff != "" {
		t.Errorf("Session at 2/3 told (-want +got):\n%s", diff)
	}
	if second.Token() != "t2" || !first.LastEnd().Equal(t0.Add(90*time.Second)) {
		t.Errorf("token %q, the replaced token's LastEnd %s; want t2, %s", second.Token(), first.LastEnd(), t0.Add(90*time.Second))
	}
}

// count counts the events e in got.
func count(got []string, e string) int {
	n := 0
	for _, g := range got {
		if g == e {
			n++
		}
	}
	return n
}
