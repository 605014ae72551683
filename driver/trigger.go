package driver

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"
)

// A manual refresh (a new value of the refresh annotation on a class or a
// pod) runs at once, not at kubelet's next republish: the driver keeps, in
// memory only, each mounted volume's last NodePublishVolume request —
// service account tokens and node-publish secrets included, never logged,
// never written anywhere — and publishes it again. A request whose tokens
// expired is dropped: that volume refreshes at its next republish, whose
// decision sees the new trigger value too.

// heldRequest is the last request that published one volume.
type heldRequest struct {
	req                   *csi.NodePublishVolumeRequest
	namespace, pod, class string
	expires               time.Time // zero: holds no token
	running               bool      // a triggered refresh of it is under way
}

type heldRequests struct {
	mu sync.Mutex
	m  map[string]*heldRequest // by volume ID
}

// hold keeps req as the volume's last publishing request.
func (h *heldRequests) hold(p *publishRequest, req *csi.NodePublishVolumeRequest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur, ok := h.m[p.volumeID]; ok && cur.req == req {
		return
	}
	running := false
	if cur, ok := h.m[p.volumeID]; ok {
		running = cur.running
	}
	h.m[p.volumeID] = &heldRequest{
		req: req, namespace: p.podNamespace, pod: p.podName, class: p.className,
		expires: tokensExpire(requestTokens(req)), running: running,
	}
}

// drop forgets a volume's request: it was unpublished.
func (h *heldRequests) drop(volumeID string) {
	h.mu.Lock()
	delete(h.m, volumeID)
	h.mu.Unlock()
}

// take returns the requests of the volumes match selects that no
// triggered refresh is running for, marks them running, and drops those
// whose tokens expired at now.
func (h *heldRequests) take(now time.Time, match func(*heldRequest) bool) map[string]*csi.NodePublishVolumeRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]*csi.NodePublishVolumeRequest{}
	for id, r := range h.m {
		switch {
		case !match(r) || r.running:
		case !r.expires.IsZero() && !now.Before(r.expires):
			klog.V(2).InfoS("no valid service account token held for a triggered refresh; the volume refreshes at its next republish",
				"volumeID", id, "pod", klog.KRef(r.namespace, r.pod))
			delete(h.m, id)
		default:
			r.running = true
			out[id] = r.req
		}
	}
	return out
}

// done marks the triggered refresh of a volume finished.
func (h *heldRequests) done(volumeID string) {
	h.mu.Lock()
	if r, ok := h.m[volumeID]; ok {
		r.running = false
	}
	h.mu.Unlock()
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
	base := d.base.Load()
	if base == nil || (*base).Err() != nil {
		return // not serving: the next republish sees the trigger
	}
	ctx := *base
	for id, req := range d.held.take(d.deps.Clock.Now(), match) {
		go func() {
			defer d.held.done(id)
			d.republishHeld(ctx, req)
		}()
	}
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
		t := time.NewTimer(busyRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
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
			delete(h.m, id)
			dropped++
		}
	}
	return dropped
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
			if n := d.held.sweep(d.deps.Clock.Now()); n > 0 {
				klog.V(4).InfoS("dropped held publish requests whose tokens expired", "count", n)
			}
		}
	}
}
