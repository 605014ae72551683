package driver

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/keymount/keymount/internal/panics"
)

// A manual refresh (a new value of the refresh annotation on a class or a
// pod) runs at once, not at kubelet's next republish: the driver keeps, in
// memory only, each mounted volume's last NodePublishVolume request —
// service account tokens and node-publish secrets included, never logged,
// never written anywhere — and publishes it again. A request whose tokens
// expired is dropped: that volume refreshes at its next republish, whose
// decision sees the new trigger value too.
//
// Triggers are not a pump: per volume, one triggered refresh runs at a
// time and one starts per Config.MinRefreshInterval; the triggers that come
// meanwhile are coalesced into one refresh that starts when both allow it,
// with the newest request and trigger values. Each refresh recovers its own
// panic (internal/panics): it ends that refresh, not the driver.

// heldRequest is the last request that published one volume.
type heldRequest struct {
	req                   *csi.NodePublishVolumeRequest
	namespace, pod, class string
	expires               time.Time // zero: holds no token
	running               bool      // a triggered refresh of it is under way
	// lastRun is when its last triggered refresh started. pending says a
	// trigger came while one ran: it runs once that one is done. timer is
	// set while a run waits for lastRun + the minimum refresh interval:
	// every trigger until then is part of that run.
	lastRun time.Time
	pending bool
	timer   clock.Timer
}

// heldRequests holds the volumes' last requests and runs the refreshes
// triggers ask for: at most one at a time per volume, at most one per
// minInterval, each burst of triggers coalesced into one run.
type heldRequests struct {
	mu          sync.Mutex
	m           map[string]*heldRequest // by volume ID
	clock       clock.WithDelayedExecution
	minInterval time.Duration
	// start starts a triggered refresh of a volume in the background; the
	// refresh calls finished when done.
	start func(volumeID string, req *csi.NodePublishVolumeRequest)
}

// hold keeps req as the volume's last publishing request.
func (h *heldRequests) hold(p *publishRequest, req *csi.NodePublishVolumeRequest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur, ok := h.m[p.volumeID]
	if ok && cur.req == req {
		return
	}
	if !ok {
		cur = &heldRequest{}
		h.m[p.volumeID] = cur
	}
	cur.req, cur.namespace, cur.pod, cur.class = req, p.podNamespace, p.podName, p.className
	cur.expires = tokensExpire(requestTokens(req))
}

// drop forgets a volume's request: it was unpublished.
func (h *heldRequests) drop(volumeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.remove(volumeID)
}

// remove forgets a volume's request and its deferred run; h.mu is held.
func (h *heldRequests) remove(volumeID string) {
	if r, ok := h.m[volumeID]; ok && r.timer != nil {
		r.timer.Stop()
	}
	delete(h.m, volumeID)
}

// trigger admits a trigger for each held volume match selects.
func (h *heldRequests) trigger(match func(*heldRequest) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	for id, r := range h.m {
		if match(r) {
			h.admit(id, r, now)
		}
	}
}

// admit runs a triggered refresh of volume id now, or folds the trigger
// into the run already due: after the running one (pending), or at lastRun
// plus minInterval (timer). A request whose tokens expired at now is
// dropped. h.mu is held.
func (h *heldRequests) admit(id string, r *heldRequest, now time.Time) {
	since := now.Sub(r.lastRun)
	switch {
	case r.timer != nil:
		// The deferred run reads the trigger values when it runs.
	case r.running:
		r.pending = true
	case !r.expires.IsZero() && !now.Before(r.expires):
		klog.V(2).InfoS("no valid service account token held for a triggered refresh; the volume refreshes at its next republish",
			"volumeID", id, "pod", klog.KRef(r.namespace, r.pod))
		h.remove(id)
	case !r.lastRun.IsZero() && since >= 0 && since < h.minInterval:
		wait := h.minInterval - since
		klog.V(4).InfoS("triggered refresh deferred by the minimum refresh interval", "volumeID", id, "wait", wait)
		r.timer = h.clock.AfterFunc(wait, func() {
			go h.fire(id, r) // not on the clock's goroutine: a fake clock holds its lock here
		})
	default:
		r.running, r.pending, r.lastRun = true, false, now
		h.start(id, r.req)
	}
}

// fire runs the deferred trigger of r, unless its volume was unpublished.
func (h *heldRequests) fire(id string, r *heldRequest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m[id] != r {
		return
	}
	r.timer = nil
	h.admit(id, r, h.clock.Now())
}

// finished marks the triggered refresh of a volume done, and admits the
// trigger that came meanwhile, if any.
func (h *heldRequests) finished(volumeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.m[volumeID]
	if !ok {
		return
	}
	r.running = false
	if r.pending {
		r.pending = false
		h.admit(volumeID, r, h.clock.Now())
	}
}

// requestTokens is kubelet's tokens attribute of req: in the secrets when
// the CSIDriver sets serviceAccountTokenInSecrets (Kubernetes 1.35+), else
// in the volume context.
func requestTokens(req *csi.NodePublishVolumeRequest) string {
	if t := req.GetSecrets()[AttrTokens]; t != "" {
		return t
	}
	return req.GetVolumeContext()[AttrTokens]
}

// tokensExpire returns when the first of the service account tokens in
// kubelet's tokens attribute expires; zero when there are none. Tokens
// whose expiry cannot be read expire now: such a request is never reused.
func tokensExpire(attr string) time.Time {
	if attr == "" {
		return time.Time{}
	}
	var tokens map[string]struct {
		ExpirationTimestamp time.Time `json:"expirationTimestamp"`
	}
	if err := json.Unmarshal([]byte(attr), &tokens); err != nil {
		return time.Unix(1, 0)
	}
	var first time.Time
	for _, t := range tokens {
		if t.ExpirationTimestamp.IsZero() {
			return time.Unix(1, 0)
		}
		if first.IsZero() || t.ExpirationTimestamp.Before(first) {
			first = t.ExpirationTimestamp
		}
	}
	return first
}

// TriggerClass refreshes now the volumes of class in namespace that this
// node holds a request for, when the policy lets a trigger refresh them.
// It returns at once; the refreshes run in the background.
func (d *Driver) TriggerClass(namespace, class string) {
	d.trigger(func(r *heldRequest) bool { return r.namespace == namespace && r.class == class })
}

// TriggerPod refreshes now the volumes of pod namespace/name this node
// holds a request for, as TriggerClass.
func (d *Driver) TriggerPod(namespace, name string) {
	d.trigger(func(r *heldRequest) bool { return r.namespace == namespace && r.pod == name })
}

// busyRetry is how long a triggered refresh waits for a volume another
// operation holds before it tries again.
const busyRetry = 50 * time.Millisecond

// busyGiveUp bounds those retries: by then a republish has run, and its
// decision saw the trigger.
const busyGiveUp = 10 * time.Second

func (d *Driver) trigger(match func(*heldRequest) bool) {
	if base := d.base.Load(); base == nil || (*base).Err() != nil {
		return // not serving: the next republish sees the trigger
	}
	d.held.trigger(match)
}

// startTriggered refreshes a held volume in the background (heldRequests'
// start). A panic in it is recovered: it ends that refresh, not the driver.
func (d *Driver) startTriggered(volumeID string, req *csi.NodePublishVolumeRequest) {
	ctx := context.Background()
	if base := d.base.Load(); base != nil {
		ctx = *base
	}
	go func() {
		defer d.held.finished(volumeID)
		defer panics.Recover(panics.Trigger, "triggered refresh of volume "+volumeID)
		d.republishHeld(ctx, req)
	}()
}

// republishHeld publishes a held request again, as kubelet's republish
// would; the decision inside sees the new trigger value.
func (d *Driver) republishHeld(ctx context.Context, req *csi.NodePublishVolumeRequest) {
	giveUp := time.Now().Add(busyGiveUp)
	for {
		err := d.publish(ctx, req)
		if !errors.Is(err, errBusy) || time.Now().After(giveUp) {
			if err != nil {
				klog.ErrorS(err, "triggered refresh", "volumeID", req.GetVolumeId())
			}
			return
		}
		if !sleep(ctx, busyRetry) {
			return
		}
	}
}

// HoldsClass reports whether the driver holds a request of a volume of
// class in namespace: whether this node mounts it.
func (d *Driver) HoldsClass(namespace, class string) bool {
	d.held.mu.Lock()
	defer d.held.mu.Unlock()
	for _, r := range d.held.m {
		if r.namespace == namespace && r.class == class {
			return true
		}
	}
	return false
}

// sweepEvery is how often held requests whose tokens expired are dropped.
const sweepEvery = 30 * time.Second

// sweep drops the held requests whose tokens expired at now: expired
// credentials are not kept in memory longer than a sweep period.
func (h *heldRequests) sweep(now time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	dropped := 0
	for id, r := range h.m {
		if !r.expires.IsZero() && !now.Before(r.expires) && !r.running {
			h.remove(id)
			dropped++
		}
	}
	return dropped
}

// sweepOnce runs one sweep; a panic in it ends that sweep only.
func (d *Driver) sweepOnce() {
	defer panics.Recover(panics.Sweep, "sweep of held requests")
	if n := d.held.sweep(d.deps.Clock.Now()); n > 0 {
		klog.V(4).InfoS("dropped held publish requests whose tokens expired", "count", n)
	}
}

// sweepHeld runs sweep every sweepEvery until ctx ends.
func (d *Driver) sweepHeld(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.sweepOnce()
		}
	}
}

// sleep waits for d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
