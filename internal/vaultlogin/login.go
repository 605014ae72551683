package vaultlogin

import (
	"context"
	"sync"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
)

// Identity names a login in logs and errors, never with a credential.
type Identity struct {
	// Path is the login's path (auth/<mount>/login), when the caller
	// names it.
	Path string
	// Role says who logs in.
	Role string
}

// Login is the Vault login of one identity.
type Login struct {
	key string
	who Identity
	c   *Cache

	mu      sync.Mutex
	current *Session
	retired []*Session // replaced, still holding leases until they end
}

// LogInFunc sends a login request with c (a clone of the base client: no
// token, the base client's Vault namespace) and returns Vault's answer,
// its error worded by the caller.
type LogInFunc func(ctx context.Context, c *vaultapi.Client) (*vaultapi.Secret, error)

// Key is the key l is cached by.
func (l *Login) Key() string { return l.key }

// Identity is who l logs in as.
func (l *Login) Identity() Identity { return l.who }

// Session returns a usable token of l: the current one, renewed when due
// (Renew), or a new login with logIn when there is none, it ended, it is
// due (Relogin) or it is about to end for good. A failed login returns
// logIn's error as it is, or ErrNoToken.
func (l *Login) Session(ctx context.Context, base *vaultapi.Client, logIn LogInFunc) (*Session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.c.now()
	if s := l.current; s != nil && !s.revoked && now.Before(s.expires) {
		nearEnd := l.nearEnd(s, now)
		if !nearEnd && now.Before(s.renewAt) {
			return s, nil
		}
		if l.c.cfg.Policy == Renew && !nearEnd && s.renewable {
			if err := l.renew(ctx, s); err == nil {
				return s, nil
			}
		}
		l.retire(s)
	}
	s, err := l.logIn(ctx, base, logIn)
	if err != nil {
		return nil, err
	}
	l.current = s
	return s, nil
}

// nearEnd tells whether s can no longer be renewed past the margin. l.mu
// is held.
func (l *Login) nearEnd(s *Session, now time.Time) bool {
	return !s.hardEnd.IsZero() && !now.Before(s.hardEnd.Add(-l.c.margin(s.ttl)))
}

// retire marks s replaced; Renew keeps it for Revoke. l.mu is held.
func (l *Login) retire(s *Session) {
	s.retired = true
	if l.c.cfg.Policy == Renew {
		l.retired = append(l.retired, s)
	}
}

// logIn logs in with logIn on a clone of base. l.mu is held.
func (l *Login) logIn(ctx context.Context, base *vaultapi.Client, logIn LogInFunc) (*Session, error) {
	cl, err := base.Clone()
	if err != nil {
		return nil, err
	}
	if ns := base.Namespace(); ns != "" {
		cl.SetNamespace(ns)
	}
	l.c.request("login", false)
	sec, err := logIn(ctx, cl)
	if err != nil {
		l.c.request("login", true)
		return nil, err
	}
	if sec == nil || sec.Auth == nil || sec.Auth.ClientToken == "" {
		return nil, ErrNoToken
	}
	cl.SetToken(sec.Auth.ClientToken)
	now := l.c.now()
	ttl := time.Duration(sec.Auth.LeaseDuration) * time.Second
	s := &Session{l: l, client: cl, ttl: ttl, renewable: sec.Auth.Renewable, expires: now.Add(ttl), renewAt: now.Add(ttl * 2 / 3)}
	if ttl == 0 && l.c.cfg.Policy == Renew { // a token that does not expire
		s.expires, s.renewAt = now.Add(forever), now.Add(forever)
	}
	if !s.renewable {
		s.hardEnd = s.expires
	}
	if o := l.c.cfg.Observer; o != nil {
		o.LoggedIn(l, s)
	}
	return s, nil
}

// renew renews s by its TTL. A renewal granted less than asked reveals the
// login's max TTL. l.mu is held.
func (l *Login) renew(ctx context.Context, s *Session) error {
	l.c.request("renew-self", false)
	sec, err := s.client.Auth().Token().RenewSelfWithContext(ctx, int(s.ttl.Seconds()))
	if err != nil || sec == nil || sec.Auth == nil {
		l.c.request("renew-self", true)
		if err == nil {
			err = ErrNoToken
		}
		if o := l.c.cfg.Observer; o != nil {
			o.RenewFailed(l, err)
		}
		return err
	}
	now := l.c.now()
	granted := time.Duration(sec.Auth.LeaseDuration) * time.Second
	s.expires = now.Add(granted)
	s.renewAt = now.Add(granted * 2 / 3)
	if granted < s.ttl {
		s.hardEnd = s.expires
	}
	return nil
}

// RenewDue renews l's current token when it is due and can be renewed
// past the margin (Renew; Relogin renews nothing). A token that cannot be
// is replaced by the next Session.
func (l *Login) RenewDue(ctx context.Context) {
	if l.c.cfg.Policy != Renew {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.current
	now := l.c.now()
	if s == nil || s.revoked || !s.renewable || now.Before(s.renewAt) || !now.Before(s.expires) {
		return
	}
	if l.nearEnd(s, now) {
		return // the next use logs in again
	}
	_ = l.renew(ctx, s) // the Observer is told
}

// Revoke revokes every token of l still valid (revoke-self): the leases
// issued with them go too. l's next Session logs in again.
func (l *Login) Revoke(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := make([]*Session, 0, len(l.retired)+1)
	all = append(all, l.retired...)
	all = append(all, l.current)
	l.retired, l.current = nil, nil
	now := l.c.now()
	for _, s := range all {
		if s == nil || s.revoked || !now.Before(s.expires) {
			continue
		}
		s.revoked = true
		l.c.request("revoke-self", false)
		if err := s.client.Auth().Token().RevokeSelfWithContext(ctx, ""); err != nil {
			l.c.request("revoke-self", true)
			if o := l.c.cfg.Observer; o != nil {
				o.RevokeFailed(l, err)
			}
		}
	}
}
