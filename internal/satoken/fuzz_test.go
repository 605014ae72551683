package satoken

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// The fuzz targets' issuer: an Ed25519 key from a fixed seed, so that its
// signatures (deterministic) in the committed corpora keep verifying.
const (
	fuzzIssuer = "https://fuzz.example"
	fuzzKeyID  = "fuzz-key"
)

// fuzzNow is the fuzz verifier's clock: the corpora's tokens are valid
// then.
var fuzzNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fuzzKey() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed([]byte("keymount-satoken-fuzz-seed-32byt"))
}

// fuzzJWKS is the key set of the fuzz issuer.
func fuzzJWKS() []byte {
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: fuzzKey().Public(), KeyID: fuzzKeyID, Algorithm: string(jose.EdDSA), Use: "sig"}}})
	return b
}

// fuzzAPI serves the fuzz issuer's keys and refuses every TokenReview.
type fuzzAPI struct{}

func (fuzzAPI) GetRaw(_ context.Context, path string) ([]byte, error) {
	if path == DiscoveryPath {
		return []byte(`{"issuer":"` + fuzzIssuer + `"}`), nil
	}
	return fuzzJWKS(), nil
}

func (fuzzAPI) ReviewToken(context.Context, string, []string) (*authenticationv1.TokenReviewStatus, error) {
	return &authenticationv1.TokenReviewStatus{}, nil
}

// fuzzExpect is the request every fuzzed token is checked against.
var fuzzExpect = Expect{Audience: "sts.amazonaws.com", Namespace: "shop", ServiceAccount: "app", PodName: "web", PodUID: "uid-web"}

// fuzzToken signs claims with the fuzz issuer's key.
func fuzzToken(tb testing.TB, claims map[string]any) string {
	tb.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: fuzzKey()},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", fuzzKeyID))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func fuzzClaims() map[string]any {
	return map[string]any{
		"iss": fuzzIssuer, "aud": []string{"sts.amazonaws.com"}, "sub": "system:serviceaccount:shop:app",
		"iat": fuzzNow.Unix(), "nbf": fuzzNow.Unix(), "exp": fuzzNow.Add(time.Hour).Unix(),
		"kubernetes.io": map[string]any{"namespace": "shop", "serviceaccount": map[string]string{"name": "app", "uid": "u"},
			"pod": map[string]string{"name": "web", "uid": "uid-web"}},
	}
}

// FuzzVerify: no token makes Verify panic; a token it accepts proves
// exactly the request's identity and is valid at the verifier's time; a
// refusal never quotes the token.
func FuzzVerify(f *testing.F) {
	f.Add(fuzzToken(f, fuzzClaims()))
	other := fuzzClaims()
	other["sub"] = "system:serviceaccount:shop:admin"
	f.Add(fuzzToken(f, other))
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")
	f.Add("a.b.c")
	f.Add("")
	v, err := New(Config{Clock: clocktesting.NewFakeClock(fuzzNow)}, fuzzAPI{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := v.Verify(t.Context(), tok, fuzzExpect)
		if err != nil {
			if !errors.Is(err, ErrDenied) && !errors.Is(err, ErrNoToken) {
				t.Fatalf("error of no sentinel: %v", err)
			}
			if len(tok) > 16 && strings.Contains(err.Error(), tok) {
				t.Fatalf("the error quotes the token: %v", err)
			}
			return
		}
		if id.Namespace != "shop" || id.ServiceAccount != "app" || (id.PodName != "" && (id.PodName != "web" || id.PodUID != "uid-web")) {
			t.Fatalf("accepted identity %+v for request %+v", id, fuzzExpect)
		}
		if !fuzzNow.Before(id.Expiry.Add(DefaultLeeway)) {
			t.Fatalf("accepted a token expired at %v", id.Expiry)
		}
	})
}

// FuzzParseKeySet: no JWKS document makes parseKeySet panic, and every
// key it returns is a valid public signature key.
func FuzzParseKeySet(f *testing.F) {
	f.Add(fuzzJWKS())
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","use":"enc"}]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		keys, err := parseKeySet(raw)
		if err != nil {
			if len(keys) != 0 {
				t.Fatalf("keys with an error: %v", err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatal("no keys and no error")
		}
		for _, k := range keys {
			if !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
				t.Fatalf("key %q: not a public signature key", k.KeyID)
			}
		}
	})
}

// FuzzParseDiscovery: no discovery document makes parseDiscovery panic,
// and it returns an issuer or an error.
func FuzzParseDiscovery(f *testing.F) {
	f.Add([]byte(`{"issuer":"https://kubernetes.default.svc.cluster.local","jwks_uri":"https://x/openid/v1/jwks"}`))
	f.Add([]byte(`{"issuer":""}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		issuer, err := parseDiscovery(doc)
		if (err == nil) == (issuer == "") {
			t.Fatalf("issuer %q, error %v", issuer, err)
		}
	})
}
