package vault

import (
	"context"
	"errors"
	"strings"

	vaultapi "github.com/hashicorp/vault/api"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/vaultlogin"
	"github.com/keymount/keymount/provider/vault/spec"
)

// newLogins is the provider's login cache, the Renew policy: one login per
// proven identity, renewed at 2/3 of its TTL, replaced before it can no
// longer be renewed (Config.ReissueMargin), and revoked with the tokens it
// replaced once no volume uses it.
func newLogins(cfg Config, obs observer) *vaultlogin.Cache {
	return vaultlogin.New(vaultlogin.Config{Policy: vaultlogin.Renew, Margin: cfg.ReissueMargin,
		Clock: cfg.Clock, Observer: loginObserver{obs}})
}

// loginKey names the identity of s's login at addr.
func loginKey(addr string, s *spec.Spec) string {
	return strings.Join([]string{addr, s.VaultNamespace, s.AuthMount, s.Role, s.Namespace, s.ServiceAccount}, "|")
}

// session returns a usable session of l: the current one, renewed if due,
// or a new login with token (the proven service account token of the
// mount) when there is none, it ended, or it is about to end for good.
// Kubernetes and JWT auth both log in with {role, jwt}.
func (p *Provider) session(ctx context.Context, l *vaultlogin.Login, base *vaultapi.Client, token string) (*vaultlogin.Session, error) {
	who := l.Identity()
	s, err := l.Session(ctx, base, func(ctx context.Context, c *vaultapi.Client) (*vaultapi.Secret, error) {
		sec, err := c.Logical().WriteWithContext(ctx, who.Path, map[string]any{"role": who.Role, "jwt": token})
		if err != nil {
			return nil, loginError(who.Path, who.Role, err)
		}
		return sec, nil
	})
	if errors.Is(err, vaultlogin.ErrNoToken) {
		return nil, loginError(who.Path, who.Role, err)
	}
	return s, err
}

// loginObserver counts the login cache's requests with the provider's
// Observer and logs what it got past.
type loginObserver struct{ obs observer }

var _ vaultlogin.Observer = loginObserver{}

func (o loginObserver) VaultRequest(op string, failed bool) {
	if failed {
		o.obs.failure(op)
	} else {
		o.obs.request(op)
	}
}

func (loginObserver) LoggedIn(l *vaultlogin.Login, s *vaultlogin.Session) {
	who := l.Identity()
	klog.V(2).InfoS("logged in to vault", "path", who.Path, "role", who.Role, "ttl", s.TTL(), "renewable", s.Renewable())
}

func (loginObserver) RenewFailed(l *vaultlogin.Login, err error) {
	who := l.Identity()
	klog.V(2).InfoS("renewing the vault login failed; logging in again", "path", who.Path, "role", who.Role,
		"err", vaultError("renew-self", "auth/token/renew-self", who.Role, err))
}

func (loginObserver) RevokeFailed(l *vaultlogin.Login, err error) {
	who := l.Identity()
	klog.InfoS("revoking a vault login failed; it ends with its TTL", "path", who.Path, "role", who.Role,
		"err", vaultError("revoke-self", "auth/token/revoke-self", who.Role, err))
}
