package tokens

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/utils/ptr"
)

func decode(t *testing.T, s string) tokenSet {
	t.Helper()
	var out tokenSet
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("the tokens attribute is not JSON: %v", err)
	}
	return out
}

// TestTokensFormat: the attribute is kubelet's JSON, one TokenRequest per
// audience with 600 s and no binding, the empty audience asking for the
// API server's default.
func TestTokensFormat(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	got, err := m.Tokens(t.Context(), "team-a", "app", []string{"vault", "", "vault"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"":{"token":"secret-token-team-a-app-default-1","expirationTimestamp":"2026-11-26T12:10:00Z"},` +
		`"vault":{"token":"secret-token-team-a-app-vault-0","expirationTimestamp":"2026-11-26T12:10:00Z"}}`
	if got != want {
		t.Errorf("Tokens =\n%s\nwant\n%s", got, want)
	}
	wantCalls := []tokenCall{
		{namespace: "team-a", name: "app", token: "secret-token-team-a-app-vault-0",
			spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}, ExpirationSeconds: ptr.To[int64](600)}},
		{namespace: "team-a", name: "app", token: "secret-token-team-a-app-default-1",
			spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}},
	}
	if d := cmp.Diff(wantCalls, api.calls(), cmp.AllowUnexported(tokenCall{})); d != "" {
		t.Errorf("TokenRequests (-want +got):\n%s", d)
	}
}

func TestTokensWithoutAudiences(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	got, err := m.Tokens(t.Context(), "team-a", "app", nil)
	if err != nil || got != "" {
		t.Errorf("Tokens without audiences = %q, %v; want \"\", nil (no attribute, as kubelet)", got, err)
	}
	if n := api.count(); n != 0 {
		t.Errorf("%d TokenRequests, want 0", n)
	}
	if _, err := m.Tokens(t.Context(), "", "app", []string{"a"}); err == nil {
		t.Error("Tokens with an empty namespace: no error")
	}
}

func TestConfig(t *testing.T) {
	cs, api := newTokenAPI(t)
	ref := &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: "n1", UID: "u1"}
	m := newManager(t, cs, api, Config{ExpirationSeconds: 3600, BoundObjectRef: ref})
	got, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"})
	if err != nil {
		t.Fatal(err)
	}
	if exp := decode(t, got)["aud"].ExpirationTimestamp.Time; !exp.Equal(t0.Add(time.Hour)) {
		t.Errorf("expiration %v, want %v", exp, t0.Add(time.Hour))
	}
	c := api.calls()[0]
	if *c.spec.ExpirationSeconds != 3600 || !cmp.Equal(c.spec.BoundObjectRef, ref) {
		t.Errorf("request spec %+v, want 3600 s bound to %+v", c.spec, ref)
	}
	for _, bad := range []Config{{ExpirationSeconds: 599}, {RenewFraction: 1}, {RenewFraction: -0.1}} {
		if _, err := NewManager(cs.CoreV1(), bad); err == nil {
			t.Errorf("NewManager(%+v): no error", bad)
		}
	}
	if _, err := NewManager(nil, Config{}); err == nil {
		t.Error("NewManager(nil client): no error")
	}
}

// TestRenewal: a token is reused until less than 20 % of its lifetime
// remains, then renewed.
func TestRenewal(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	first, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"})
	if err != nil {
		t.Fatal(err)
	}
	api.clk.Step(479 * time.Second) // 121 s of 600 left: more than 20 %
	again, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"})
	if err != nil {
		t.Fatal(err)
	}
	if again != first || api.count() != 1 {
		t.Errorf("at 80%% - 1 s: %d requests, token changed %v; want 1 request, the same token", api.count(), again != first)
	}
	api.clk.Step(2 * time.Second) // 119 s left
	renewed, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"})
	if err != nil {
		t.Fatal(err)
	}
	if renewed == first || api.count() != 2 {
		t.Fatalf("at 80%% + 1 s: %d requests, token changed %v; want 2 requests, a new token", api.count(), renewed != first)
	}
	if exp := decode(t, renewed)["aud"].ExpirationTimestamp.Time; !exp.Equal(api.clk.Now().Add(10 * time.Minute)) {
		t.Errorf("renewed token expires %v, want 10 min from now", exp)
	}
}

func TestRenewFraction(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{RenewFraction: 0.5})
	for _, step := range []time.Duration{0, 299 * time.Second, 2 * time.Second} {
		api.clk.Step(step)
		if _, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := api.count(); n != 2 {
		t.Errorf("%d requests, want 2 (renewed past half its lifetime)", n)
	}
}

// TestRenewalFailure: while renewal fails, the current token serves until
// it expires; then the error comes through, without the token.
func TestRenewalFailure(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	first, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"})
	if err != nil {
		t.Fatal(err)
	}
	tok := decode(t, first)["aud"].Token
	api.setFail(errForbidden())
	api.clk.Step(9 * time.Minute)
	got, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"})
	if err != nil || got != first {
		t.Fatalf("renewal failing before expiry: %v; want the current token", err)
	}
	api.clk.Step(time.Minute)
	got, err = m.Tokens(t.Context(), "ns", "sa", []string{"aud"})
	if err == nil || got != "" {
		t.Fatalf("renewal failing after expiry = %q, %v; want an error", got, err)
	}
	if strings.Contains(err.Error(), tok) {
		t.Errorf("error %q holds the token", err)
	}
	if n := api.count(); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	api.setFail(nil)
	if _, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"}); err != nil {
		t.Errorf("after the API server recovers: %v", err)
	}
}
