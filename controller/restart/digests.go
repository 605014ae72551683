package restart

import (
	"encoding/hex"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// SecretDigests is what the Secret reconciler knows of each synced Secret
// in place of its data: the keyed digest of its content
// (secretAnnotationValue) and when that content last changed. A cache
// transform fills it (Record) while the data is still there; the cached
// Secret then needs neither data nor annotations. One small entry per
// Secret, not a map of annotations and two strings on each cached copy:
// at 10,000 synced Secrets that is some 4 MB less heap (tests/bench
// BenchmarkController).
//
// A change is found where every version the cache gets passes: in
// Record, comparing the new digest with the last one recorded. client-go
// runs the transform as the informer queues an event, before the cache's
// store holds the object and before any handler or reconcile hears of it;
// and the reconciler's queue folds the events of one Secret into one
// request. So the first version the reconciler reads may already be the
// changed one (a queue that runs late on a loaded machine, workers that
// start only once every cache synced), and a reconcile may read NotFound
// for a Secret whose creation Record already saw: neither may decide what
// the content was before the change.
type SecretDigests struct {
	key []byte
	clk clock.PassiveClock

	mu sync.Mutex
	m  map[types.NamespacedName]secretEntry
}

// secretEntry is one Secret's row of SecretDigests.
type secretEntry struct {
	// uid is the Secret's, so that the deletion of one Secret never drops
	// the entry of another of the same name recorded since.
	uid types.UID
	sum [sumSize]byte
	// written is the Unix second of the last write of the content sum
	// digests (its latest managedFields time), 0 when unknown.
	written int64
	// changedAt is the Unix second of the last change of content Record
	// saw, 0 while none was: the first content recorded is the baseline.
	changedAt int64
}

// NewSecretDigests returns an empty table whose digests are keyed with key
// (Options.HashKey).
func NewSecretDigests(key []byte) *SecretDigests {
	return &SecretDigests{key: key, clk: clock.RealClock{}, m: map[types.NamespacedName]secretEntry{}}
}

// Record sets the digest and write time of s, a synced Secret as the API
// server sent it, and dates a change when the digest differs from the one
// recorded before: by the write that made it (the latest managedFields
// time, else the last one known), else now. Call it in the cache's
// transform before the data or the managedFields are trimmed. A Secret
// without managedFields whose entry exists is taken for a cache's already
// trimmed copy and leaves the entry as it is: client-go's informers do not
// hand a transform its own output (a resync skips it), but cache
// transforms are asked to be idempotent.
func (d *SecretDigests) Record(s *corev1.Secret) {
	k := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	fromAPI := len(s.ManagedFields) > 0
	sum := secretSum(d.key, s.Type, s.Data)
	written := lastWrite(s)
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[k]
	if ok && !fromAPI {
		return
	}
	if !written.IsZero() {
		e.written = written.Unix()
	}
	if ok && e.sum != sum {
		e.changedAt = e.written
		if e.changedAt == 0 {
			e.changedAt = d.clk.Now().Unix()
		}
	}
	e.uid, e.sum = s.UID, sum
	d.m[k] = e
}

// observe returns the Secret's current digest (the annotation's value)
// with when its content last changed since Record first saw it (zero
// while it did not). ok is false when Record never saw the Secret.
func (d *SecretDigests) observe(k types.NamespacedName) (value string, changedAt time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[k]
	if !ok {
		return "", time.Time{}, false
	}
	if e.changedAt != 0 {
		changedAt = time.Unix(e.changedAt, 0)
	}
	return hex.EncodeToString(e.sum[:]), changedAt, true
}

// forget drops the entry of the Secret k with uid: it left the cache
// (deleted, or no longer labelled). An entry Record made since for
// another Secret of the same name stays.
func (d *SecretDigests) forget(k types.NamespacedName, uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.m[k]; ok && e.uid == uid {
		delete(d.m, k)
	}
}
