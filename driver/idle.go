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

	last    atomic.Int64 // unix nanoseconds of the last call
	pending atomic.Bool  // a call came since the last release
}

func newIdleRelease(after time.Duration, clk clock.WithTicker) *idleRelease {
	return &idleRelease{after: after, clock: clk, release: debug.FreeOSMemory}
}

// touch records a CSI call.
func (r *idleRelease) touch() {
	r.last.Store(r.clock.Now().UnixNano())
	r.pending.Store(true)
}

// run releases memory once the driver has been idle for r.after after
// calls, until ctx is done. A zero r.after turns it off.
func (r *idleRelease) run(ctx context.Context) {
	if r.after <= 0 {
		return
	}
	t := r.clock.NewTicker(r.after / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		idle := r.clock.Since(time.Unix(0, r.last.Load()))
		if idle >= r.after && r.pending.CompareAndSwap(true, false) {
			start := r.clock.Now()
			r.release()
			klog.V(4).InfoS("returned freed memory to the OS", "idle", idle, "took", r.clock.Since(start))
		}
	}
}
