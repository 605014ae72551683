package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/keymount/keymount/internal/grpcrecover"
	"github.com/keymount/keymount/internal/unixsocket"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/v1alpha1"
)

const (
	// socketMode lets the driver (root or the socket's group) connect.
	socketMode os.FileMode = 0o660
	// maxSocketPath is the longest path a unix socket address holds
	// (sun_path is 108 bytes including the terminating NUL).
	maxSocketPath = 107
	// gracefulStopTimeout bounds how long in-flight calls may finish after
	// the context is done.
	gracefulStopTimeout = 10 * time.Second
)

// nameRE is the provider name rule of the Secrets Store CSI driver.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{0,30}$`)

// Config configures a Server.
type Config struct {
	// Name of the provider, as in SecretProviderClass spec.provider: letters,
	// digits, '_' and '-', at most 30.
	Name string
	// Version of the provider binary, reported by the Version call.
	Version string
	// SocketDir is the directory the driver searches for provider sockets,
	// /var/run/secrets-store-csi-providers by default. Only Serve needs it.
	SocketDir string
	// Unpublisher, when set, is served as keymount's provider extension
	// (keymount.provider.v1.VolumeLifecycle) on the same socket: keymount's
	// driver tells it of every volume it unmounted. Nil: not served.
	Unpublisher Unpublisher
	// Pusher, when set, is served as keymount's push extension
	// (keymount.provider.v1.SecretPusher) on the same socket:
	// keymount-controller writes PushSecrets' values through it. Nil: not
	// served.
	Pusher Pusher
}

// Server serves a Provider over the v1alpha1 gRPC API.
type Server struct {
	cfg      Config
	provider Provider
}

// New validates cfg and returns a Server for p.
func New(cfg Config, p Provider) (*Server, error) {
	if cfg.Name == "" {
		return nil, errors.New("provider name is empty")
	}
	if !nameRE.MatchString(cfg.Name) {
		return nil, fmt.Errorf("provider name %q must match %s", cfg.Name, nameRE)
	}
	if p == nil {
		return nil, errors.New("provider is nil")
	}
	s := &Server{cfg: cfg, provider: p}
	if cfg.SocketDir != "" {
		if path := s.SocketPath(); len(path) > maxSocketPath {
			return nil, fmt.Errorf("socket path %s is %d bytes, more than a unix socket allows (%d)", path, len(path), maxSocketPath)
		}
	}
	return s, nil
}

// SocketPath is where Serve listens: <SocketDir>/<Name>.sock.
func (s *Server) SocketPath() string { return s.cfg.SocketPath() }

// SocketPath is where a Server of c listens: <SocketDir>/<Name>.sock.
func (c Config) SocketPath() string {
	return filepath.Join(c.SocketDir, c.Name+".sock")
}

// Serve listens on SocketPath and serves until ctx is done. A stale socket
// left by a previous run is replaced; if another process still serves on
// SocketPath, Serve fails with an error wrapping unixsocket.ErrInUse and
// leaves that socket alone. When ctx is done it lets in-flight calls finish
// for a bounded time and removes its socket, unless a successor has
// replaced it.
func (s *Server) Serve(ctx context.Context) (err error) {
	if s.cfg.SocketDir == "" {
		return errors.New("socket directory is not set; use ServeListener to serve on a listener of your own")
	}
	path := s.SocketPath()
	l, err := unixsocket.Listen(path)
	if err != nil {
		return err
	}
	// gRPC closes l when it stops; this Close reports what that one did
	// (it removes the socket) and closes l on the early return below.
	defer func() {
		if cerr := l.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close socket: %w", cerr))
		}
	}()
	if err := os.Chmod(path, socketMode); err != nil {
		return fmt.Errorf("set socket mode: %w", err)
	}
	return s.ServeListener(ctx, l)
}

// ServeListener serves on l until ctx is done, then stops gracefully within a
// bound. It closes l. A panic in a call becomes an Internal error for that
// call and one log line; the server keeps serving.
//
// Beside the provider's services it serves gRPC's standard health service
// (grpc.health.v1.Health) on the same socket: SERVING while it serves,
// NOT_SERVING once it is stopping. The provider binaries' --probe (the
// containers' liveness and readiness probes) asks it.
func (s *Server) ServeListener(ctx context.Context, l net.Listener) error {
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcrecover.UnaryServerInterceptor(), logFailures(s.cfg.Name)))
	v1alpha1.RegisterCSIDriverProviderServer(gs, &service{cfg: s.cfg, provider: s.provider})
	if s.cfg.Unpublisher != nil {
		keymountv1.RegisterVolumeLifecycleServer(gs, &lifecycle{u: s.cfg.Unpublisher})
	}
	if s.cfg.Pusher != nil {
		keymountv1.RegisterSecretPusherServer(gs, &pusher{p: s.cfg.Pusher})
	}
	hs := health.NewServer() // "" is SERVING
	healthgrpc.RegisterHealthServer(gs, hs)

	served := make(chan error, 1)
	go func() { served <- gs.Serve(l) }()

	select {
	case err := <-served:
		gs.Stop()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	hs.Shutdown() // NOT_SERVING while in-flight calls finish
	stopGracefully(gs, gracefulStopTimeout)
	// ErrServerStopped: ctx ended before gs.Serve started, and the stop
	// above came first; nothing failed.
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// stopGracefully waits up to timeout for in-flight calls, then cancels them.
func stopGracefully(gs *grpc.Server, timeout time.Duration) {
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		gs.Stop()
		<-stopped
	}
}
