package store_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
)

// recorder is an Observer that keeps what it heard.
type recorder struct {
	mu           sync.Mutex
	calls        map[string]int // service/operation/outcome
	hits, misses int
}

func (r *recorder) StoreCall(service, operation, outcome string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[strings.ToLower(service)+"/"+operation+"/"+outcome]++
}

func (r *recorder) CacheLookup(hit bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if hit {
		r.hits++
	} else {
		r.misses++
	}
}

// TestObserverHearsCallsAndCacheLookups: the observer hears every AWS
// operation once (retries included) with its outcome, ok or the AWS error
// code, and every cache lookup as a hit or a miss.
func TestObserverHearsCallsAndCacheLookups(t *testing.T) {
	fake := newFakeAWS(t)
	rec := &recorder{calls: map[string]int{}}
	clk := clocktesting.NewFakeClock(time.Now())
	s := store.New(store.Config{Endpoint: fake.url, MaxBackoff: 20 * time.Millisecond, Clock: clk, Observer: rec})
	req := request("role-a", []spec.Object{
		{Name: "s0", Type: spec.SecretsManager, FileName: "s0", Mode: 0o644},
		{Name: "s1", Type: spec.SecretsManager, FileName: "s1", Mode: 0o644},
		{Name: "p0", Type: spec.SSMParameter, FileName: "p0", Mode: 0o644},
	})
	if _, err := s.Fetch(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fetch(t.Context(), req); err != nil { // within the freshness window: from the cache
		t.Fatal(err)
	}
	rec.mu.Lock()
	want := map[string]int{"secrets manager/BatchGetSecretValue/ok": 1, "ssm/GetParameters/ok": 1}
	if len(rec.calls) != len(want) || rec.calls["secrets manager/BatchGetSecretValue/ok"] != 1 || rec.calls["ssm/GetParameters/ok"] != 1 {
		t.Errorf("calls heard %v, want %v", rec.calls, want)
	}
	if rec.misses < 3 || rec.hits < 3 {
		t.Errorf("cache lookups: %d hits, %d misses; want at least 3 of each (first fetch misses, second hits)", rec.hits, rec.misses)
	}
	rec.mu.Unlock()

	fake.fault = func(c fakeCall) (int, any) { return apiError("ThrottlingException") }
	clk.Step(store.DefaultFreshness)
	if _, err := s.Fetch(t.Context(), req); err == nil {
		t.Fatal("a throttled fetch succeeded")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.calls["secrets manager/BatchGetSecretValue/ThrottlingException"] != 1 {
		t.Errorf("calls heard %v, want one BatchGetSecretValue with outcome ThrottlingException (its retries are one operation)", rec.calls)
	}
}
