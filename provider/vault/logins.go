package vault

import (
	"context"
	"strings"
	"sync"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/provider/vault/spec"
)

// session is one Vault token of an identity. Leases issued with it end when
// it ends.
type session struct {
	client    *vaultapi.Client // sends the token
	ttl       time.Duration    // the TTL it was granted (and is renewed by)
	renewable bool

	// guarded by the login's mu
	expires time.Time // current end
	renewAt time.Time
	// hardEnd is when it can no longer be renewed: its login's max TTL,
	// known once a renewal is granted less than asked, or its end when it
	// is not renewable. Zero: not known yet.
	hardEnd time.Time
	revoked bool
	retired bool // replaced: never renewed again
}

// lastEnd is the end of s no renewal can move, or zero if not known. A
// lease issued with s must be replaced before it. Only the login's hard end
// counts, never its current (renewable) expiry: counting that re-issued
// every lease at every login renewal.
func (s *session) lastEnd() time.Time {
	if s.retired || s.revoked {
		return s.expires
	}
	return s.hardEnd
}

// login is the Vault login of one proven identity.
type login struct {
	key  string
	path string // auth/<mount>/login
	role string

	mu      sync.Mutex
	current *session
	retired []*session // replaced, still holding leases until they end
}

func loginKey(addr string, s *spec.Spec) string {
	return strings.Join([]string{addr, s.VaultNamespace, s.AuthMount, s.Role, s.Namespace, s.ServiceAccount}, "|")
}

// session returns a usable session of l: the current one, renewed if due,
// or a new login with token (the proven service account token of the
// mount) when there is none, it ended, or it is about to end for good.
func (p *Provider) session(ctx context.Context, l *login, base *vaultapi.Client, token string) (*session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := p.cfg.Clock.Now()
	if s := l.current; s != nil && !s.revoked && now.Before(s.expires) {
		nearEnd := !s.hardEnd.IsZero() && !now.Before(s.hardEnd.Add(-p.margin(s.ttl)))
		if !nearEnd && now.Before(s.renewAt) {
			return s, nil
		}
		if !nearEnd && s.renewable {
			if err := p.renewSession(ctx, l, s); err == nil {
				return s, nil
			}
		}
		s.retired = true
		l.retired = append(l.retired, s)
	}
	s, err := p.logIn(ctx, l, base, token)
	if err != nil {
		return nil, err
	}
	l.current = s
	return s, nil
}

// logIn logs in with token: Kubernetes and JWT auth both take {role, jwt}.
func (p *Provider) logIn(ctx context.Context, l *login, base *vaultapi.Client, token string) (*session, error) {
	cl, err := base.Clone()
	if err != nil {
		return nil, err
	}
	if ns := base.Namespace(); ns != "" {
		cl.SetNamespace(ns)
	}
	p.obs.request("login")
	sec, err := cl.Logical().WriteWithContext(ctx, l.path, map[string]any{"role": l.role, "jwt": token})
	if err != nil {
		p.obs.failure("login")
		return nil, loginError(l.path, l.role, err)
	}
	if sec == nil || sec.Auth == nil || sec.Auth.ClientToken == "" {
		return nil, loginError(l.path, l.role, errNoAuth)
	}
	cl.SetToken(sec.Auth.ClientToken)
	now := p.cfg.Clock.Now()
	ttl := time.Duration(sec.Auth.LeaseDuration) * time.Second
	s := &session{client: cl, ttl: ttl, renewable: sec.Auth.Renewable, expires: now.Add(ttl), renewAt: now.Add(ttl * 2 / 3)}
	if ttl == 0 { // a token that does not expire (root-like roles)
		s.expires, s.renewAt = now.Add(100*365*24*time.Hour), now.Add(100*365*24*time.Hour)
	}
	if !s.renewable {
		s.hardEnd = s.expires
	}
	klog.V(2).InfoS("logged in to vault", "path", l.path, "role", l.role, "ttl", ttl, "renewable", s.renewable)
	return s, nil
}

// renewSession renews s by its TTL. A renewal granted less than asked
// reveals the login's max TTL.
func (p *Provider) renewSession(ctx context.Context, l *login, s *session) error {
	p.obs.request("renew-self")
	sec, err := s.client.Auth().Token().RenewSelfWithContext(ctx, int(s.ttl.Seconds()))
	if err != nil || sec == nil || sec.Auth == nil {
		p.obs.failure("renew-self")
		if err == nil {
			err = errNoAuth
		}
		klog.V(2).InfoS("renewing the vault login failed; logging in again", "path", l.path, "role", l.role, "err", vaultError("renew-self", "auth/token/renew-self", l.role, err))
		return err
	}
	now := p.cfg.Clock.Now()
	granted := time.Duration(sec.Auth.LeaseDuration) * time.Second
	s.expires = now.Add(granted)
	s.renewAt = now.Add(granted * 2 / 3)
	if granted < s.ttl {
		s.hardEnd = s.expires
	}
	return nil
}

// revoke revokes every session of l (revoke-self): its leases go with them.
func (p *Provider) revoke(ctx context.Context, l *login) {
	l.mu.Lock()
	defer l.mu.Unlock()
	all := make([]*session, 0, len(l.retired)+1)
	all = append(all, l.retired...)
	all = append(all, l.current)
	l.retired, l.current = nil, nil
	now := p.cfg.Clock.Now()
	for _, s := range all {
		if s == nil || s.revoked || !now.Before(s.expires) {
			continue
		}
		s.revoked = true
		p.obs.request("revoke-self")
		if err := s.client.Auth().Token().RevokeSelfWithContext(ctx, ""); err != nil {
			p.obs.failure("revoke-self")
			klog.InfoS("revoking a vault login failed; it ends with its TTL", "path", l.path, "role", l.role,
				"err", vaultError("revoke-self", "auth/token/revoke-self", l.role, err))
		}
	}
}

// renewDue renews l's current session when due (Maintain).
func (p *Provider) renewDue(ctx context.Context, l *login) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.current
	now := p.cfg.Clock.Now()
	if s == nil || s.revoked || !s.renewable || now.Before(s.renewAt) || !now.Before(s.expires) {
		return
	}
	if !s.hardEnd.IsZero() && !now.Before(s.hardEnd.Add(-p.margin(s.ttl))) {
		return // the next mount logs in again
	}
	_ = p.renewSession(ctx, l, s)
}
