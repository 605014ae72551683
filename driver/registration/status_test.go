package registration

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/poll"
)

// kubeletAnswers sends kubelet's answer to the plugin on socket.
func kubeletAnswers(t *testing.T, socket string, registered bool, kubeletErr string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	st := &registerapi.RegistrationStatus{PluginRegistered: registered, Error: kubeletErr}
	if _, err := registerapi.NewRegistrationClient(conn).NotifyRegistrationStatus(t.Context(), st, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("NotifyRegistrationStatus: %v", err)
	}
}

// servedStatus runs Serve with a fake clock until the test ends; the clock
// ticks the socket checks only when the test steps it.
func servedStatus(t *testing.T) (Config, *Status, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	cfg := Config{
		DriverName:    "secrets-store.csi.k8s.io",
		Endpoint:      "/var/lib/kubelet/plugins/csi-secrets-store/csi.sock",
		Dir:           filepath.Join(sockettest.Dir(t), "plugins_registry"),
		CheckInterval: time.Second,
		Clock:         clk,
	}
	status := &Status{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, status) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return cfg, status, clk
}

// checkAfterTick steps clk past the check interval once the n-th socket's
// ticker exists, so Serve looks for its socket.
func checkAfterTick(t *testing.T, clk *clocktesting.FakeClock, n int, interval time.Duration) {
	t.Helper()
	poll.UntilTrue(t, "the socket check's ticker", func() bool { return clk.Waiters() >= n })
	clk.Step(interval)
}

// TestRegistrationStatus walks Status through every transition the liveness
// probe sees, with a real socket and kubelet's real gRPC calls.
func TestRegistrationStatus(t *testing.T) {
	var zero Status
	if err := zero.Check(); err != nil {
		t.Fatalf("Check before Serve started = %v, want nil", err)
	}

	cfg, status, clk := servedStatus(t)
	sock := cfg.SocketPath()
	poll.UntilTrue(t, "the registration socket", func() bool { return socketAt(sock) && status.Check() == nil })
	// kubelet has not answered yet: healthy, however long it takes.

	kubeletAnswers(t, sock, false, "plugin version not supported")
	err := status.Check()
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), sock) ||
		!strings.Contains(err.Error(), "plugin version not supported") {
		t.Fatalf("Check after a refusal = %v, want ErrRefused naming %s and kubelet's error", err, sock)
	}

	kubeletAnswers(t, sock, false, "")
	if err := status.Check(); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no error given") {
		t.Fatalf("Check after a refusal without an error = %v", err)
	}

	kubeletAnswers(t, sock, true, "")
	if err := status.Check(); err != nil {
		t.Fatalf("Check after registration = %v, want nil", err)
	}

	// The socket disappears: unhealthy at once, healthy once Serve has
	// noticed (on its next tick) and created it again.
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if err := status.Check(); !errors.Is(err, ErrSocketMissing) || !strings.Contains(err.Error(), sock) {
		t.Fatalf("Check with the socket removed = %v, want ErrSocketMissing naming %s", err, sock)
	}
	checkAfterTick(t, clk, 1, cfg.CheckInterval)
	poll.UntilTrue(t, "the socket to be created again", func() bool { return socketAt(sock) && status.Check() == nil })

	// A refusal outlives a re-created socket: only kubelet's next answer
	// clears it.
	kubeletAnswers(t, sock, false, "refused again")
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	checkAfterTick(t, clk, 2, cfg.CheckInterval)
	poll.UntilTrue(t, "the socket to be created again", func() bool { return socketAt(sock) && !errors.Is(status.Check(), ErrSocketMissing) })
	if err := status.Check(); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "refused again") {
		t.Fatalf("Check on the re-created socket after a refusal = %v, want ErrRefused", err)
	}
	kubeletAnswers(t, sock, true, "")
	if err := status.Check(); err != nil {
		t.Fatalf("Check after kubelet registered the re-created socket = %v, want nil", err)
	}
}

// TestRegistrationStatusReplacedSocket: a socket someone else put at the path
// is not the driver's registration socket.
func TestRegistrationStatusReplacedSocket(t *testing.T) {
	cfg, status, _ := servedStatus(t)
	sock := cfg.SocketPath()
	poll.UntilTrue(t, "the registration socket", func() bool { return socketAt(sock) && status.Check() == nil })
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := status.Check(); !errors.Is(err, ErrSocketMissing) {
		t.Fatalf("Check with another file at the socket path = %v, want ErrSocketMissing", err)
	}
}
