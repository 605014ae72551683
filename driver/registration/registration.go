package registration

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/clock"

	"github.com/keymount/keymount/internal/grpcrecover"
	"github.com/keymount/keymount/internal/unixsocket"
)

// csiVersions are the CSI spec versions the driver serves, as kubelet asks.
var csiVersions = []string{"1.0.0"}

// DefaultCheckInterval is how often Serve checks that its socket is still there.
const DefaultCheckInterval = 10 * time.Second

// Config says what to register and where.
type Config struct {
	// DriverName is the CSI driver name.
	DriverName string
	// Endpoint is the driver's CSI socket as kubelet sees it (on the host),
	// such as /var/lib/kubelet/plugins/csi-secrets-store/csi.sock.
	Endpoint string
	// Dir is kubelet's plugin registration directory as the driver sees it
	// (kubelet's /var/lib/kubelet/plugins_registry).
	Dir string
	// CheckInterval is how often the socket's presence is checked;
	// DefaultCheckInterval when zero.
	CheckInterval time.Duration
	// Clock ticks the socket checks; the real clock when nil.
	Clock clock.WithTicker
}

// SocketPath is where Serve puts the registration socket: kubelet's naming,
// <dir>/<driver name>-reg.sock.
func (c Config) SocketPath() string {
	return filepath.Join(c.Dir, c.DriverName+"-reg.sock")
}

func (c *Config) validate() error {
	var errs []error
	if c.DriverName == "" {
		errs = append(errs, errors.New("registration needs the driver name"))
	}
	if !filepath.IsAbs(c.Endpoint) {
		errs = append(errs, fmt.Errorf("kubelet registration path %q must be an absolute path: set --kubelet-registration-path", c.Endpoint))
	}
	if !filepath.IsAbs(c.Dir) {
		errs = append(errs, fmt.Errorf("plugin registration dir %q must be an absolute path: set --plugin-registration-dir", c.Dir))
	}
	if c.CheckInterval <= 0 {
		c.CheckInterval = DefaultCheckInterval
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return errors.Join(errs...)
}

// server answers kubelet's plugin watcher.
type server struct {
	registerapi.UnimplementedRegistrationServer
	cfg    Config
	status *Status
}

// GetInfo tells kubelet what the plugin is.
func (s *server) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.cfg.DriverName,
		Endpoint:          s.cfg.Endpoint,
		SupportedVersions: csiVersions,
	}, nil
}

// NotifyRegistrationStatus logs kubelet's answer and records it in the
// Status.
func (s *server) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	s.status.answered(st.GetPluginRegistered(), st.GetError())
	if st.GetPluginRegistered() {
		klog.InfoS("registered with kubelet", "driver", s.cfg.DriverName, "endpoint", s.cfg.Endpoint)
	} else {
		klog.ErrorS(errors.New(st.GetError()), "kubelet refused the registration", "driver", s.cfg.DriverName,
			"endpoint", s.cfg.Endpoint)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Serve serves the registration socket until ctx is done, creating it again
// whenever it disappears, and keeps status (when not nil) up to date.
func Serve(ctx context.Context, cfg Config, status *Status) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if status == nil {
		status = &Status{}
	}
	status.start(cfg.SocketPath())
	for {
		gone, err := serveOnce(ctx, cfg, status)
		if err != nil || !gone {
			return err
		}
		klog.InfoS("registration socket disappeared, creating it again", "socket", cfg.SocketPath())
	}
}

// serveOnce serves one socket until ctx is done (gone=false) or the socket
// is no longer at its path (gone=true).
func serveOnce(ctx context.Context, cfg Config, status *Status) (gone bool, err error) {
	nl, err := unixsocket.Listen(cfg.SocketPath())
	if err != nil {
		return false, fmt.Errorf("registration socket: %w", err)
	}
	l, ok := nl.(*unixsocket.Listener)
	if !ok {
		_ = nl.Close()
		return false, errors.New("registration socket: unexpected listener type")
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcrecover.UnaryServerInterceptor()))
	registerapi.RegisterRegistrationServer(srv, &server{cfg: cfg, status: status})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer srv.Stop() // closes l, which removes the socket only if it is still ours
	status.setListener(l)
	defer status.setListener(nil)

	ticker := cfg.Clock.NewTicker(cfg.CheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case err := <-served:
			return false, fmt.Errorf("serve registration: %w", err)
		case <-ticker.C():
			if !l.Present() {
				return true, nil
			}
		}
	}
}
