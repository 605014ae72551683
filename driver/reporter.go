package driver

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/panics"
)

// reportWorkers is how many cluster writes run at once.
const reportWorkers = 4

// reporter hands outcomes to the cluster side outside the volume lock.
// Writes are coalesced per volume, the newest outcome replacing one not yet
// written, and retried with backoff until written, so that an API server
// that is slow or down never slows a publish and never loses a status.
type reporter struct {
	cluster Cluster
	timeout time.Duration
	queue   workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	pending map[string]*report // by volume ID
}

// report is one pending write: a publish outcome or an unpublish.
type report struct {
	publish   *Outcome
	unpublish *volume.Record
	// queued is when it was queued; waiting is since when its volume has
	// waited for a write (the queued time of the oldest report it
	// replaced that was not written).
	queued, waiting time.Time
}

func newReporter(c Cluster, timeout time.Duration) *reporter {
	if c == nil {
		return &reporter{}
	}
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, time.Minute)
	return &reporter{
		cluster: c,
		timeout: timeout,
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[string]{Name: "keymount-report"}),
		pending: map[string]*report{},
	}
}

// syncMissing syncs, on a successful first publish, the Secrets of its
// class that do not exist yet, before kubelet hears back
// (Cluster.SyncMissing).
func (r *reporter) syncMissing(ctx context.Context, o *Outcome) {
	if r.cluster == nil || !o.First || o.Err != nil {
		return
	}
	r.cluster.SyncMissing(ctx, o)
}

// published queues a publish outcome and records its events at once.
func (r *reporter) published(o *Outcome) {
	if r.cluster == nil {
		return
	}
	r.cluster.Notify(o)
	if o.First && o.Err != nil {
		return // nothing is mounted: there is no status to write
	}
	r.put(o.VolumeID, &report{publish: o})
}

// unpublished queues the removal of what was written for a volume.
func (r *reporter) unpublished(rec *volume.Record) {
	if r.cluster == nil || rec == nil {
		return
	}
	r.put(rec.VolumeID, &report{unpublish: rec})
}

func (r *reporter) put(key string, rep *report) {
	rep.queued = time.Now()
	rep.waiting = rep.queued
	r.mu.Lock()
	if old := r.pending[key]; old != nil {
		rep.waiting = old.waiting
	}
	r.pending[key] = rep
	r.mu.Unlock()
	r.queue.Forget(key)
	r.queue.Add(key)
}

// run processes the queue until ctx is done.
func (r *reporter) run(ctx context.Context) {
	if r.cluster == nil {
		return
	}
	var wg sync.WaitGroup
	for range reportWorkers {
		wg.Go(func() {
			for r.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	r.queue.ShutDown()
	wg.Wait()
}

func (r *reporter) next(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	r.mu.Lock()
	rep := r.pending[key]
	r.mu.Unlock()
	if rep == nil {
		return true
	}
	if err := r.write(ctx, rep); err != nil {
		if ctx.Err() == nil {
			klog.ErrorS(err, "writing volume state to the API server, will retry", "volumeID", key,
				"retries", r.queue.NumRequeues(key))
			r.queue.AddRateLimited(key)
		}
		return true
	}
	r.queue.Forget(key)
	r.mu.Lock()
	if cur := r.pending[key]; cur == rep {
		delete(r.pending, key)
	} else if cur != nil {
		cur.waiting = cur.queued // what waited before it is written
	}
	r.mu.Unlock()
	return true
}

// write writes one report. A panic in the cluster side is recovered as a
// failed write: it is retried with the queue's backoff, and the other
// volumes' writes go on.
func (r *reporter) write(ctx context.Context, rep *report) (err error) {
	defer panics.RecoverAs(panics.Reporter, "cluster write", &err)
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if rep.unpublish != nil {
		return r.cluster.AfterUnpublish(ctx, rep.unpublish)
	}
	return r.cluster.AfterPublish(ctx, rep.publish)
}

// WriteQueue reports the cluster side's writes waiting for the API server
// (pod statuses and Secret syncs, one per volume, retries included) and how
// long the oldest has waited, for the metrics: 0, 0 without a cluster.
func (d *Driver) WriteQueue() (pending int, oldest time.Duration) {
	return d.reporter.waiting(time.Now())
}

func (r *reporter) waiting(now time.Time) (int, time.Duration) {
	if r.cluster == nil {
		return 0, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var oldest time.Duration
	for _, rep := range r.pending {
		oldest = max(oldest, now.Sub(rep.waiting))
	}
	return len(r.pending), oldest
}

// idle reports whether nothing is waiting to be written (for tests).
func (r *reporter) idle() bool {
	if r.cluster == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending) == 0
}
