package secretsync

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/types"
)

// refreshState is what the controller remembers of one SecretSync's syncs.
// It lives in memory: a new leader starts from the status.
type refreshState struct {
	// lastRefresh is when the provider last answered and the Secret was
	// found or made current.
	lastRefresh time.Time
	// failures counts the syncs that failed in a row; lastFailure is the
	// last one, of generation failedGeneration.
	failures         int
	lastFailure      time.Time
	failedGeneration int64
	// failingSince is the first failure of the ones in a row.
	failingSince time.Time
	// cutBackoff is failures when a trigger last cut the backoff short.
	cutBackoff int
}

// uidKey is a SecretSync's UID as a map key: its 16 bytes when it is a
// UUID (the API server's), else the first 16 bytes of its SHA-256. No
// string is kept alive by the map.
type uidKey [16]byte

func keyOf(uid types.UID) uidKey {
	if u, err := uuid.Parse(string(uid)); err == nil {
		return uidKey(u)
	}
	sum := sha256.Sum256([]byte(uid))
	return uidKey(sum[:16])
}

// states holds the refreshState of every SecretSync by UID. Most
// SecretSyncs have not failed since their last success: their state is
// their lastRefresh alone, held in the compact map (24 bytes a slot, not
// 88: tests/bench BenchmarkController measures the controller's memory);
// the others' in full.
type states struct {
	mu      sync.Mutex
	last    map[uidKey]int64 // lastRefresh, Unix nanoseconds
	failing map[uidKey]refreshState
}

func newStates() *states {
	return &states{last: map[uidKey]int64{}, failing: map[uidKey]refreshState{}}
}

func (s *states) get(uid types.UID) (refreshState, bool) {
	k := keyOf(uid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.failing[k]; ok {
		return st, true
	}
	if ns, ok := s.last[k]; ok {
		return refreshState{lastRefresh: time.Unix(0, ns)}, true
	}
	return refreshState{}, false
}

func (s *states) put(uid types.UID, st refreshState) {
	k := keyOf(uid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == (refreshState{lastRefresh: st.lastRefresh}) && !st.lastRefresh.IsZero() {
		delete(s.failing, k)
		s.last[k] = st.lastRefresh.UnixNano()
		return
	}
	delete(s.last, k)
	s.failing[k] = st
}

func (s *states) forget(uid types.UID) {
	k := keyOf(uid)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.last, k)
	delete(s.failing, k)
}
