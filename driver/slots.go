package driver

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/klog/v2"
)

// slots bounds the provider calls in flight and the bytes of their
// responses, and shares the bound fairly between providers.
//
// Each call holds one slot from before the call until its response has been
// written and dropped, and a slot stands for the largest response a call
// may receive (ProviderMaxRecvBytes) of ProviderInflightBytes: the node runs
// at most capacity = min(ProviderConcurrency,
// ProviderInflightBytes/ProviderMaxRecvBytes) calls at once, so the driver's
// memory stays bounded however many publishes kubelet sends at once.
//
// The fair share: a call of a provider that already holds h slots starts
// only if at least min(h, reserve) slots stay free once it has started,
// where reserve is a quarter of the capacity (at least one once the
// capacity is two or more). Hence:
//   - a provider with no call in flight takes any free slot;
//   - a provider alone runs capacity-reserve calls at once;
//   - however many calls of one provider hang, they hold at most
//     capacity-reserve slots, and every other provider still finds a free
//     one: its publishes wait for its own calls only, never for the hung
//     calls' deadline. More providers hanging at once split the reserve the
//     same way (each leaves as many free as it holds, up to the reserve),
//     so the last free slot goes to a provider with no call in flight.
//
// A slot cannot be taken back from a call in flight, so the reserve is the
// price of fairness: a provider that could take every slot would leave none
// for the next one the moment its calls hang.
//
// Callers beyond the bound wait their turn within their own deadline; a
// waiter that may start is started whatever waits before it (a provider at
// its share does not hold up the others).
type slots struct {
	capacity int
	reserve  int

	mu      sync.Mutex
	free    int
	held    map[string]int // slots held, by provider
	waiting []*slotWaiter  // oldest first
}

// slotWaiter is a call waiting for a slot; granted is closed once it holds
// one.
type slotWaiter struct {
	provider string
	granted  chan struct{}
}

func newSlots(cfg Config) *slots {
	capacity := int(min(int64(cfg.ProviderConcurrency), cfg.ProviderInflightBytes/cfg.ProviderMaxRecvBytes))
	capacity = max(capacity, 1)
	s := &slots{capacity: capacity, reserve: fairReserve(capacity), free: capacity, held: map[string]int{}}
	if s.reserve == 0 {
		klog.InfoS("provider calls run one at a time: one provider's hung call holds up every other provider's; "+
			"raise --provider-concurrency and --provider-inflight-bytes to room for two calls or more",
			"providerConcurrency", cfg.ProviderConcurrency, "providerInflightBytes", cfg.ProviderInflightBytes,
			"providerMaxRecvBytes", cfg.ProviderMaxRecvBytes)
	}
	return s
}

// fairReserve is how many of capacity slots one provider never takes while
// it holds that many or more: a quarter, at least one, none when there is
// only one.
func fairReserve(capacity int) int {
	if capacity < 2 {
		return 0
	}
	return max(1, capacity/4)
}

// acquire waits for a slot of provider's share; the returned func gives it
// back.
func (s *slots) acquire(ctx context.Context, provider string) (func(), error) {
	s.mu.Lock()
	if s.mayStart(provider) {
		s.take(provider)
		s.mu.Unlock()
		return s.releaser(provider), nil
	}
	w := &slotWaiter{provider: provider, granted: make(chan struct{})}
	s.waiting = append(s.waiting, w)
	held := s.held[provider]
	s.mu.Unlock()

	select {
	case <-w.granted:
		return s.releaser(provider), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.granted: // granted while the context ended: give it back
		s.give(provider)
	default:
		s.drop(w)
	}
	return nil, fmt.Errorf("waiting for a provider call slot (provider %q held %d of the node's %d, %d kept for other providers): %w",
		provider, held, s.capacity, s.reserve, ctx.Err())
}

// mayStart reports whether a call of provider may start now.
func (s *slots) mayStart(provider string) bool {
	return s.free >= 1 && s.free-1 >= min(s.held[provider], s.reserve)
}

func (s *slots) take(provider string) {
	s.free--
	s.held[provider]++
}

// give returns a slot of provider and starts every waiter that may start
// now, oldest first.
func (s *slots) give(provider string) {
	s.free++
	if s.held[provider]--; s.held[provider] <= 0 {
		delete(s.held, provider)
	}
	kept := s.waiting[:0]
	for _, w := range s.waiting {
		if s.mayStart(w.provider) {
			s.take(w.provider)
			close(w.granted)
			continue
		}
		kept = append(kept, w)
	}
	clear(s.waiting[len(kept):])
	s.waiting = kept
}

// drop removes w from the waiters.
func (s *slots) drop(w *slotWaiter) {
	for i, x := range s.waiting {
		if x == w {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return
		}
	}
}

// releaser returns the func that gives a slot of provider back, once.
func (s *slots) releaser(provider string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.give(provider)
			s.mu.Unlock()
		})
	}
}

// inUse returns the slots provider holds and how many are free.
func (s *slots) inUse(provider string) (held, free int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[provider], s.free
}
