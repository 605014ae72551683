package registration

import (
	"errors"
	"fmt"
	"sync"

	"github.com/keymount/keymount/internal/unixsocket"
)

// Errors Status.Check wraps, for the liveness probe.
var (
	// ErrRefused: kubelet's last answer refused the registration.
	ErrRefused = errors.New("kubelet refused the registration")
	// ErrSocketMissing: the registration socket is not at its path (removed
	// or replaced) and Serve has not created it again yet.
	ErrSocketMissing = errors.New("socket missing, not created again yet")
)

// Status is the state of the registration as the liveness probe sees it:
// whether the registration socket is in place and what kubelet last
// answered. Serve keeps it up to date; the zero value is ready to use and
// healthy until Serve starts. It is safe for concurrent use.
type Status struct {
	mu      sync.Mutex
	socket  string               // the socket's path, set when Serve starts
	serving *unixsocket.Listener // the socket being served; nil between sockets
	refused bool                 // kubelet's last answer was a refusal
	reason  string               // kubelet's error with that refusal
}

// Check returns nil while the registration is healthy: kubelet has not
// answered yet or last answered that it registered the driver, and the
// socket kubelet knows the driver by is in place. Otherwise the error names
// the socket and wraps ErrSocketMissing or ErrRefused (with kubelet's error).
// A refusal stays until kubelet answers again, across re-created sockets.
func (s *Status) Check() error {
	s.mu.Lock()
	socket, l, refused, reason := s.socket, s.serving, s.refused, s.reason
	s.mu.Unlock()
	switch {
	case socket == "":
		return nil // Serve has not started
	case l == nil || !l.Present():
		return fmt.Errorf("registration socket %s: %w", socket, ErrSocketMissing)
	case refused:
		return fmt.Errorf("registration socket %s: %w: %s", socket, ErrRefused, reason)
	}
	return nil
}

// start records the socket's path; nothing is served on it yet.
func (s *Status) start(socket string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.socket, s.serving = socket, nil
}

// setListener records the socket now served, nil when there is none.
func (s *Status) setListener(l *unixsocket.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serving = l
}

// answered records kubelet's answer to GetInfo.
func (s *Status) answered(registered bool, kubeletErr string) {
	if kubeletErr == "" && !registered {
		kubeletErr = "no error given"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused, s.reason = !registered, kubeletErr
}
