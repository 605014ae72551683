package driver

import (
	"fmt"
	"sync"
)

// volumeLocks serialises operations on one volume and on one target path: a
// second operation on a busy volume, or on a target another volume's
// operation is using, fails with Aborted at once, which kubelet retries.
// Locking the target too keeps two volume IDs from racing onto one path.
type volumeLocks struct {
	mu   sync.Mutex
	held map[string]struct{}
}

// acquire takes the locks of a volume and its target path together.
func (l *volumeLocks) acquire(volumeID, targetPath string) (release func(), err error) {
	keys := []string{"volume\x00" + volumeID, "target\x00" + targetPath}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if _, busy := l.held[k]; busy {
			return nil, fmt.Errorf("%w on volume %s at %s", errBusy, volumeID, targetPath)
		}
	}
	for _, k := range keys {
		l.held[k] = struct{}{}
	}
	return func() {
		l.mu.Lock()
		for _, k := range keys {
			delete(l.held, k)
		}
		l.mu.Unlock()
	}, nil
}
