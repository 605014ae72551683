package tokens

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func errForbidden() error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "sa", errors.New("denied by policy"))
}

// TestSingleflight: concurrent callers for one key share one TokenRequest.
func TestSingleflight(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	entered, release := api.holdRequests()
	t.Cleanup(release)
	const callers = 20
	results := make(chan string, callers)
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			got, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"})
			errs <- err
			results <- got
		})
	}
	<-entered // one request reached the API server and waits there
	release()
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var first string
	for got := range results {
		if first == "" {
			first = got
		}
		if got != first {
			t.Errorf("callers got different tokens")
		}
	}
	if n := api.count(); n != 1 {
		t.Errorf("%d TokenRequests for %d concurrent callers, want 1", n, callers)
	}
}

// TestLateJoinerGetsTheStoredToken: a caller that saw no token, then
// started a flight after another flight had stored one (the window between
// its look at the slot and its joining), gets that token: no second
// TokenRequest.
func TestLateJoinerGetsTheStoredToken(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	first, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"})
	if err != nil {
		t.Fatal(err)
	}
	k := key{"ns", "sa", "aud"}
	m.mu.Lock()
	s := m.slots[k]
	m.mu.Unlock()
	// What the late caller's flight runs: the slot it looked at now holds
	// a fresh token.
	st, err := m.request(t.Context(), k, s)
	if err != nil {
		t.Fatal(err)
	}
	if n := api.count(); n != 1 {
		t.Errorf("%d TokenRequests, want 1: the late flight asked again", n)
	}
	if !strings.Contains(first, st.Token) {
		t.Errorf("the late flight got another token than the stored one")
	}
}

// TestCallerCancelDoesNotAbortOthers: the caller that started a request
// gives up; another caller waiting for the same request still gets it.
func TestCallerCancelDoesNotAbortOthers(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	entered, release := api.holdRequests()
	t.Cleanup(release)
	ctx, cancel := context.WithCancel(t.Context())
	firstErr := make(chan error, 1)
	go func() {
		_, err := m.Tokens(ctx, "ns", "sa", []string{"aud"})
		firstErr <- err
	}()
	<-entered
	second := make(chan error, 1)
	go func() {
		_, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"})
		second <- err
	}()
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Errorf("canceled caller: %v, want context.Canceled", err)
	}
	release()
	if err := <-second; err != nil {
		t.Errorf("other caller: %v, want the token", err)
	}
	if n := api.count(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	if _, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"}); err != nil || api.count() != 1 {
		t.Errorf("the token of the shared request is not cached: %v, %d requests", err, api.count())
	}
}

// TestForgetDuringRequest: a token asked for before its service account is
// forgotten is not cached after it.
func TestForgetDuringRequest(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	entered, release := api.holdRequests()
	t.Cleanup(release)
	done := make(chan error, 1)
	go func() {
		_, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"})
		done <- err
	}()
	<-entered
	m.forgetServiceAccount("ns", "sa")
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"}); err != nil {
		t.Fatal(err)
	}
	if n := api.count(); n != 2 {
		t.Errorf("%d requests, want 2 (the one under way when forgotten is not reused)", n)
	}
}

// TestEviction: the cache keeps only live keys.
func TestEviction(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	ctx := t.Context()
	for _, k := range []key{{"ns1", "a", "x"}, {"ns1", "a", "y"}, {"ns1", "b", "x"}, {"ns2", "a", "x"}} {
		if _, err := m.Tokens(ctx, k.namespace, k.serviceAccount, []string{k.audience}); err != nil {
			t.Fatal(err)
		}
	}
	m.forgetServiceAccount("ns1", "a")
	if n := m.entries(); n != 2 {
		t.Errorf("after forgetServiceAccount: %d entries, want 2", n)
	}
	m.forgetServiceAccount("ns1", "b")
	if n := m.entries(); n != 1 {
		t.Errorf("after forgetServiceAccount of ns1's other one: %d entries, want 1", n)
	}

	// NotFound: the service account or its namespace is gone.
	m.forgetServiceAccount("ns2", "a")
	api.setFail(apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, "a"))
	_, err := m.Tokens(ctx, "ns2", "a", []string{"x"})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Tokens for a deleted service account: %v, want NotFound", err)
	}
	if n := m.entries(); n != 0 {
		t.Errorf("after NotFound: %d entries, want 0", n)
	}
	api.setFail(errForbidden())
	if _, err := m.Tokens(ctx, "ns3", "a", []string{"x"}); !apierrors.IsForbidden(err) {
		t.Errorf("Tokens refused: %v, want Forbidden", err)
	}
	if n := m.entries(); n != 0 {
		t.Errorf("after a failed first request: %d entries, want 0", n)
	}
}

// TestPrune: expired tokens are dropped, by prune and lazily by Tokens.
func TestPrune(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	ctx := t.Context()
	for _, sa := range []string{"a", "b", "c"} {
		if _, err := m.Tokens(ctx, "ns", sa, []string{"x"}); err != nil {
			t.Fatal(err)
		}
	}
	api.clk.Step(5 * time.Minute)
	if _, err := m.Tokens(ctx, "ns", "d", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if n := m.prune(); n != 4 {
		t.Errorf("prune before any expiry left %d entries, want 4", n)
	}
	api.clk.Step(6 * time.Minute) // a, b, c expired; d has 4 minutes left
	if _, err := m.Tokens(ctx, "ns", "e", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if n := m.entries(); n != 2 {
		t.Errorf("Tokens a minute after the last prune left %d entries, want 2 (d, e)", n)
	}
	api.clk.Step(10 * time.Minute)
	if n := m.prune(); n != 0 {
		t.Errorf("prune after every expiry left %d entries, want 0", n)
	}
}

// TestDeletedServiceAccountDuringRenewal: a renewal answered NotFound does
// not fall back to the current token: the service account is gone.
func TestDeletedServiceAccountDuringRenewal(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	if _, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"}); err != nil {
		t.Fatal(err)
	}
	api.clk.Step(9 * time.Minute)
	api.setFail(apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, "sa"))
	if got, err := m.Tokens(t.Context(), "ns", "sa", []string{"aud"}); !apierrors.IsNotFound(err) || got != "" {
		t.Errorf("renewal for a deleted service account = %q, %v; want NotFound", got, err)
	}
	if n := m.entries(); n != 0 {
		t.Errorf("%d entries, want 0", n)
	}
}

// TestCacheDoesNotGrow: service accounts come and go over an hour; the
// cache holds only the tokens of the last ten minutes.
func TestCacheDoesNotGrow(t *testing.T) {
	cs, api := newTokenAPI(t)
	m := newManager(t, cs, api, Config{})
	const perRound = 200
	for round := range 6 {
		for i := range perRound {
			sa := "sa-" + strconv.Itoa(round) + "-" + strconv.Itoa(i)
			if _, err := m.Tokens(t.Context(), "ns", sa, []string{"aud"}); err != nil {
				t.Fatal(err)
			}
		}
		if n := m.entries(); n > perRound {
			t.Fatalf("round %d: %d entries, want at most %d", round, n, perRound)
		}
		api.clk.Step(11 * time.Minute)
	}
}
