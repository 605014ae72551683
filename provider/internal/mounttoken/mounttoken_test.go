package mounttoken

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/internal/satoken/satokentest"
	"github.com/keymount/keymount/provider/server"
)

var want = satoken.Expect{Audience: "vault", Namespace: "shop", ServiceAccount: "app", PodName: "web", PodUID: "uid-web"}

// TestProveRealTokens: a real verifier's answers, from a test issuer.
func TestProveRealTokens(t *testing.T) {
	iss := satokentest.New(t, "https://kubernetes.default.svc.cluster.local")
	v, err := satoken.New(satoken.Config{}, iss)
	if err != nil {
		t.Fatal(err)
	}
	good := iss.Sign(t, satokentest.Token{Audiences: []string{"vault"}, Namespace: "shop", ServiceAccount: "app", PodName: "web", PodUID: "uid-web"})
	other := iss.Sign(t, satokentest.Token{Audiences: []string{"vault"}, Namespace: "shop", ServiceAccount: "admin", PodName: "web", PodUID: "uid-web"})
	for _, tc := range []struct {
		name, token string
		code        codes.Code
		in          []string
	}{
		{"proven", good, codes.OK, nil},
		{"no token", "", codes.InvalidArgument, []string{"service account shop/app", "add {audience: vault} to the CSIDriver's spec.tokenRequests (or fix)"}},
		{"another account", other, codes.PermissionDenied, []string{"proving service account shop/app"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Prove(t.Context(), v, tc.token, want, " (or fix)")
			if got := server.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			for _, s := range tc.in {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

type verifierFunc func() error

func (f verifierFunc) Verify(context.Context, string, satoken.Expect) (*satoken.Identity, error) {
	return nil, f()
}

// TestProveVerifierFaults: the faults a test issuer cannot be made to
// produce keep their kind and the verifier's error.
func TestProveVerifierFaults(t *testing.T) {
	other := errors.New("something else")
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{satoken.ErrUnavailable, codes.Unavailable},
		{other, server.Code(other)},
	} {
		err := Prove(t.Context(), verifierFunc(func() error { return tc.err }), "t", want, "")
		if got := server.Code(err); got != tc.code || !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "proving service account shop/app") {
			t.Errorf("verifier %v: %v (code %v), want code %v wrapping it and naming shop/app", tc.err, err, got, tc.code)
		}
	}
}
