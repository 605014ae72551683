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
// (secretAnnotationValue), the time of its last write as the API server
// recorded it, and the digest it last acted on. A cache transform fills it
// (Record) while the data is still there; the cached Secret then needs
// neither data nor annotations. One small entry per Secret, not a map
// of annotations and two strings on each cached copy: at 10,000 synced
// Secrets that is some 4 MB less heap (tests/bench BenchmarkController).
type SecretDigests struct {
	key []byte

	mu sync.Mutex
	m  map[types.NamespacedName]secretEntry
}

// secretEntry is one Secret's row of SecretDigests.
type secretEntry struct {
	sum [sumSize]byte
	// written is the Unix second of the last write of the content sum
	// digests (its latest managedFields time), 0 when unknown.
	written int64
	// seen is the digest the reconciler last observed, when seenOK.
	seen   [sumSize]byte
	seenOK bool
	// changedAt is the Unix second of the last change of content the
	// reconciler observed, 0 while none was.
	changedAt int64
}

// NewSecretDigests returns an empty table whose digests are keyed with key
// (Options.HashKey).
func NewSecretDigests(key []byte) *SecretDigests {
	return &SecretDigests{key: key, m: map[types.NamespacedName]secretEntry{}}
}

// Record sets the digest and write time of s, a synced Secret as the API
// server sent it. Call it in the cache's transform before the data or the
// managedFields are trimmed. A Secret without managedFields whose entry
// exists is taken for a cache's already trimmed copy and leaves the entry
// as it is: client-go's informers do not hand a transform its own output
// (a resync skips it), but cache transforms are asked to be idempotent.
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
	e.sum = sum
	if !written.IsZero() {
		e.written = written.Unix()
	}
	d.m[k] = e
}

// observe records that the reconciler saw the Secret's current digest and
// returns it (the annotation's value) with when its content last changed
// while observed: the write that made the change, as the API server dated
// it, else now. ok is false when Record never saw the Secret.
func (d *SecretDigests) observe(k types.NamespacedName, clk clock.PassiveClock) (value string, changedAt time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[k]
	if !ok {
		return "", time.Time{}, false
	}
	if e.seenOK && e.seen != e.sum {
		e.changedAt = e.written
		if e.changedAt == 0 {
			e.changedAt = clk.Now().Unix()
		}
	}
	e.seen, e.seenOK = e.sum, true
	d.m[k] = e
	if e.changedAt != 0 {
		changedAt = time.Unix(e.changedAt, 0)
	}
	return hex.EncodeToString(e.sum[:]), changedAt, true
}

// forget drops the Secret's entry: it was deleted or left the cache.
func (d *SecretDigests) forget(k types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, k)
}
