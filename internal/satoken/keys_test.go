package satoken_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/internal/satoken/satokentest"
)

// TestKeysReadOnce: a thousand proofs, a hundred at once, read discovery
// and the keys once (two API requests), then none.
func TestKeysReadOnce(t *testing.T) {
	r := newRig(t)
	tok := r.iss.Sign(t, legit())
	for range 10 {
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				if _, err := r.v.Verify(t.Context(), tok, request()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	if got := r.iss.Reads(); got != 2 {
		t.Errorf("%d API reads for 1000 proofs, want 2 (discovery and keys, once)", got)
	}
	if got := r.iss.Reviews(); got != 0 {
		t.Errorf("%d TokenReviews with discovery up, want 0", got)
	}
}

// TestUnknownKeyIDRefetchRateLimited: tokens of unknown key IDs read the
// keys again at most once per MinRefetchInterval, however many arrive.
func TestUnknownKeyIDRefetchRateLimited(t *testing.T) {
	r := newRig(t)
	if _, err := r.v.Verify(t.Context(), r.iss.Sign(t, legit()), request()); err != nil {
		t.Fatal(err)
	}
	garbage := r.foreign.Sign(t, legit())
	r.clk.Step(satoken.DefaultMinRefetchInterval)
	for range 200 {
		if _, err := r.v.Verify(t.Context(), garbage, request()); !errors.Is(err, satoken.ErrDenied) {
			t.Fatalf("unknown key ID: %v", err)
		}
	}
	if got := r.iss.Reads(); got != 4 {
		t.Errorf("%d API reads after 200 unknown key IDs, want 4 (the first read and one more)", got)
	}
	r.clk.Step(satoken.DefaultMinRefetchInterval)
	for range 200 {
		_, _ = r.v.Verify(t.Context(), garbage, request())
	}
	if got := r.iss.Reads(); got != 6 {
		t.Errorf("%d API reads one interval later, want 6", got)
	}
}

// TestKeyRotation: a token signed with a key the API server added since
// the keys were read is proven after one read.
func TestKeyRotation(t *testing.T) {
	r := newRig(t)
	api := &switchingAPI{Issuer: r.iss}
	v, err := satoken.New(satoken.Config{Clock: r.clk}, api)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(t.Context(), r.iss.Sign(t, legit()), request()); err != nil {
		t.Fatal(err)
	}
	rotated := satokentest.New(t, issuerURL)
	api.set(rotated)
	r.clk.Step(satoken.DefaultMinRefetchInterval)
	if _, err := v.Verify(t.Context(), rotated.Sign(t, legit()), request()); err != nil {
		t.Errorf("token of the new key: %v", err)
	}
	if _, err := v.Verify(t.Context(), r.iss.Sign(t, legit()), request()); !errors.Is(err, satoken.ErrDenied) {
		t.Errorf("token of the key the API server dropped: %v", err)
	}
}

// switchingAPI serves one issuer's keys, then another's.
type switchingAPI struct {
	mu sync.Mutex
	*satokentest.Issuer
}

func (s *switchingAPI) set(i *satokentest.Issuer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Issuer = i
}

// TestKeysMaxAge: keys older than KeysMaxAge are read again once.
func TestKeysMaxAge(t *testing.T) {
	r := newRig(t)
	tok := r.iss.Sign(t, legit())
	if _, err := r.v.Verify(t.Context(), tok, request()); err != nil {
		t.Fatal(err)
	}
	r.clk.Step(satoken.DefaultKeysMaxAge)
	for range 10 {
		if _, err := r.v.Verify(t.Context(), r.iss.Sign(t, legit()), request()); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.iss.Reads(); got != 4 {
		t.Errorf("%d API reads, want 4 (read, then read again once after KeysMaxAge)", got)
	}
}

// TestReviewFallbackCached: without discovery, a token is proven by one
// TokenReview and its answer serves until discovery is tried again;
// refusals are remembered too. Discovery back, keys replace reviews.
func TestReviewFallbackCached(t *testing.T) {
	r := newRig(t)
	r.iss.DiscoveryDown.Store(true)
	tok := r.iss.Sign(t, legit())
	forged := r.foreign.Sign(t, legit())
	for range 50 {
		if _, err := r.v.Verify(t.Context(), tok, request()); err != nil {
			t.Fatal(err)
		}
		if _, err := r.v.Verify(t.Context(), forged, request()); !errors.Is(err, satoken.ErrDenied) {
			t.Fatalf("foreign token: %v", err)
		}
	}
	if got := r.iss.Reviews(); got != 2 {
		t.Errorf("%d TokenReviews for 100 proofs of 2 tokens, want 2", got)
	}
	// The cached answer still checks the request.
	other := request()
	other.PodName = "web-2"
	if _, err := r.v.Verify(t.Context(), tok, other); !errors.Is(err, satoken.ErrDenied) {
		t.Errorf("cached TokenReview answer for another pod: %v", err)
	}
	r.iss.DiscoveryDown.Store(false)
	r.clk.Step(satoken.DefaultDiscoveryRetry)
	fresh := r.iss.Sign(t, legit())
	if _, err := r.v.Verify(t.Context(), fresh, request()); err != nil {
		t.Fatal(err)
	}
	if got := r.iss.Reviews(); got != 2 {
		t.Errorf("%d TokenReviews after discovery came back, want still 2", got)
	}
	if got := r.iss.Reads(); got != 2 {
		t.Errorf("%d discovery reads, want 2", got)
	}
}

// TestNothingReachable: with neither discovery nor TokenReviews, a token
// is unverifiable (Unavailable), not refused.
func TestNothingReachable(t *testing.T) {
	r := newRig(t)
	r.iss.DiscoveryDown.Store(true)
	r.iss.ReviewDown.Store(true)
	_, err := r.v.Verify(t.Context(), r.iss.Sign(t, legit()), request())
	if !errors.Is(err, satoken.ErrUnavailable) || errors.Is(err, satoken.ErrDenied) {
		t.Errorf("Verify = %v, want ErrUnavailable", err)
	}
}

// TestDiscoveryFailureKeepsKeys: keys read before still prove tokens when
// a later read fails.
func TestDiscoveryFailureKeepsKeys(t *testing.T) {
	r := newRig(t)
	if _, err := r.v.Verify(t.Context(), r.iss.Sign(t, legit()), request()); err != nil {
		t.Fatal(err)
	}
	r.iss.DiscoveryDown.Store(true)
	r.clk.Step(satoken.DefaultKeysMaxAge + time.Second)
	if _, err := r.v.Verify(t.Context(), r.iss.Sign(t, legit()), request()); err != nil {
		t.Errorf("after a failed re-read: %v", err)
	}
	if got := r.iss.Reviews(); got != 0 {
		t.Errorf("%d TokenReviews, want 0", got)
	}
}
