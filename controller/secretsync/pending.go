package secretsync

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// pendingFor bounds how long a reconcile waits for the cache to show a
// status the controller wrote: past it the cached status is taken as it
// is (it was changed by someone else, or the watch is broken and a resync
// is due anyway).
const pendingFor = 10 * time.Second

// pendingRecheck is when a reconcile that found the cache behind is tried
// again, should the status's watch event not come first.
const pendingRecheck = time.Second

// pendingStatuses remembers the syncHash of each status the controller
// wrote until the cache shows it. A reconcile queued by the Secret's
// change (the apply comes before the status) can otherwise read the
// SecretSync from a cache that does not have the new status yet, find the
// hash stale, and apply the Secret again for nothing: a second write and
// an event saying something was restored. Only writes the cache has not
// caught up with are held, so it does not grow with the SecretSyncs.
type pendingStatuses struct {
	mu sync.Mutex
	m  map[uidKey]pendingStatus
}

type pendingStatus struct {
	hash string
	at   time.Time
}

func newPendingStatuses() *pendingStatuses {
	return &pendingStatuses{m: map[uidKey]pendingStatus{}}
}

// wrote records that the status of uid now holds hash.
func (p *pendingStatuses) wrote(uid types.UID, hash string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[keyOf(uid)] = pendingStatus{hash: hash, at: now}
}

// behind reports whether the cached status of uid, holding hash, is older
// than one the controller wrote less than pendingFor ago. Once the cache
// shows it, or after pendingFor, uid is forgotten.
func (p *pendingStatuses) behind(uid types.UID, hash string, now time.Time) bool {
	k := keyOf(uid)
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.m[k]
	if !ok {
		return false
	}
	if w.hash == hash || now.Sub(w.at) >= pendingFor {
		delete(p.m, k)
		return false
	}
	return true
}

// forget drops uid (a SecretSync deleted).
func (p *pendingStatuses) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, keyOf(uid))
}

// len is how many writes the cache has not shown yet.
func (p *pendingStatuses) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}
