package kubeclient_test

import (
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/internal/satoken/satokentest"
	"github.com/keymount/keymount/provider/aws/kubeclient"
)

var _ satoken.APIServer = (*kubeclient.Client)(nil)

// TestTokenProofRequests: the client reads the issuer's discovery document
// and keys, and creates TokenReviews, as kube-apiserver serves them; a
// forbidden read is client-go's Forbidden.
func TestTokenProofRequests(t *testing.T) {
	iss := satokentest.New(t, "https://kubernetes.default.svc.cluster.local")
	srv := httptest.NewServer(iss)
	t.Cleanup(srv.Close)
	c, err := kubeclient.ForConfig(&rest.Config{Host: srv.URL}, kubeclient.DefaultQPS, kubeclient.DefaultBurst)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{satoken.DiscoveryPath, satoken.JWKSPath} {
		body, err := c.GetRaw(t.Context(), path)
		if err != nil || len(body) == 0 {
			t.Errorf("GET %s: %d bytes, %v", path, len(body), err)
		}
	}
	tok := iss.Sign(t, satokentest.Token{Audiences: []string{"sts.amazonaws.com"}, Namespace: "shop", ServiceAccount: "app",
		PodName: "web", PodUID: "uid-web"})
	st, err := c.ReviewToken(t.Context(), tok, []string{"sts.amazonaws.com"})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Authenticated || st.User.Username != "system:serviceaccount:shop:app" ||
		len(st.User.Extra["authentication.kubernetes.io/pod-uid"]) != 1 {
		t.Errorf("TokenReview status %+v", st)
	}
	if st, err := c.ReviewToken(t.Context(), "garbage", []string{"sts.amazonaws.com"}); err != nil || st.Authenticated {
		t.Errorf("TokenReview of garbage: %+v, %v", st, err)
	}
	iss.DiscoveryDown.Store(true)
	if _, err := c.GetRaw(t.Context(), satoken.JWKSPath); !apierrors.IsForbidden(err) {
		t.Errorf("forbidden keys: %v, want Forbidden", err)
	}
}
