package driver

import (
	"fmt"
	"sync"
)

// volumeLocks serialises operations on one volume. A second operation on a
// busy volume fails with Aborted at once, which kubelet retries.
type volumeLocks struct {
	mu   sync.Mutex
	held map[string]struct{}
}

func (l *volumeLocks) acquire(volumeID string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, busy := l.held[volumeID]; busy {
		return nil, fmt.Errorf("%w on volume %s", errBusy, volumeID)
	}
	l.held[volumeID] = struct{}{}
	return func() {
		l.mu.Lock()
		delete(l.held, volumeID)
		l.mu.Unlock()
	}, nil
}
