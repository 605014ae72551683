package satoken_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/internal/satoken/satokentest"
)

const (
	issuerURL = "https://kubernetes.default.svc.cluster.local"
	audience  = "sts.amazonaws.com"
)

// request is what the mount request says: pod web (uid-web) of service
// account shop/app.
func request() satoken.Expect {
	return satoken.Expect{Audience: audience, Namespace: "shop", ServiceAccount: "app", PodName: "web", PodUID: "uid-web"}
}

// legit is the token kubelet hands for request().
func legit() satokentest.Token {
	return satokentest.Token{Audiences: []string{audience}, Namespace: "shop", ServiceAccount: "app", PodName: "web", PodUID: "uid-web"}
}

// rig is a verifier reading iss through a fake clock.
type rig struct {
	iss, foreign *satokentest.Issuer
	clk          *clocktesting.FakeClock
	v            *satoken.Verifier
}

func newRig(t testing.TB) *rig {
	t.Helper()
	r := &rig{
		iss: satokentest.New(t, issuerURL), foreign: satokentest.New(t, "https://evil.example"),
		clk: clocktesting.NewFakeClock(time.Now()),
	}
	r.v = r.verifier(t)
	return r
}

func (r *rig) verifier(t testing.TB) *satoken.Verifier {
	t.Helper()
	v, err := satoken.New(satoken.Config{Clock: r.clk}, r.iss)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// badToken is one token an attacker may present with request().
type badToken struct {
	name  string
	token func(t testing.TB, r *rig) string
	is    error
}

func signed(mod func(*satokentest.Token)) func(testing.TB, *rig) string {
	return func(t testing.TB, r *rig) string {
		tok := legit()
		mod(&tok)
		return r.iss.Sign(t, tok)
	}
}

// badTokens are the tokens of issue 18 point 1, and a few more.
var badTokens = []badToken{
	{"no token", func(testing.TB, *rig) string { return "" }, satoken.ErrNoToken},
	{"garbage", func(testing.TB, *rig) string { return "fake-web-identity-token" }, satoken.ErrDenied},
	{"garbage in JWT shape", func(testing.TB, *rig) string { return "eyJhbGciOiJSUzI1NiJ9.e30.AAAA" }, satoken.ErrDenied},
	{"expired", signed(func(t *satokentest.Token) {
		t.IssuedAt, t.Expiry = time.Now().Add(-3*time.Hour), time.Now().Add(-2*time.Hour)
	}), satoken.ErrDenied},
	{"not yet valid", signed(func(t *satokentest.Token) { t.NotBefore = time.Now().Add(time.Hour) }), satoken.ErrDenied},
	{"issued in the future", signed(func(t *satokentest.Token) {
		t.IssuedAt, t.Expiry = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	}), satoken.ErrDenied},
	{"wrong audience", signed(func(t *satokentest.Token) { t.Audiences = []string{"vault"} }), satoken.ErrDenied},
	{"other service account", signed(func(t *satokentest.Token) { t.ServiceAccount = "other" }), satoken.ErrDenied},
	{"other namespace", signed(func(t *satokentest.Token) { t.Namespace = "other" }), satoken.ErrDenied},
	{"other pod", signed(func(t *satokentest.Token) { t.PodName, t.PodUID = "web-2", "uid-web-2" }), satoken.ErrDenied},
	{"other pod of the same name", signed(func(t *satokentest.Token) { t.PodUID = "uid-web-old" }), satoken.ErrDenied},
	{"subject of another service account", signed(func(t *satokentest.Token) {
		t.Subject = "system:serviceaccount:kube-system:admin"
	}), satoken.ErrDenied},
	{"foreign issuer", func(t testing.TB, r *rig) string { return r.foreign.Sign(t, legit()) }, satoken.ErrDenied},
	{"foreign issuer claim, cluster key", signed(func(t *satokentest.Token) { t.Issuer = "https://evil.example" }), satoken.ErrDenied},
	{"forged signature with the cluster's key ID", func(t testing.TB, r *rig) string {
		return r.foreign.SignAs(t, r.iss.KeyID, r.iss.Claims(legit()))
	}, satoken.ErrDenied},
	{"alg none", func(t testing.TB, r *rig) string { return r.iss.Unsigned(t, r.iss.Claims(legit())) }, satoken.ErrDenied},
	{"HS256 keyed with the public key", func(t testing.TB, r *rig) string { return r.iss.HMAC(t, r.iss.Claims(legit())) }, satoken.ErrDenied},
	{"claims of another identity under a legit signature", func(t testing.TB, r *rig) string {
		other := legit()
		other.ServiceAccount, other.PodName = "admin", "admin-0"
		parts := strings.Split(r.iss.Sign(t, legit()), ".")
		forged := strings.Split(r.iss.Sign(t, other), ".")
		return parts[0] + "." + forged[1] + "." + parts[2]
	}, satoken.ErrDenied},
	{"no expiry", func(t testing.TB, r *rig) string {
		c := r.iss.Claims(legit())
		delete(c, "exp")
		return r.iss.SignClaims(t, c)
	}, satoken.ErrDenied},
	{"legacy secret token", func(t testing.TB, r *rig) string {
		return r.iss.SignClaims(t, map[string]any{"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:shop:app",
			"kubernetes.io/serviceaccount/namespace": "shop", "kubernetes.io/serviceaccount/service-account.name": "app"})
	}, satoken.ErrDenied},
	{"huge", func(testing.TB, *rig) string { return strings.Repeat("a", 1<<20) }, satoken.ErrDenied},
}

// TestBadTokensRefused: every bad token is refused with its error, whether
// the keys were read (warm: a legitimate token was just proven) or not
// (cold), with discovery or with TokenReviews; the error never quotes it.
func TestBadTokensRefused(t *testing.T) {
	modes := []struct {
		name          string
		warm, reviews bool
	}{{"cold", false, false}, {"warm", true, false}, {"cold TokenReview", false, true}, {"warm TokenReview", true, true}}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			r := newRig(t)
			r.iss.DiscoveryDown.Store(m.reviews)
			for _, bt := range badTokens {
				t.Run(bt.name, func(t *testing.T) {
					v := r.verifier(t)
					if m.warm {
						if _, err := v.Verify(t.Context(), r.iss.Sign(t, legit()), request()); err != nil {
							t.Fatalf("legitimate token: %v", err)
						}
					}
					tok := bt.token(t, r)
					id, err := v.Verify(t.Context(), tok, request())
					if !errors.Is(err, bt.is) || id != nil {
						t.Fatalf("Verify = %v, %v; want %v", id, err, bt.is)
					}
					if tok != "" && strings.Contains(err.Error(), tok) {
						t.Errorf("the error quotes the token: %v", err)
					}
					t.Logf("%v", err)
				})
			}
		})
	}
}

// TestLegitTokenProves: the token kubelet hands proves its service account
// and pod, through discovery and through a TokenReview.
func TestLegitTokenProves(t *testing.T) {
	for _, reviews := range []bool{false, true} {
		r := newRig(t)
		r.iss.DiscoveryDown.Store(reviews)
		id, err := r.v.Verify(t.Context(), r.iss.Sign(t, legit()), request())
		if err != nil {
			t.Fatalf("reviews %v: %v", reviews, err)
		}
		if id.Namespace != "shop" || id.ServiceAccount != "app" || id.PodName != "web" || id.PodUID != "uid-web" ||
			id.Expiry.IsZero() {
			t.Errorf("reviews %v: identity %+v", reviews, id)
		}
		if got, want := r.iss.Reviews(), map[bool]int64{false: 0, true: 1}[reviews]; got != want {
			t.Errorf("reviews %v: %d TokenReviews, want %d", reviews, got, want)
		}
	}
}

// TestTokenNotBoundToPod: a token bound to no pod proves its service
// account, not a pod; with RequirePod it is refused.
func TestTokenNotBoundToPod(t *testing.T) {
	r := newRig(t)
	tok := legit()
	tok.PodName, tok.PodUID = "", ""
	raw := r.iss.Sign(t, tok)
	id, err := r.v.Verify(t.Context(), raw, request())
	if err != nil || id.PodName != "" || id.PodUID != "" || id.ServiceAccount != "app" {
		t.Fatalf("unbound token: %+v, %v", id, err)
	}
	want := request()
	want.RequirePod = true
	if _, err := r.v.Verify(t.Context(), raw, want); !errors.Is(err, satoken.ErrDenied) {
		t.Errorf("unbound token with RequirePod: %v, want ErrDenied", err)
	}
	if _, err := r.v.Verify(t.Context(), r.iss.Sign(t, legit()), want); err != nil {
		t.Errorf("bound token with RequirePod: %v", err)
	}
}

// TestRequestWithoutIdentityRefused: a request naming no service account
// proves nothing.
func TestRequestWithoutIdentityRefused(t *testing.T) {
	r := newRig(t)
	want := request()
	want.ServiceAccount = ""
	if _, err := r.v.Verify(t.Context(), r.iss.Sign(t, legit()), want); !errors.Is(err, satoken.ErrDenied) {
		t.Errorf("no service account in the request: %v", err)
	}
}

// TestLeeway: a minute of clock skew is allowed on exp, nbf and iat, no
// more.
func TestLeeway(t *testing.T) {
	r := newRig(t)
	now := r.clk.Now()
	within := legit()
	within.IssuedAt, within.NotBefore, within.Expiry = now.Add(30*time.Second), now.Add(30*time.Second), now.Add(-30*time.Second+time.Hour)
	if _, err := r.v.Verify(t.Context(), r.iss.Sign(t, within), request()); err != nil {
		t.Errorf("30s of skew: %v", err)
	}
	expired := legit()
	expired.IssuedAt, expired.Expiry = now.Add(-time.Hour), now.Add(-61*time.Second)
	if _, err := r.v.Verify(t.Context(), r.iss.Sign(t, expired), request()); !errors.Is(err, satoken.ErrDenied) {
		t.Errorf("expired 61s ago: %v", err)
	}
}

// TestBase64Payload: the payload the forged-claims case swaps is really
// another identity's (the test above would pass vacuously otherwise).
func TestBase64Payload(t *testing.T) {
	r := newRig(t)
	other := legit()
	other.ServiceAccount = "admin"
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(r.iss.Sign(t, other), ".")[1])
	if err != nil || !strings.Contains(string(payload), "system:serviceaccount:shop:admin") {
		t.Fatalf("payload %s, %v", payload, err)
	}
}
