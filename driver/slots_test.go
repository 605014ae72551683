package driver

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/keymount/keymount/tests/poll"
)

// slotsOf returns slots of the given capacity in calls (the byte bound
// allowing as many).
func slotsOf(capacity int) *slots {
	return newSlots(Config{ProviderConcurrency: capacity, ProviderInflightBytes: int64(capacity) << 20, ProviderMaxRecvBytes: 1 << 20})
}

// takeAll acquires slots for provider until one more would wait, and
// returns how many it got with their release funcs.
func takeAll(t *testing.T, s *slots, provider string) []func() {
	t.Helper()
	var out []func()
	for range s.capacity + 1 {
		s.mu.Lock()
		ok := s.mayStart(provider)
		s.mu.Unlock()
		if !ok {
			return out
		}
		release, err := s.acquire(t.Context(), provider)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, release)
	}
	t.Fatalf("provider %s took more than the capacity %d", provider, s.capacity)
	return nil
}

// TestSlotsShare: the capacity is the smaller of the two bounds; a
// provider alone holds all but the reserve; with one provider's calls all
// hung, each further provider with no call in flight still starts one while
// any of the reserve is left, and each provider leaves as many free as it
// holds, up to the reserve.
func TestSlotsShare(t *testing.T) {
	for _, tc := range []struct {
		concurrency       int
		inflight, recv    int64
		capacity, reserve int
		// others are how many slots each further provider gets while the
		// first holds its whole share, in order.
		others []int
	}{
		{concurrency: 16, inflight: 32 << 20, recv: 4 << 20, capacity: 8, reserve: 2, others: []int{1, 1, 0}},
		{concurrency: 4, inflight: 64 << 20, recv: 4 << 20, capacity: 4, reserve: 1, others: []int{1, 0}},
		{concurrency: 16, inflight: 64 << 20, recv: 4 << 20, capacity: 16, reserve: 4, others: []int{2, 1, 1, 0}},
		{concurrency: 2, inflight: 8 << 20, recv: 4 << 20, capacity: 2, reserve: 1, others: []int{1, 0}},
		{concurrency: 64, inflight: 8 << 20, recv: 4 << 20, capacity: 2, reserve: 1, others: []int{1, 0}},
		{concurrency: 1, inflight: 8 << 20, recv: 4 << 20, capacity: 1, reserve: 0, others: []int{0}},
	} {
		t.Run(fmt.Sprintf("%d calls %d bytes", tc.concurrency, tc.inflight), func(t *testing.T) {
			s := newSlots(Config{ProviderConcurrency: tc.concurrency, ProviderInflightBytes: tc.inflight, ProviderMaxRecvBytes: tc.recv})
			if s.capacity != tc.capacity || s.reserve != tc.reserve {
				t.Fatalf("capacity %d reserve %d, want %d and %d", s.capacity, s.reserve, tc.capacity, tc.reserve)
			}
			hung := takeAll(t, s, "hung")
			if len(hung) != tc.capacity-tc.reserve {
				t.Fatalf("a provider alone took %d slots, want %d (capacity %d minus reserve %d)",
					len(hung), tc.capacity-tc.reserve, tc.capacity, tc.reserve)
			}
			for i, want := range tc.others {
				p := fmt.Sprintf("other-%d", i)
				if got := takeAll(t, s, p); len(got) != want {
					t.Errorf("provider %s took %d slots while the others hold theirs, want %d", p, len(got), want)
				}
			}
			for _, release := range hung {
				release()
			}
			if held, _ := s.inUse("hung"); held != 0 {
				t.Errorf("after releasing, hung holds %d", held)
			}
		})
	}
}

// TestSlotsWaitersStartWhenTheyMay: a waiter of a provider at its share
// does not hold up a later waiter of another provider; released slots go
// to waiters that may start; a waiter whose context ends gets an error
// naming the provider and leaves no slot taken; a release func is
// idempotent.
func TestSlotsWaitersStartWhenTheyMay(t *testing.T) {
	s := slotsOf(4) // reserve 1: a provider alone holds 3
	a := takeAll(t, s, "a")
	b := takeAll(t, s, "b")
	if len(a) != 3 || len(b) != 1 {
		t.Fatalf("a took %d, b %d; want 3 and 1", len(a), len(b))
	}

	aWaits := acquireAsync(t.Context(), t, s, "a")
	cCtx, cancelC := context.WithCancel(t.Context())
	cWaits := acquireAsync(cCtx, t, s, "c")
	b[0]() // one slot free: c (no call in flight) may take it, a (at its share) may not
	b[0]() // released twice: counts once
	got := <-cWaits
	if got.err != nil {
		t.Fatalf("c, with no call in flight, did not start on a free slot: %v", got.err)
	}
	if held, free := s.inUse("b"); held != 0 || free != 0 {
		t.Fatalf("after b's release (called twice) and c's start, b holds %d and %d are free; want 0 and 0", held, free)
	}
	select {
	case r := <-aWaits:
		t.Fatalf("a started beyond its share: %v", r.err)
	default:
	}
	cancelC()
	got.release()
	a[0]()
	r := <-aWaits
	if r.err != nil {
		t.Fatalf("a did not start once under its share: %v", r.err)
	}

	// A waiter whose context ends fails, naming the provider, and holds nothing.
	ctx, cancel := context.WithCancel(t.Context())
	dWaits := acquireAsync(ctx, t, s, "a")
	cancel()
	if d := <-dWaits; !errors.Is(d.err, context.Canceled) || d.release != nil {
		t.Fatalf("cancelled waiter: %v, want context.Canceled and no slot", d.err)
	}
	r.release()
	a[1]()
	a[2]()
	if held, free := s.inUse("a"); held != 0 || free != s.capacity {
		t.Fatalf("after every release a holds %d and %d are free, want 0 and %d", held, free, s.capacity)
	}
	if len(s.waiting) != 0 {
		t.Fatalf("%d waiters left", len(s.waiting))
	}
}

type acquired struct {
	release func()
	err     error
}

// acquireAsync acquires a slot in a goroutine; the channel says how it went.
// It returns once the call waits (or holds a slot).
func acquireAsync(ctx context.Context, t *testing.T, s *slots, provider string) <-chan acquired {
	t.Helper()
	out := make(chan acquired, 1)
	s.mu.Lock()
	before := len(s.waiting)
	s.mu.Unlock()
	go func() {
		release, err := s.acquire(ctx, provider)
		out <- acquired{release, err}
	}()
	poll.UntilTrue(t, provider+" waiting or started", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.waiting) > before || len(out) > 0
	})
	return out
}
