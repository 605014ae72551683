package driver

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultReleaseMemoryAfter is how long the driver is idle before it gives
// the memory a burst of publishes left behind back to the node.
const DefaultReleaseMemoryAfter = 30 * time.Second

// idleRelease returns freed memory to the operating system once no CSI call
// came for a while after some did. Between bursts of pods a node's driver
// mostly idles; without this the Go runtime keeps what a burst's garbage
// grew the heap to (up to twice the live heap, returned only slowly), on
// every node of the cluster.
type idleRelease struct {
	after   time.Duration
	clock   clock.WithTicker
	release func()

	last atomic.Int64 // unix nanoseconds of the last call, 0 before any
}

func newIdleRelease(after time.Duration, clk clock.WithTicker) *idleRelease {
	return &idleRelease{after: after, clock: clk, release: debug.FreeOSMemory}
}

// touch records a CSI call.
func (r *idleRelease) touch() {
	r.last.Store(r.clock.Now().UnixNano())
}

// run releases memory once the driver has been idle for r.after after
// calls, until ctx is done. A zero r.after turns it off.
func (r *idleRelease) run(ctx context.Context) {
	if r.after <= 0 {
		return
	}
	t := r.clock.NewTicker(r.after / 2)
	defer t.Stop()
	// released is the time of the last release: a call after it is one
	// to release for. One word (the last call's time) read after now, so
	// a call recorded meanwhile is never measured against a late clock
	// nor taken for one released already.
	var released int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		now := r.clock.Now()
		last := r.last.Load()
		idle := now.Sub(time.Unix(0, last))
		if last > released && idle >= r.after {
			released = now.UnixNano()
			start := r.clock.Now()
			r.release()
			klog.V(4).InfoS("returned freed memory to the OS", "idle", idle, "took", r.clock.Since(start))
		}
	}
}
