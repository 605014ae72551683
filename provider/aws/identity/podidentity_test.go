package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
)

const (
	podToken     = "eyJhbGciOiJSUzI1NiJ9.fake-pod-identity-token.sig"
	agentKeyID   = "ASIAFAKEPODIDENTITY1"
	agentSecret  = "fake/agent/secret/access/key"
	agentSession = "fake-agent-session-token"
)

// agent is a fake EKS Pod Identity agent on 127.0.0.1.
type agent struct {
	url     string
	calls   atomic.Int64
	status  atomic.Int64 // 0: answer with credentials
	body    string       // error body; "%s" is replaced by the token
	expires time.Time
}

func newAgent(t *testing.T, expires time.Time) *agent {
	t.Helper()
	a := &agent{expires: expires}
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(srv.Close)
	a.url = srv.URL + "/v1/credentials"
	return a
}

func (a *agent) serve(w http.ResponseWriter, req *http.Request) {
	a.calls.Add(1)
	if req.Method != http.MethodGet || req.URL.Path != "/v1/credentials" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if got := req.Header.Get("Authorization"); got != podToken {
		http.Error(w, `{"code":"AccessDeniedException","message":"invalid token"}`, http.StatusUnauthorized)
		return
	}
	if st := int(a.status.Load()); st != 0 {
		w.WriteHeader(st)
		_, _ = fmt.Fprint(w, strings.ReplaceAll(a.body, "%s", req.Header.Get("Authorization")))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{
		"AccessKeyId":     agentKeyID,
		"SecretAccessKey": agentSecret,
		"Token":           agentSession,
		"AccountId":       "123456789012",
		"Expiration":      a.expires.UTC().Format(time.RFC3339),
	})
}

func podSpec(ns, sa string, addr spec.AddressType) *spec.Spec {
	return &spec.Spec{
		Namespace:      ns,
		ServiceAccount: sa,
		PodName:        "p",
		PodUID:         "uid-p",
		UsePodIdentity: true,
		AddressType:    addr,
		Tokens:         map[string]string{AudiencePodIdentity: podToken},
	}
}

func TestPodIdentityEndpoints(t *testing.T) {
	// closed is an endpoint where nothing listens.
	closedSrv := httptest.NewServer(http.NotFoundHandler())
	closed := closedSrv.URL + "/v1/credentials"
	closedSrv.Close()

	for _, tc := range []struct {
		name     string
		addr     spec.AddressType
		v4Down   bool
		v4Status int
		wantV4   int64
		wantV6   int64
		wantErr  bool
	}{
		{name: "ipv4", addr: spec.AddressIPv4, wantV4: 1},
		{name: "ipv6", addr: spec.AddressIPv6, wantV6: 1},
		{name: "auto prefers ipv4", addr: spec.AddressAuto, wantV4: 1},
		{name: "unset is auto", addr: "", wantV4: 1},
		{name: "auto falls back when ipv4 is unreachable", addr: spec.AddressAuto, v4Down: true, wantV6: 1},
		{name: "auto falls back on an ipv4 5xx", addr: spec.AddressAuto, v4Status: http.StatusServiceUnavailable,
			wantV4: 1, wantV6: 1},
		{name: "auto stops at an ipv4 4xx", addr: spec.AddressAuto, v4Status: http.StatusForbidden,
			wantV4: 1, wantErr: true},
		{name: "ipv4 only does not fall back", addr: spec.AddressIPv4, v4Down: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v4, v6 := newAgent(t, time.Now().Add(time.Hour)), newAgent(t, time.Now().Add(time.Hour))
			v4.status.Store(int64(tc.v4Status))
			cfg := Config{PodIdentityEndpointIPv4: v4.url, PodIdentityEndpointIPv6: v6.url}
			if tc.v4Down {
				cfg.PodIdentityEndpointIPv4 = closed
			}
			r := New(cfg, &fakeServiceAccounts{})
			id, err := r.For(t.Context(), podSpec("ns", "sa", tc.addr))
			if (err != nil) != tc.wantErr {
				t.Fatalf("For: err = %v, wantErr %v", err, tc.wantErr)
			}
			if v4.calls.Load() != tc.wantV4 || v6.calls.Load() != tc.wantV6 {
				t.Errorf("agent calls: ipv4 %d, ipv6 %d; want %d, %d",
					v4.calls.Load(), v6.calls.Load(), tc.wantV4, tc.wantV6)
			}
			if err != nil {
				return
			}
			creds, err := id.Credentials.Retrieve(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if creds.AccessKeyID != agentKeyID || creds.SecretAccessKey != agentSecret ||
				creds.SessionToken != agentSession || creds.AccountID != "123456789012" || !creds.CanExpire {
				t.Errorf("unexpected credentials from %v", id)
			}
			if id.Key != "podidentity:ns/sa/p/uid-p" {
				t.Errorf("Key = %q, want podidentity:ns/sa/p/uid-p", id.Key)
			}
		})
	}
}

func TestPodIdentityCache(t *testing.T) {
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	a := newAgent(t, expires)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	obs := &requestCounter{}
	r := New(Config{PodIdentityEndpointIPv4: a.url, Clock: clk, Observer: obs}, &fakeServiceAccounts{})

	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if _, err := r.For(t.Context(), podSpec("ns", "sa", spec.AddressIPv4)); err != nil {
				t.Errorf("For: %v", err)
			}
		})
	}
	wg.Wait()
	if n := a.calls.Load(); n != 1 {
		t.Errorf("agent calls after 100 concurrent mounts = %d, want 1", n)
	}
	if n := obs.get(SourcePodIdentity, false); n != 1 || obs.total() != 1 {
		t.Errorf("the Observer heard %d successful agent requests of %d, want 1 of 1", n, obs.total())
	}

	if _, err := r.For(t.Context(), podSpec("ns", "other", spec.AddressIPv4)); err != nil {
		t.Fatal(err)
	}
	if n := a.calls.Load(); n != 2 {
		t.Errorf("agent calls after another service account = %d, want 2", n)
	}

	// The agent tags credentials with the pod: another pod of the same
	// service account, or the same name recreated (a new UID), never gets
	// them from the cache.
	other := podSpec("ns", "sa", spec.AddressIPv4)
	other.PodName, other.PodUID = "q", "uid-q"
	recreated := podSpec("ns", "sa", spec.AddressIPv4)
	recreated.PodUID = "uid-p2"
	for i, s := range []*spec.Spec{other, recreated} {
		id, err := r.For(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		if n := a.calls.Load(); n != int64(3+i) {
			t.Errorf("agent calls after pod %s/%s = %d, want %d", s.PodName, s.PodUID, n, 3+i)
		}
		if id.Key == "podidentity:ns/sa/p/uid-p" {
			t.Errorf("pod %s/%s shares the key of pod p", s.PodName, s.PodUID)
		}
	}

	clk.SetTime(expires.Add(-DefaultRefresh + time.Second))
	if _, err := r.For(t.Context(), podSpec("ns", "sa", spec.AddressIPv4)); err != nil {
		t.Fatal(err)
	}
	if n := a.calls.Load(); n != 5 {
		t.Errorf("agent calls near expiry = %d, want 5", n)
	}
}

func TestPodIdentityErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		body       string
		token      string
		addr       spec.AddressType
		wantIs     error
		wantStatus int
		wantText   string
	}{
		{name: "agent refuses", status: http.StatusForbidden, token: podToken,
			body:   `{"code":"AccessDeniedException","message":"no association for %s"}`,
			wantIs: ErrAgent, wantStatus: http.StatusForbidden, wantText: "AccessDeniedException: no association"},
		{name: "agent fails", status: http.StatusInternalServerError, token: podToken, body: "boom %s",
			wantIs: ErrAgent, wantStatus: http.StatusInternalServerError, wantText: "boom <redacted>"},
		{name: "wrong token", token: "other-token",
			wantIs: ErrAgent, wantStatus: http.StatusUnauthorized, wantText: "invalid token"},
		{name: "malformed answer", status: http.StatusOK, token: podToken,
			body:   `{"AccessKeyId":"` + agentKeyID + `","SecretAccessKey":"` + agentSecret + `"`,
			wantIs: ErrAgent, wantText: "malformed"},
		{name: "answer without expiry", status: http.StatusOK, token: podToken,
			body:   `{"AccessKeyId":"` + agentKeyID + `","SecretAccessKey":"` + agentSecret + `"}`,
			wantIs: ErrAgent, wantText: "Expiration"},
		{name: "missing token", wantIs: ErrMissingToken, wantText: "tokenRequests"},
		{name: "unknown address type", token: podToken, addr: "ipx", wantIs: server.ErrInvalidParameters, wantText: "ipx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAgent(t, time.Now().Add(time.Hour))
			a.status.Store(int64(tc.status))
			a.body = tc.body
			r := New(Config{PodIdentityEndpointIPv4: a.url}, &fakeServiceAccounts{})
			s := podSpec("ns", "sa", spec.AddressIPv4)
			if tc.addr != "" {
				s.AddressType = tc.addr
			}
			s.Tokens = map[string]string{}
			if tc.token != "" {
				s.Tokens[AudiencePodIdentity] = tc.token
			}
			_, err := r.For(t.Context(), s)
			if !errors.Is(err, tc.wantIs) {
				t.Fatalf("err = %v, want %v", err, tc.wantIs)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not contain %q", err, tc.wantText)
			}
			for _, secret := range []string{podToken, "other-token", agentSecret} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error leaks a secret: %v", err)
				}
			}
			var agentErr *AgentError
			if tc.wantStatus != 0 && (!errors.As(err, &agentErr) || agentErr.StatusCode != tc.wantStatus) {
				t.Errorf("AgentError = %v, want status %d", agentErr, tc.wantStatus)
			}
		})
	}
}

// TestForget: credentials AWS refused are dropped; the next mount of the
// identity asks again.
func TestForget(t *testing.T) {
	a := newAgent(t, time.Now().Add(time.Hour))
	r := New(Config{PodIdentityEndpointIPv4: a.url}, &fakeServiceAccounts{})
	id, err := r.For(t.Context(), podSpec("ns", "sa", spec.AddressIPv4))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.For(t.Context(), podSpec("ns", "sa", spec.AddressIPv4)); err != nil || a.calls.Load() != 1 {
		t.Fatalf("second mount: %v, %d agent calls, want 1", err, a.calls.Load())
	}
	r.Forget(id.Key)
	if _, err := r.For(t.Context(), podSpec("ns", "sa", spec.AddressIPv4)); err != nil || a.calls.Load() != 2 {
		t.Errorf("after Forget: %v, %d agent calls, want 2", err, a.calls.Load())
	}
}
