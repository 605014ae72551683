// Package satokentest is a service account issuer for tests: it signs
// tokens as kube-apiserver does (RS256, a key ID, the kubernetes.io claim
// of a pod-bound token) and serves its discovery document, its keys and
// TokenReviews, as a satoken.APIServer or over HTTP, counting what it
// answers. It also forges the tokens an attacker would try.
package satokentest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
)

// Issuer signs service account tokens and serves its keys.
type Issuer struct {
	// URL is the issuer (the iss claim and discovery's issuer).
	URL   string
	KeyID string
	key   crypto.Signer // *rsa.PrivateKey or *ecdsa.PrivateKey

	// DiscoveryDown, when set, fails discovery and JWKS reads (a cluster
	// where discovery is disabled or forbidden).
	DiscoveryDown atomic.Bool
	// ReviewDown, when set, fails TokenReviews.
	ReviewDown atomic.Bool

	discoveryReads, jwksReads, reviews atomic.Int64
}

// New returns an issuer named url with a new 2048-bit RSA key.
func New(tb testing.TB, url string) *Issuer {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	kid := base64.RawURLEncoding.EncodeToString(der[len(der)-12:])
	return &Issuer{URL: url, KeyID: kid, key: key}
}

// WithKey returns an issuer named url that signs with key under key ID
// kid: a real cluster's signing key, to sign tokens its TokenRequest API
// will not mint (expired, not yet valid).
func WithKey(url, kid string, key crypto.Signer) *Issuer {
	return &Issuer{URL: url, KeyID: kid, key: key}
}

// alg is the JWS algorithm of the issuer's key, as kube-apiserver picks
// it: RS256 for RSA, ES256/384/512 by the curve of an ECDSA key.
func (i *Issuer) alg() jose.SignatureAlgorithm {
	if k, ok := i.key.(*ecdsa.PrivateKey); ok {
		switch k.Curve.Params().BitSize {
		case 384:
			return jose.ES384
		case 521:
			return jose.ES512
		default:
			return jose.ES256
		}
	}
	return jose.RS256
}

// Token is what a token says. Zero times default to now (iat, nbf) and
// an hour from now (exp); an empty Issuer to the issuer's URL.
type Token struct {
	Issuer                    string
	Audiences                 []string
	Namespace, ServiceAccount string
	// PodName and PodUID bind the token to a pod when PodName is set.
	PodName, PodUID string
	// Subject, when set, replaces system:serviceaccount:<ns>:<sa>.
	Subject                     string
	IssuedAt, NotBefore, Expiry time.Time
}

// Claims returns the JWT claims of t, as kube-apiserver writes them.
func (i *Issuer) Claims(t Token) map[string]any {
	now := time.Now()
	if t.IssuedAt.IsZero() {
		t.IssuedAt = now
	}
	if t.NotBefore.IsZero() {
		t.NotBefore = t.IssuedAt
	}
	if t.Expiry.IsZero() {
		t.Expiry = now.Add(time.Hour)
	}
	if t.Issuer == "" {
		t.Issuer = i.URL
	}
	if t.Subject == "" {
		t.Subject = "system:serviceaccount:" + t.Namespace + ":" + t.ServiceAccount
	}
	k8s := map[string]any{
		"namespace":      t.Namespace,
		"serviceaccount": map[string]string{"name": t.ServiceAccount, "uid": "sa-uid-" + t.ServiceAccount},
	}
	if t.PodName != "" {
		k8s["pod"] = map[string]string{"name": t.PodName, "uid": t.PodUID}
	}
	return map[string]any{
		"iss": t.Issuer, "aud": t.Audiences, "sub": t.Subject,
		"iat": t.IssuedAt.Unix(), "nbf": t.NotBefore.Unix(), "exp": t.Expiry.Unix(),
		"jti":           fmt.Sprintf("%d", now.UnixNano()),
		"kubernetes.io": k8s,
	}
}

// Sign returns t signed with the issuer's key.
func (i *Issuer) Sign(tb testing.TB, t Token) string {
	tb.Helper()
	return i.SignClaims(tb, i.Claims(t))
}

// SignClaims returns claims signed with the issuer's key (RS256, its key
// ID), as kube-apiserver signs.
func (i *Issuer) SignClaims(tb testing.TB, claims any) string {
	tb.Helper()
	return i.SignAs(tb, i.KeyID, claims)
}

// SignAs returns claims signed with the issuer's key under key ID kid (a
// forgery when kid is another issuer's).
func (i *Issuer) SignAs(tb testing.TB, kid string, claims any) string {
	tb.Helper()
	return sign(tb, jose.SigningKey{Algorithm: i.alg(), Key: i.key}, kid, claims)
}

// Unsigned returns claims as a JWT of algorithm "none", naming the
// issuer's key ID.
func (i *Issuer) Unsigned(tb testing.TB, claims any) string {
	tb.Helper()
	return compact(tb, map[string]string{"alg": "none", "typ": "JWT", "kid": i.KeyID}, claims, "")
}

// HMAC returns claims signed HS256 with the issuer's public key as the
// secret (the algorithm confusion attack), naming the issuer's key ID.
func (i *Issuer) HMAC(tb testing.TB, claims any) string {
	tb.Helper()
	der, err := x509.MarshalPKIXPublicKey(i.key.Public())
	if err != nil {
		tb.Fatal(err)
	}
	if k, ok := i.key.(*rsa.PrivateKey); ok {
		der = x509.MarshalPKCS1PublicKey(&k.PublicKey)
	}
	return sign(tb, jose.SigningKey{Algorithm: jose.HS256, Key: der}, i.KeyID, claims)
}

// sign returns claims as a JWT signed with key, naming key ID kid.
func sign(tb testing.TB, key jose.SigningKey, kid string, claims any) string {
	tb.Helper()
	signer, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// compact builds header.payload.signature from JSON of header and claims.
func compact(tb testing.TB, header, claims any, sig string) string {
	tb.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		tb.Fatal(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(h) + "." + enc.EncodeToString(c) + "." + sig
}

// Discovery is the issuer's OpenID configuration document.
func (i *Issuer) Discovery() []byte {
	b, _ := json.Marshal(map[string]any{
		"issuer": i.URL, "jwks_uri": i.URL + "/openid/v1/jwks",
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{string(i.alg())},
	})
	return b
}

// JWKS is the issuer's public key set.
func (i *Issuer) JWKS() []byte {
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: i.key.Public(), KeyID: i.KeyID, Algorithm: string(i.alg()), Use: "sig",
	}}})
	return b
}

// ErrDown is what a read of a service that is down fails with.
var ErrDown = errors.New("satokentest: down")

// GetRaw serves DiscoveryPath and JWKSPath (satoken.APIServer).
func (i *Issuer) GetRaw(_ context.Context, path string) ([]byte, error) {
	if i.DiscoveryDown.Load() {
		return nil, ErrDown
	}
	switch path {
	case "/.well-known/openid-configuration":
		i.discoveryReads.Add(1)
		return i.Discovery(), nil
	case "/openid/v1/jwks":
		i.jwksReads.Add(1)
		return i.JWKS(), nil
	}
	return nil, fmt.Errorf("satokentest: no %s", path)
}

// ReviewToken answers a TokenReview as kube-apiserver does for its own
// tokens (satoken.APIServer).
func (i *Issuer) ReviewToken(_ context.Context, token string, audiences []string) (*authenticationv1.TokenReviewStatus, error) {
	if i.ReviewDown.Load() {
		return nil, ErrDown
	}
	i.reviews.Add(1)
	return i.Review(token, audiences), nil
}

// Review checks token's signature, issuer, expiry and audiences.
func (i *Issuer) Review(token string, audiences []string) *authenticationv1.TokenReviewStatus {
	refuse := &authenticationv1.TokenReviewStatus{Error: "[invalid bearer token, token lookup failed]"}
	t, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{i.alg()})
	if err != nil {
		return refuse
	}
	var c jwt.Claims
	var k struct {
		K8s struct {
			Pod *struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
	}
	if err := t.Claims(i.key.Public(), &c, &k); err != nil || c.Issuer != i.URL {
		return refuse
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Time: time.Now()}, 0); err != nil {
		return refuse
	}
	var matched []string
	for _, a := range audiences {
		if slices.Contains(c.Audience, a) {
			matched = append(matched, a)
		}
	}
	if len(matched) == 0 {
		return &authenticationv1.TokenReviewStatus{Error: "token audiences is invalid for the target audiences"}
	}
	st := &authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: matched,
		User: authenticationv1.UserInfo{Username: c.Subject, Extra: map[string]authenticationv1.ExtraValue{}}}
	if p := k.K8s.Pod; p != nil {
		st.User.Extra["authentication.kubernetes.io/pod-name"] = authenticationv1.ExtraValue{p.Name}
		st.User.Extra["authentication.kubernetes.io/pod-uid"] = authenticationv1.ExtraValue{p.UID}
	}
	return st
}

// Reads is how many discovery and JWKS reads the issuer answered.
func (i *Issuer) Reads() int64 { return i.discoveryReads.Load() + i.jwksReads.Load() }

// Reviews is how many TokenReviews the issuer answered.
func (i *Issuer) Reviews() int64 { return i.reviews.Load() }

// PublicKey is the issuer's public key.
func (i *Issuer) PublicKey() crypto.PublicKey { return i.key.Public() }
