package vaultlogin

import (
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// forever is the end of a token Vault gives without a TTL (root-like
// roles), under Renew.
const forever = 100 * 365 * 24 * time.Hour

// Session is one Vault token of a Login. Leases issued with it end when it
// ends.
type Session struct {
	l         *Login
	client    *vaultapi.Client // sends the token
	ttl       time.Duration    // the TTL it was granted (and is renewed by)
	renewable bool

	// guarded by l.mu
	expires time.Time // current end
	renewAt time.Time
	// hardEnd is when it can no longer be renewed: its login's max TTL,
	// known once a renewal is granted less than asked, or its end when it
	// is not renewable. Zero: not known yet.
	hardEnd time.Time
	revoked bool
	retired bool // replaced: never renewed again
}

// Client is a Vault client that sends s's token, in the Vault namespace of
// the client s logged in with.
func (s *Session) Client() *vaultapi.Client { return s.client }

// Token is s's Vault token.
func (s *Session) Token() string { return s.client.Token() }

// TTL is the TTL s was granted at login.
func (s *Session) TTL() time.Duration { return s.ttl }

// Renewable tells whether Vault said s may be renewed.
func (s *Session) Renewable() bool { return s.renewable }

// Revoked tells whether s was revoked (Login.Revoke).
func (s *Session) Revoked() bool {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	return s.revoked
}

// LastEnd is the end of s no renewal can move, or zero if not known. A
// lease issued with s must be replaced before it. Only the login's hard end
// counts, never its current (renewable) expiry: counting that re-issued
// every lease at every login renewal.
func (s *Session) LastEnd() time.Time {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if s.retired || s.revoked {
		return s.expires
	}
	return s.hardEnd
}
