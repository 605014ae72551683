package secretmirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"

	vaultapi "github.com/hashicorp/vault/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
	"github.com/keymount/keymount/internal/vaultlogin"
)

// mirrors' defaults of a Vault login, and keymount's of kubernetes auth.
const (
	defaultAppRolePath     = "approle"
	defaultRoleIDKey       = "role-id"
	defaultSecretIDKey     = "secret-id"
	defaultTokenKey        = "token"
	defaultKubernetesMount = "kubernetes"
	defaultServiceAccount  = "default"
	defaultVaultAudience   = "vault"
)

// errVaultSpec is a SecretMirror's Vault source or destination that cannot
// be used as written; the message names the field.
var errVaultSpec = errors.New("invalid Vault spec")

// TokenSource mints service account tokens: the value of the
// csi.storage.k8s.io/serviceAccount.tokens attribute for the audiences
// (tokens.Manager).
type TokenSource interface {
	Tokens(ctx context.Context, namespace, serviceAccount string, audiences []string) (string, error)
}

// vaultLogin is one way to get a Vault token, resolved from a
// SecretMirror's spec.source.vault.auth.
type vaultLogin struct {
	// key names the cached login: the address, the method and the
	// identity (a digest of the credentials, never the credentials).
	key string
	// role says who logs in, for error messages: the AppRole's role ID,
	// the Kubernetes role, or "token <Secret>".
	role string
	// token is the static token of token auth ("" otherwise).
	token string
	// login logs in (AppRole, Kubernetes), nil for token auth.
	login func(ctx context.Context, c *vaultapi.Client) (*vaultapi.Secret, error)
}

// resolveLogin reads the SecretMirror's auth: the Secret holding its
// credentials (AppRole, token) or the ServiceAccount token to log in with
// (Kubernetes).
func (v *vaultReader) resolveLogin(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, addr string, auth *mirrorsv1alpha2.VaultAuth, field string) (*vaultLogin, error) {
	switch {
	case auth == nil || (auth.AppRole == nil && auth.Token == nil && auth.Kubernetes == nil):
		return nil, fmt.Errorf("%w: %s: give approle, token or kubernetes", errVaultSpec, field)
	case auth.AppRole != nil && auth.AppRole.SecretRef != nil && auth.AppRole.SecretRef.Name != "":
		return v.appRoleLogin(ctx, m, addr, auth.AppRole, field+".approle")
	case auth.Token != nil && auth.Token.SecretRef != nil && auth.Token.SecretRef.Name != "":
		return v.tokenLogin(ctx, m, addr, auth.Token, field+".token")
	case auth.Kubernetes != nil:
		return v.kubernetesLogin(ctx, m, addr, auth.Kubernetes, field+".kubernetes")
	}
	return nil, fmt.Errorf("%w: %s: approle.secretRef.name or token.secretRef.name is required", errVaultSpec, field)
}

// authSecret reads the Secret ref names, in the SecretMirror's namespace.
// mirrors also reads one of another namespace; keymount refuses it.
func (v *vaultReader) authSecret(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, ref *corev1.SecretReference, field string) (*corev1.Secret, error) {
	name := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	switch name.Namespace {
	case "":
		name.Namespace = m.Namespace
	case m.Namespace:
	default:
		return nil, fmt.Errorf("%w: %s.namespace %q: a SecretMirror logs in only with a Secret of its own namespace %s (one elsewhere would let whoever can create a SecretMirror use another namespace's Vault identity); create the Secret in %s",
			errVaultSpec, field, name.Namespace, m.Namespace, m.Namespace)
	}
	s := &corev1.Secret{}
	if err := v.live.Get(ctx, name, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s: Secret %s not found", errVaultSpec, field, name)
		}
		return nil, fmt.Errorf("%s: read Secret %s: %w", field, name, err)
	}
	return s, nil
}

// secretValue is the value of key in s, an error naming field when absent.
func secretValue(s *corev1.Secret, key, field string) (string, error) {
	val, ok := s.Data[key]
	if !ok || len(val) == 0 {
		return "", fmt.Errorf("%w: %s: Secret %s/%s has no key %q", errVaultSpec, field, s.Namespace, s.Name, key)
	}
	return string(val), nil
}

func (v *vaultReader) appRoleLogin(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, addr string, a *mirrorsv1alpha2.VaultAppRoleAuth, field string) (*vaultLogin, error) {
	s, err := v.authSecret(ctx, m, a.SecretRef, field+".secretRef")
	if err != nil {
		return nil, err
	}
	mount, roleKey, secretKey := or(a.AppRolePath, defaultAppRolePath), or(a.RoleIDKey, defaultRoleIDKey), or(a.SecretIDKey, defaultSecretIDKey)
	roleID, err := secretValue(s, roleKey, field+".roleIDKey")
	if err != nil {
		return nil, err
	}
	secretID, err := secretValue(s, secretKey, field+".secretIDKey")
	if err != nil {
		return nil, err
	}
	return &vaultLogin{
		key:  loginKey(addr, "approle", mount, roleID, secretID),
		role: "AppRole " + roleID,
		login: func(ctx context.Context, c *vaultapi.Client) (*vaultapi.Secret, error) {
			return c.Logical().WriteWithContext(ctx, path.Join("auth", mount, "login"), map[string]any{"role_id": roleID, "secret_id": secretID})
		},
	}, nil
}

func (v *vaultReader) tokenLogin(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, addr string, a *mirrorsv1alpha2.VaultTokenAuth, field string) (*vaultLogin, error) {
	s, err := v.authSecret(ctx, m, a.SecretRef, field+".secretRef")
	if err != nil {
		return nil, err
	}
	token, err := secretValue(s, or(a.TokenKey, defaultTokenKey), field+".tokenKey")
	if err != nil {
		return nil, err
	}
	return &vaultLogin{key: loginKey(addr, "token", token), role: "the token of Secret " + s.Namespace + "/" + s.Name, token: token}, nil
}

func (v *vaultReader) kubernetesLogin(ctx context.Context, m *mirrorsv1alpha2.SecretMirror, addr string, a *mirrorsv1alpha2.VaultKubernetesAuth, field string) (*vaultLogin, error) {
	if a.Role == "" {
		return nil, fmt.Errorf("%w: %s.role is required: the Vault role of the Kubernetes auth method", errVaultSpec, field)
	}
	if v.tokens == nil {
		return nil, fmt.Errorf("%w: %s: keymount-controller requests no service account tokens here", errVaultSpec, field)
	}
	mount, sa, aud := or(a.MountPath, defaultKubernetesMount), or(a.ServiceAccountName, defaultServiceAccount), or(a.Audience, defaultVaultAudience)
	if !slices.Contains(v.audiences, aud) {
		return nil, fmt.Errorf("%w: %s.audience %q: keymount-controller requests tokens only for %v (--token-request-audience; the chart adds vault with providers.vault)", errVaultSpec, field, aud, v.audiences)
	}
	attr, err := v.tokens.Tokens(ctx, m.Namespace, sa, []string{aud})
	if err != nil {
		return nil, fmt.Errorf("%s: a token of ServiceAccount %s/%s for the audience %q (keymount-controller's --token-request-audience must list it): %w", field, m.Namespace, sa, aud, err)
	}
	var toks map[string]struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(attr), &toks); err != nil || toks[aud].Token == "" {
		return nil, fmt.Errorf("%s: no token of ServiceAccount %s/%s for the audience %q", field, m.Namespace, sa, aud)
	}
	jwt := toks[aud].Token
	return &vaultLogin{
		key:  loginKey(addr, "kubernetes", mount, a.Role, m.Namespace, sa, aud),
		role: "Kubernetes role " + a.Role + " (ServiceAccount " + m.Namespace + "/" + sa + ")",
		login: func(ctx context.Context, c *vaultapi.Client) (*vaultapi.Secret, error) {
			return c.Logical().WriteWithContext(ctx, path.Join("auth", mount, "login"), map[string]any{"role": a.Role, "jwt": jwt})
		},
	}, nil
}

// loginKey is a digest of parts: a cache key that holds no credential.
func loginKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// newLogins is the SecretMirrors' login cache, the Relogin policy: a login
// is kept until 2/3 of its TTL, then logged in again; nothing is renewed
// or revoked.
func newLogins() *vaultlogin.Cache {
	return vaultlogin.New(vaultlogin.Config{Policy: vaultlogin.Relogin})
}

// vaultToken returns a Vault token for l: the static one, the cached
// login's while it is not due, or a new login.
func (v *vaultReader) vaultToken(ctx context.Context, c *vaultapi.Client, l *vaultLogin) (string, error) {
	if l.login == nil {
		return l.token, nil
	}
	s, err := v.logins.Get(l.key, vaultlogin.Identity{Role: l.role}).Session(ctx, c,
		func(ctx context.Context, c *vaultapi.Client) (*vaultapi.Secret, error) {
			s, err := l.login(ctx, c)
			if err != nil {
				return nil, vaultError("log in to", "", l.role, err)
			}
			return s, nil
		})
	switch {
	case errors.Is(err, vaultlogin.ErrNoToken):
		return "", fmt.Errorf("log in as %s: Vault answered without a token", l.role)
	case err != nil:
		return "", err
	}
	return s.Token(), nil
}

// forgetLogin drops l's cached token (Vault refused it).
func (v *vaultReader) forgetLogin(l *vaultLogin) {
	v.logins.Forget(l.key)
}
