package k8senv

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// StopAPIServer stops kube-apiserver and returns once it has exited. etcd
// keeps running, and with it everything stored: until StartAPIServer,
// connections to Config.Host are refused, as they are by a crashed or
// restarting API server. kube-controller-manager and kube-scheduler, when
// they run, keep running and reconnect.
func (e *Env) StopAPIServer(t testing.TB) {
	t.Helper()
	e.apiServerMu.Lock()
	defer e.apiServerMu.Unlock()
	if e.stopped != nil {
		t.Fatal("k8senv: StopAPIServer: kube-apiserver is already stopped")
	}
	api := e.Envtest.ControlPlane.APIServer
	// SIGTERM (kube-apiserver drains its short requests and closes
	// watches 2s later: see shutdown-send-retry-after in Start), SIGKILL
	// after ControlPlaneStopTimeout; envtest waits for the exit.
	if err := api.Stop(); err != nil {
		t.Fatalf("k8senv: stopping kube-apiserver: %v", err)
	}
	serving := api.SecureServing
	hold, err := holdPort(serving.Address, serving.Port)
	if err != nil {
		t.Fatalf("k8senv: keeping kube-apiserver's port while it is stopped: %v", err)
	}
	e.stopped = hold
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same address with the same serving certificate, client CA and service
// account keys, and returns once it serves: clients built from Config, or
// from KubeconfigFor, work again without being rebuilt.
func (e *Env) StartAPIServer(t testing.TB) {
	t.Helper()
	e.apiServerMu.Lock()
	defer e.apiServerMu.Unlock()
	if e.stopped == nil {
		t.Fatal("k8senv: StartAPIServer: kube-apiserver runs (call StopAPIServer first)")
	}
	// envtest's APIServer can be started again: it keeps its port and its
	// CertDir (ours, never cleaned by envtest), finds the certificates it
	// wrote there and reuses its client CA. It is started, as the first
	// time, from the owner's thread: it dies with the test binary.
	var err error
	e.owner.run(func() { err = e.Envtest.ControlPlane.APIServer.Start() })
	// kube-apiserver's listener (SO_REUSEADDR) binds beside the hold, so
	// the port is released only once the server has it.
	e.releasePortLocked()
	if err != nil {
		t.Fatalf("k8senv: starting kube-apiserver again: %v (its log follows when the test ends)", err)
	}
}

// releasePort closes the hold on a stopped kube-apiserver's port, if any.
func (e *Env) releasePort() {
	e.apiServerMu.Lock()
	defer e.apiServerMu.Unlock()
	e.releasePortLocked()
}

func (e *Env) releasePortLocked() {
	if e.stopped != nil {
		e.stopped.close()
		e.stopped = nil
	}
}

// portHold is a TCP socket bound to a port, never listening. While
// kube-apiserver is stopped it keeps the port from being handed to anyone
// else (no autobind, for an outgoing connection or a listener on port 0,
// picks a port that has a bound socket), so kube-apiserver can bind it
// again, while a connection to it is refused as to a stopped server. With
// SO_REUSEADDR on both sides, kube-apiserver binds it despite the hold
// (socket(7): only an active listener blocks such a bind), and despite the
// TIME_WAIT connections it left behind.
type portHold struct {
	fd int
}

func holdPort(host, port string) (*portHold, error) {
	addr, err := netip.ParseAddr(host)
	if err != nil || !addr.Is4() {
		return nil, fmt.Errorf("address %q is not an IPv4 address", host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return nil, fmt.Errorf("port %q is not a TCP port", port)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("SO_REUSEADDR: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: p, Addr: addr.As4()}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("bind %s: %w", net.JoinHostPort(host, port), err)
	}
	return &portHold{fd: fd}, nil
}

func (h *portHold) close() { _ = unix.Close(h.fd) }
