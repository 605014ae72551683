package store_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
)

// TestNoSlotHeldWhileWaitingToRetry: with one request slot, a request the
// store throttles gives the slot up while the SDK waits to retry it, so
// another identity's request is answered in between. A slot held across
// the wait would keep the other request out until every retry of the first
// had failed.
func TestNoSlotHeldWhileWaitingToRetry(t *testing.T) {
	fake := newFakeAWS(t)
	var otherServed atomic.Bool
	firstSeen := make(chan struct{})
	var once sync.Once
	fake.fault = func(c fakeCall) (int, any) {
		if slices.Contains(c.Names, "s1") {
			otherServed.Store(true)
			return 0, nil
		}
		once.Do(func() { close(firstSeen) })
		if !otherServed.Load() {
			return apiError("ThrottlingException")
		}
		return 0, nil
	}
	s := store.New(store.Config{Endpoint: fake.url, MaxParallel: 1, MaxAttempts: 5, MaxBackoff: time.Second})
	one := func(name string) []spec.Object {
		return []spec.Object{{Name: name, Type: spec.SecretsManager, FileName: name, Mode: 0o644}}
	}

	var wg sync.WaitGroup
	var errA error
	wg.Go(func() { _, errA = s.Fetch(t.Context(), request("role-a", one("s0"))) })
	<-firstSeen
	if _, err := s.Fetch(t.Context(), request("role-b", one("s1"))); err != nil {
		t.Errorf("the other identity: %v", err)
	}
	wg.Wait()
	if errA != nil {
		t.Errorf("the throttled request was not answered once the other had its turn: %v", errA)
	}
}

// TestRetryBudgetPerIdentity: an identity whose requests keep failing uses
// up its own retry budget (the SDK's retry token bucket), not another
// identity's in the same region.
func TestRetryBudgetPerIdentity(t *testing.T) {
	fake := newFakeAWS(t)
	var mu sync.Mutex
	transient := map[string]bool{} // names whose next call fails once
	fake.fault = func(c fakeCall) (int, any) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range c.Names {
			if n == "broken" {
				return apiError("500")
			}
			if transient[n] {
				delete(transient, n)
				return apiError("500")
			}
		}
		return 0, nil
	}
	failOnce := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		transient[name] = true
	}
	s := store.New(store.Config{Endpoint: fake.url, MaxAttempts: 5, MaxBackoff: time.Millisecond})
	broken := []spec.Object{{Name: "broken", Type: spec.SecretsManager, FileName: "broken", Mode: 0o644}}

	// 4 retries a request, 5 tokens a retry, 500 tokens a bucket: 25
	// requests of role-a drain its budget.
	for i := range 30 {
		if _, err := s.Fetch(t.Context(), request("role-a", broken)); err == nil {
			t.Fatalf("request %d of a broken secret succeeded", i)
		}
	}
	fetchAfterOneFault := func(identity, name string) error {
		failOnce(name)
		_, err := s.Fetch(t.Context(), request(identity, []spec.Object{{Name: name, Type: spec.SecretsManager, FileName: name, Mode: 0o644}}))
		return err
	}
	// role-a's budget is spent: even one fault is no longer retried.
	if err := fetchAfterOneFault("role-a", "ok-a"); err == nil {
		t.Fatal("role-a's retries were not used up; the test proves nothing")
	}
	// role-b, same region, still has its own.
	if err := fetchAfterOneFault("role-b", "ok-b"); err != nil {
		t.Errorf("role-b's retry after one fault: %v (its budget was taken by role-a)", err)
	}
	// So does role-a in another region.
	failOnce("ok-a2")
	req := request("role-a", []spec.Object{{Name: "ok-a2", Type: spec.SecretsManager, FileName: "ok-a2", Mode: 0o644}})
	req.Region = "eu-west-1"
	if _, err := s.Fetch(t.Context(), req); err != nil {
		t.Errorf("role-a in another region: %v", err)
	}
}
