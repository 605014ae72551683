package providercmd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/poll"
)

// generous is the probe timeout of the cases that must pass: far more than
// an answer on a loaded machine takes.
const generous = time.Minute

// serveProvider serves nopProvider as Serve does on a socket of its own and
// returns its config and a func stopping it (waiting until it stopped).
func serveProvider(t *testing.T) (server.Config, func()) {
	t.Helper()
	cfg := server.Config{Name: "t", Version: "v1", SocketDir: sockettest.Dir(t)}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, nopProvider{}) }()
	err := poll.Wait(t.Context(), time.Minute, func(context.Context) (bool, error) {
		_, err := os.Stat(cfg.SocketPath())
		return err == nil, nil
	})
	if err != nil {
		cancel()
		t.Fatalf("socket %s never appeared: %v (Serve: %v)", cfg.SocketPath(), err, <-done)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return cfg, stop
}

// TestProbeServingProvider: the probe of a provider that serves exits 0
// and prints nothing.
func TestProbeServingProvider(t *testing.T) {
	cfg, _ := serveProvider(t)
	var out bytes.Buffer
	if code := (Probe{On: true, Timeout: generous}).Run(&out, "keymount-provider-test", cfg); code != 0 || out.Len() != 0 {
		t.Errorf("probe of a serving provider: exit %d, output %q; want 0 and nothing", code, out.String())
	}
}

// TestProbeFailsWithOneLine: a provider that stopped (its socket gone), a
// provider that does not answer (a listener that never accepts, as a
// process frozen by SIGSTOP: the kernel still completes the connection),
// and a socket nobody serves each fail the probe with exit 1 and one line
// naming the binary, the socket and why.
func TestProbeFailsWithOneLine(t *testing.T) {
	stoppedCfg, stop := serveProvider(t)
	stop()

	hung := server.Config{Name: "hung", SocketDir: sockettest.Dir(t)}
	l, err := net.Listen("unix", hung.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })

	stale := server.Config{Name: "stale", SocketDir: sockettest.Dir(t)}
	sl, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale.SocketPath(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	sl.SetUnlinkOnClose(false)
	_ = sl.Close() // the file stays, nothing listens

	for _, tc := range []struct {
		name    string
		cfg     server.Config
		timeout time.Duration
		want    string
	}{
		{"stopped", stoppedCfg, generous, "no provider socket at " + stoppedCfg.SocketPath()},
		{"hung", hung, 200 * time.Millisecond, "the provider on " + hung.SocketPath() + " did not answer its health check within 200ms"},
		{"stale socket", stale, generous, "the provider on " + stale.SocketPath() + " failed its health check: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code := (Probe{On: true, Timeout: tc.timeout}).Run(&out, "keymount-provider-test", tc.cfg)
			line := out.String()
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.HasPrefix(line, "keymount-provider-test: probe: "+tc.want) || strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
				t.Errorf("output %q, want one line starting %q", line, "keymount-provider-test: probe: "+tc.want)
			}
		})
	}
}

// TestCheckNotServing: a server whose health service answers NOT_SERVING
// (a provider stopping) fails the check with ErrNotServing.
func TestCheckNotServing(t *testing.T) {
	path := filepath.Join(sockettest.Dir(t), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthgrpc.HealthCheckResponse_NOT_SERVING)
	healthgrpc.RegisterHealthServer(gs, hs)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	if err := Check(t.Context(), path, generous); !errors.Is(err, ErrNotServing) {
		t.Errorf("Check of a NOT_SERVING server: %v, want ErrNotServing", err)
	}
}

// TestProbeFlags: --probe and --probe-timeout parse into Probe, and a
// timeout that is not positive fails the check naming the flag.
func TestProbeFlags(t *testing.T) {
	var p Probe
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	p.AddFlags(fs)
	if p.On || p.Timeout != DefaultProbeTimeout {
		t.Errorf("defaults: %+v, want off and %s", p, DefaultProbeTimeout)
	}
	if err := fs.Parse([]string{"--probe", "--probe-timeout=2s"}); err != nil {
		t.Fatal(err)
	}
	if !p.On || p.Timeout != 2*time.Second {
		t.Errorf("parsed: %+v, want on and 2s", p)
	}
	if err := Check(t.Context(), "/nonexistent.sock", 0); err == nil || !strings.Contains(err.Error(), "--probe-timeout 0s") {
		t.Errorf("Check with timeout 0: %v, want an error naming --probe-timeout", err)
	}
}
