//go:build integration

package tokens_test

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/controller/tokens"
	"github.com/keymount/keymount/tests/k8senv"
)

// TestTokenRequestAgainstAPIServer: a real TokenRequest gives a token for
// the service account with the audience asked for, which the API server
// then authenticates for that audience; a deleted service account's tokens
// are evicted.
func TestTokenRequestAgainstAPIServer(t *testing.T) {
	// Own control plane: the package's only one (Shared would save nothing).
	env := k8senv.Start(t, k8senv.Options{})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tokens-test"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "app"}}
	if _, err := cs.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := tokens.NewManager(cs.CoreV1(), tokens.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const aud = "keymount-test-audience"
	before := time.Now().Truncate(time.Second) // the API server's timestamps have seconds
	attr, err := m.Tokens(ctx, ns.Name, sa.Name, []string{aud})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	var set map[string]authenticationv1.TokenRequestStatus
	if err := json.Unmarshal([]byte(attr), &set); err != nil {
		t.Fatalf("the attribute is not JSON: %v", err)
	}
	st, ok := set[aud]
	if len(set) != 1 || !ok {
		t.Fatalf("the attribute has audiences %v, want only %s", keys(set), aud)
	}
	// 600 s from when it was issued, between before and after (same clock).
	if exp := st.ExpirationTimestamp.Time; exp.Before(before.Add(600*time.Second)) || exp.After(after.Add(600*time.Second)) {
		t.Errorf("the token expires at %v, want 600 s after it was issued (between %v and %v)", exp, before, after)
	}
	claims := jwtClaims(t, st.Token)
	if !slices.Contains(claims.Aud, aud) {
		t.Errorf("token audiences %v lack %s", claims.Aud, aud)
	}
	if want := "system:serviceaccount:tokens-test:app"; claims.Sub != want {
		t.Errorf("token subject %q, want %q", claims.Sub, want)
	}

	review(t, cs, st.Token, aud)

	again, err := m.Tokens(ctx, ns.Name, sa.Name, []string{aud})
	if err != nil || again != attr {
		t.Errorf("second call: %v, same token %v; want the cached token", err, again == attr)
	}

	if err := cs.CoreV1().ServiceAccounts(ns.Name).Delete(ctx, sa.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	m.ForgetServiceAccount(ns.Name, sa.Name)
	if _, err := m.Tokens(ctx, ns.Name, sa.Name, []string{aud}); !apierrors.IsNotFound(err) {
		t.Errorf("Tokens of a deleted service account: %v, want NotFound", err)
	}
	if n := m.Entries(); n != 0 {
		t.Errorf("%d cache entries after NotFound, want 0", n)
	}
}

// review has the API server authenticate token for aud.
func review(t *testing.T, cs kubernetes.Interface, token, aud string) {
	t.Helper()
	ctx := t.Context()
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{aud}}}
	rev, err := cs.AuthenticationV1().TokenReviews().Create(ctx, tr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rev.Status.Authenticated || rev.Status.User.Username != "system:serviceaccount:tokens-test:app" ||
		!slices.Contains(rev.Status.Audiences, aud) {
		t.Errorf("TokenReview: authenticated %v as %q for %v; want the service account, audience %s",
			rev.Status.Authenticated, rev.Status.User.Username, rev.Status.Audiences, aud)
	}
}

type claims struct {
	Aud []string `json:"aud"`
	Sub string   `json:"sub"`
}

// jwtClaims reads a JWT's payload without checking it (the TokenReview
// does that).
func jwtClaims(t *testing.T, token string) claims {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("the token is not a JWS compact serialization (%d parts)", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("token payload: %v", err)
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatalf("token claims: %v", err)
	}
	return c
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
