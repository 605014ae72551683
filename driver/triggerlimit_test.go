package driver

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/poll"
)

// limiterRig is a heldRequests on a fake clock whose refreshes only
// record that they started; the test finishes them.
type limiterRig struct {
	clk *clocktesting.FakeClock
	h   *heldRequests

	mu      sync.Mutex
	started []*csi.NodePublishVolumeRequest
}

func newLimiterRig(interval time.Duration) *limiterRig {
	r := &limiterRig{clk: clocktesting.NewFakeClock(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))}
	r.h = &heldRequests{m: map[string]*heldRequest{}, clock: r.clk, minInterval: interval}
	r.h.start = func(_ string, req *csi.NodePublishVolumeRequest) {
		r.mu.Lock()
		r.started = append(r.started, req)
		r.mu.Unlock()
	}
	return r
}

func (r *limiterRig) runs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.started)
}

// hold holds a request of volume id, of pod shop/web-0 and class app.
func (r *limiterRig) hold(id string) *csi.NodePublishVolumeRequest {
	req := &csi.NodePublishVolumeRequest{VolumeId: id}
	r.h.hold(&publishRequest{volumeID: id, podNamespace: "shop", podName: "web-0", className: "app"}, req)
	return req
}

func (r *limiterRig) trigger() {
	r.h.trigger(func(h *heldRequest) bool { return h.namespace == "shop" && h.class == "app" })
}

// assertRuns checks that exactly want refreshes started, waiting for a
// deferred one (it starts on a goroutine of its own) when more are due.
func (r *limiterRig) assertRuns(t *testing.T, want int) {
	t.Helper()
	poll.UntilTrue(t, "refreshes to start", func() bool { return r.runs() >= want })
	if got := r.runs(); got != want {
		t.Fatalf("%d refreshes started, want %d", got, want)
	}
}

// step moves the clock on; a deferred run it makes due starts on a
// goroutine of its own (assertRuns waits for it).
func (r *limiterRig) step(d time.Duration) { r.clk.Step(d) }

// TestTriggerBurstIsOneRefresh: triggers in a burst start one refresh;
// those that come while it runs are coalesced into one more, which starts
// only once the minimum interval since the first has passed.
func TestTriggerBurstIsOneRefresh(t *testing.T) {
	r := newLimiterRig(10 * time.Second)
	r.hold("v")
	for range 50 {
		r.trigger()
	}
	r.assertRuns(t, 1)

	r.h.finished("v") // the 49 triggers after the first came while it ran
	r.step(9 * time.Second)
	for range 20 {
		r.trigger()
	}
	if got := r.runs(); got != 1 {
		t.Fatalf("%d refreshes started before the interval passed, want 1", got)
	}
	r.step(time.Second)
	r.assertRuns(t, 2)

	// Nothing else is pending: no third run, however long we wait.
	r.h.finished("v")
	r.step(time.Hour)
	if got := r.runs(); got != 2 {
		t.Errorf("%d refreshes after the burst, want 2", got)
	}
	if r.h.m["v"].timer != nil || r.h.m["v"].pending {
		t.Error("a run is still scheduled after the burst was served")
	}
}

// TestTriggerAfterIntervalRunsAtOnce: a trigger that comes once the
// interval has passed since the last run starts at once.
func TestTriggerAfterIntervalRunsAtOnce(t *testing.T) {
	r := newLimiterRig(10 * time.Second)
	r.hold("v")
	r.trigger()
	r.assertRuns(t, 1)
	r.h.finished("v")
	r.step(10 * time.Second)
	r.trigger()
	r.assertRuns(t, 2) // synchronously: start ran inside trigger
}

// TestTriggerWhileRunningWaitsForIt: a trigger while a refresh runs, past
// the interval, starts as soon as that refresh is done, once.
func TestTriggerWhileRunningWaitsForIt(t *testing.T) {
	r := newLimiterRig(10 * time.Second)
	r.hold("v")
	r.trigger()
	r.step(time.Minute) // a slow refresh
	r.trigger()
	r.trigger()
	if got := r.runs(); got != 1 {
		t.Fatalf("%d refreshes run at once for one volume, want 1", got)
	}
	r.h.finished("v")
	r.assertRuns(t, 2)
}

// TestTriggerDeferredRunUsesTheNewestRequest: the deferred run publishes
// the request kubelet sent last (fresh tokens), not the one held when the
// trigger came.
func TestTriggerDeferredRunUsesTheNewestRequest(t *testing.T) {
	r := newLimiterRig(10 * time.Second)
	r.hold("v")
	r.trigger()
	r.h.finished("v")
	r.trigger() // deferred
	newest := r.hold("v")
	r.step(10 * time.Second)
	r.assertRuns(t, 2)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started[1] != newest {
		t.Error("the deferred refresh used an older request than the newest held")
	}
}

// TestTriggerDeferredRunDroppedWithTheVolume: an unpublished volume's
// deferred run never starts.
func TestTriggerDeferredRunDroppedWithTheVolume(t *testing.T) {
	r := newLimiterRig(10 * time.Second)
	r.hold("v")
	r.trigger()
	r.h.finished("v")
	r.trigger() // deferred
	r.h.drop("v")
	r.step(time.Minute)
	if got := r.runs(); got != 1 {
		t.Errorf("%d refreshes started, want 1: the deferred run of an unpublished volume started", got)
	}
	if r.clk.HasWaiters() {
		t.Error("the deferred run's timer is still set after the volume was dropped")
	}
}

// TestTriggerVolumesAreLimitedApart: the interval is per volume: a
// trigger of a class refreshes each of its volumes, whatever the others
// did.
func TestTriggerVolumesAreLimitedApart(t *testing.T) {
	r := newLimiterRig(10 * time.Second)
	r.hold("a")
	r.trigger()
	r.assertRuns(t, 1)
	r.h.finished("a")
	r.hold("b")
	r.trigger() // a: deferred; b: at once
	r.assertRuns(t, 2)
	r.step(10 * time.Second)
	r.assertRuns(t, 3)
}

// TestTriggerClockSetBack: a clock set back does not defer a trigger for
// as long as it went back.
func TestTriggerClockSetBack(t *testing.T) {
	r := newLimiterRig(10 * time.Second)
	r.hold("v")
	r.trigger()
	r.h.finished("v")
	r.clk.SetTime(r.clk.Now().Add(-time.Hour))
	r.trigger()
	r.assertRuns(t, 2)
}

// alwaysTriggered refreshes on every republish and trigger.
type alwaysTriggered struct{}

func (alwaysTriggered) Decide(rotation.State, string, string, string, time.Time) rotation.Decision {
	return rotation.Decision{Verdict: rotation.DecisionTriggered}
}

func (alwaysTriggered) Current(string, string, string) (rotation.Triggers, []error) {
	return rotation.Triggers{}, nil
}

// TestTriggerBurstThroughDriver: a burst of triggers on a served driver
// calls the provider once; the next call comes only once the minimum
// refresh interval has passed on the driver's clock.
func TestTriggerBurstThroughDriver(t *testing.T) {
	var calls atomic.Int32
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	s := serveNodeWith(t, func(d *Deps) {
		d.Providers = funcProvider(func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
			calls.Add(1)
			return okResponse(&v1alpha1.File{Path: "a", Contents: []byte("x")}), nil
		})
		d.Refresh, d.TriggerClock = alwaysTriggered{}, clk
	})
	req := s.request("burst")
	if _, err := s.node.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	idle := func() bool {
		s.d.held.mu.Lock()
		defer s.d.held.mu.Unlock()
		r := s.d.held.m[req.GetVolumeId()]
		return r != nil && !r.running && !r.pending
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { s.d.TriggerClass("shop", "app") })
	}
	wg.Wait()
	poll.UntilTrue(t, "the burst's refresh to finish", idle)
	if got := calls.Load(); got != 2 { // the first publish and one refresh
		t.Fatalf("%d provider calls after a burst of 50 triggers, want 2", got)
	}
	clk.Step(DefaultMinRefreshInterval - time.Second)
	s.d.TriggerClass("shop", "app")
	if got := calls.Load(); got != 2 {
		t.Fatalf("%d provider calls before the interval passed, want 2", got)
	}
	clk.Step(time.Second)
	poll.UntilTrue(t, "the deferred refresh", func() bool { return calls.Load() == 3 && idle() })
	if err := s.unpublish(t.Context(), req); err != nil {
		t.Fatal(err)
	}
}
