package syncctl

import (
	"sync"
	"time"

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
	// cutBackoff is failures when a trigger last cut the backoff short.
	cutBackoff int
}

// states holds the refreshState of every SecretSync by UID.
type states struct {
	mu sync.Mutex
	m  map[types.UID]refreshState
}

func newStates() *states { return &states{m: map[types.UID]refreshState{}} }

func (s *states) get(uid types.UID) (refreshState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[uid]
	return st, ok
}

func (s *states) put(uid types.UID, st refreshState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[uid] = st
}

func (s *states) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, uid)
}
