package driver

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/tests/poll"
)

// TestIdleReleaseAfterCalls: memory is released once, when the driver has
// been idle long enough after calls; never while calls come, and not again
// until a call came since.
func TestIdleReleaseAfterCalls(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	r := newIdleRelease(30*time.Second, clk)
	var released atomic.Int32
	done := make(chan struct{}, 10)
	r.release = func() { released.Add(1); done <- struct{}{} }
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { r.run(ctx); close(stopped) }()

	// tick waits for the ticker, then moves the clock by d.
	tick := func(d time.Duration) {
		t.Helper()
		err := poll.Wait(t.Context(), time.Minute, func(context.Context) (bool, error) { return clk.HasWaiters(), nil })
		if err != nil {
			t.Fatalf("the release loop never waited on its ticker: %v", err)
		}
		clk.Step(d)
	}
	// Idle, but no call yet: nothing to release.
	tick(time.Minute)
	r.touch()
	tick(15 * time.Second) // 15 s idle: not yet
	r.touch()
	tick(15 * time.Second) // a call came 15 s ago: not yet
	tick(15 * time.Second) // 30 s idle: release
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("no release after 30 s idle")
	}
	tick(time.Minute) // idle, but no call since: no second release
	r.touch()
	tick(30 * time.Second)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("no release after the next burst")
	}
	tick(time.Minute) // the loop handled the last step: it waits again
	cancel()
	<-stopped
	if n := released.Load(); n != 2 {
		t.Errorf("released %d times, want 2", n)
	}
}

func TestIdleReleaseOff(t *testing.T) {
	r := newIdleRelease(-1, clocktesting.NewFakeClock(time.Unix(0, 0)))
	r.release = func() { t.Error("released although turned off") }
	r.touch()
	r.run(t.Context()) // returns at once when off
}
