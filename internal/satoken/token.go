package satoken

import (
	"fmt"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// SignatureAlgorithms are the algorithms a token may be signed with: the
// asymmetric ones. "none" and HMAC (whose key would be the public key) are
// refused before any key is looked at.
var SignatureAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// token is a parsed, not yet verified, token.
type token struct {
	jwt   *jwt.JSONWebToken
	keyID string
	alg   string
}

// parse reads a compact JWS signed with one of SignatureAlgorithms.
func parse(raw string) (*token, error) {
	t, err := jwt.ParseSigned(raw, SignatureAlgorithms)
	if err != nil {
		// The parser's message never quotes the token; it may name the
		// algorithm, which helps.
		return nil, fmt.Errorf("%w: not a JWT signed with an asymmetric algorithm: %w", ErrDenied, err)
	}
	if len(t.Headers) != 1 {
		return nil, fmt.Errorf("%w: %d signatures, want one", ErrDenied, len(t.Headers))
	}
	h := t.Headers[0]
	return &token{jwt: t, keyID: h.KeyID, alg: h.Algorithm}, nil
}

// claims is what a Kubernetes service account token says.
type claims struct {
	jwt.Claims
	Kubernetes *kubernetesClaims `json:"kubernetes.io,omitempty"`
}

// kubernetesClaims is the private kubernetes.io claim of a bound token.
type kubernetesClaims struct {
	Namespace      string     `json:"namespace,omitempty"`
	ServiceAccount *objectRef `json:"serviceaccount,omitempty"`
	Pod            *objectRef `json:"pod,omitempty"`
}

type objectRef struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// verify checks the signature with the key of the token's key ID (every
// key when the token names none) and returns the claims.
func (t *token) verify(keys *keySet) (*claims, error) {
	candidates := keys.byID(t.keyID)
	if len(candidates) == 0 {
		return nil, fmt.Errorf("%w: signed with key ID %q, which is not one of the cluster issuer's keys", ErrDenied, t.keyID)
	}
	var lastErr error
	for _, k := range candidates {
		var c claims
		if err := t.jwt.Claims(k.Key, &c); err != nil {
			lastErr = err
			continue
		}
		return &c, nil
	}
	return nil, fmt.Errorf("%w: the signature does not verify with the cluster issuer's key %q: %w", ErrDenied, t.keyID, lastErr)
}

// unverifiedClaims decodes the claims without checking the signature: for
// the checks made before a TokenReview (which checks the signature).
func (t *token) unverifiedClaims() (*claims, error) {
	var c claims
	if err := t.jwt.UnsafeClaimsWithoutVerification(&c); err != nil {
		return nil, fmt.Errorf("%w: claims are not a JSON object of JWT claims: %w", ErrDenied, err)
	}
	return &c, nil
}

// check compares verified (or TokenReview-proven) claims with the issuer
// and the request. issuer "" skips the issuer (a TokenReview checks it).
func (v *Verifier) check(c *claims, issuer string, want Expect) (*Identity, error) {
	if issuer != "" && c.Issuer != issuer {
		return nil, fmt.Errorf("%w: issuer %q is not the cluster's service account issuer %q", ErrDenied, c.Issuer, issuer)
	}
	if !slices.Contains(c.Audience, want.Audience) {
		return nil, fmt.Errorf("%w: audiences %q lack %q", ErrDenied, []string(c.Audience), want.Audience)
	}
	if err := v.checkTimes(c); err != nil {
		return nil, err
	}
	if want := subject(want.Namespace, want.ServiceAccount); c.Subject != want {
		return nil, fmt.Errorf("%w: subject %q is not the request's service account %q", ErrDenied, c.Subject, want)
	}
	id := &Identity{Namespace: want.Namespace, ServiceAccount: want.ServiceAccount, Expiry: c.Expiry.Time()}
	k := c.Kubernetes
	if k != nil && k.Namespace != "" && k.Namespace != want.Namespace {
		return nil, fmt.Errorf("%w: kubernetes.io namespace %q is not the request's %q", ErrDenied, k.Namespace, want.Namespace)
	}
	if k != nil && k.ServiceAccount != nil && k.ServiceAccount.Name != want.ServiceAccount {
		return nil, fmt.Errorf("%w: kubernetes.io service account %q is not the request's %q", ErrDenied, k.ServiceAccount.Name, want.ServiceAccount)
	}
	if k == nil || k.Pod == nil {
		if want.RequirePod {
			return nil, fmt.Errorf("%w: the token is bound to no pod; credentials of one pod need a pod-bound token "+
				"(kubelet's tokenRequests are)", ErrDenied)
		}
		return id, nil
	}
	if k.Pod.Name != want.PodName || k.Pod.UID != want.PodUID {
		return nil, fmt.Errorf("%w: bound to pod %s/%s (uid %s), not the request's pod %s/%s (uid %s)",
			ErrDenied, want.Namespace, k.Pod.Name, k.Pod.UID, want.Namespace, want.PodName, want.PodUID)
	}
	id.PodName, id.PodUID = k.Pod.Name, k.Pod.UID
	return id, nil
}

// checkTimes checks exp, nbf and iat against the clock, within the leeway.
func (v *Verifier) checkTimes(c *claims) error {
	now := v.cfg.Clock.Now()
	leeway := v.cfg.Leeway
	switch {
	case c.Expiry == nil:
		return fmt.Errorf("%w: no expiry (exp); legacy Secret-based tokens are not accepted", ErrDenied)
	case c.IssuedAt == nil:
		return fmt.Errorf("%w: no issue time (iat)", ErrDenied)
	case !now.Before(c.Expiry.Time().Add(leeway)):
		return fmt.Errorf("%w: expired at %s", ErrDenied, c.Expiry.Time().UTC().Format(time.RFC3339))
	case c.NotBefore != nil && now.Add(leeway).Before(c.NotBefore.Time()):
		return fmt.Errorf("%w: not valid before %s", ErrDenied, c.NotBefore.Time().UTC().Format(time.RFC3339))
	case now.Add(leeway).Before(c.IssuedAt.Time()):
		return fmt.Errorf("%w: issued in the future (%s)", ErrDenied, c.IssuedAt.Time().UTC().Format(time.RFC3339))
	case c.Expiry.Time().Before(c.IssuedAt.Time()):
		return fmt.Errorf("%w: expires before it was issued", ErrDenied)
	case c.NotBefore != nil && c.Expiry.Time().Before(c.NotBefore.Time()):
		return fmt.Errorf("%w: expires before it is valid", ErrDenied)
	}
	return nil
}
