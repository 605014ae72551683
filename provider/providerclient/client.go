package providerclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/v1alpha1"
)

const (
	// DefaultTimeout is the per-call deadline when Config.Timeout is zero:
	// shorter than the ~2 minutes kubelet gives a CSI call.
	DefaultTimeout = 90 * time.Second
	// DefaultMaxRecvMsgSize is the gRPC receive limit when
	// Config.MaxRecvMsgSize is zero (gRPC's own default).
	DefaultMaxRecvMsgSize = 4 << 20

	// apiVersion is the VersionRequest.version the driver sends.
	apiVersion = "v1alpha1"
	// authority is the :authority every call carries; some providers reject
	// anything else.
	authority = "localhost"
)

// serviceConfig retries a call the provider could not take (socket present,
// provider restarting) a few times within the call's deadline.
const serviceConfig = `{"methodConfig": [{
	"name": [{"service": "v1alpha1.CSIDriverProvider"}],
	"retryPolicy": {
		"maxAttempts": 3,
		"initialBackoff": "0.1s",
		"maxBackoff": "1s",
		"backoffMultiplier": 2,
		"retryableStatusCodes": ["UNAVAILABLE"]
	}
}]}`

// Config configures a Client.
type Config struct {
	// Dirs are the absolute directories searched for <provider>.sock, in
	// order: the additional provider paths first, then the main provider
	// directory. The first socket found wins.
	Dirs []string
	// Timeout is the per-call deadline, applied as the earlier of the
	// caller's deadline and now+Timeout. Zero means DefaultTimeout.
	Timeout time.Duration
	// MaxRecvMsgSize is the largest provider response accepted, in bytes.
	// Zero means DefaultMaxRecvMsgSize.
	MaxRecvMsgSize int
}

// Client calls provider plugins. It is safe for concurrent use.
type Client struct {
	dirs           []string
	timeout        time.Duration
	maxRecvMsgSize int

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // by socket path
	closed bool

	// found holds the name of every provider whose socket SocketPath
	// found since New (name to struct{}): at most one per socket file.
	found sync.Map
}

// New validates cfg, fills in its defaults and returns a Client. It does not
// connect to anything.
func New(cfg Config) (*Client, error) {
	if len(cfg.Dirs) == 0 {
		return nil, errors.New("providerclient: at least one provider directory is required")
	}
	dirs := make([]string, 0, len(cfg.Dirs))
	for _, d := range cfg.Dirs {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("providerclient: provider directory %q is not an absolute path", d)
		}
		dirs = append(dirs, filepath.Clean(d))
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("providerclient: negative timeout %s", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRecvMsgSize < 0 {
		return nil, fmt.Errorf("providerclient: negative max receive size %d", cfg.MaxRecvMsgSize)
	}
	if cfg.MaxRecvMsgSize == 0 {
		cfg.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	return &Client{
		dirs:           dirs,
		timeout:        cfg.Timeout,
		maxRecvMsgSize: cfg.MaxRecvMsgSize,
		conns:          make(map[string]*grpc.ClientConn),
	}, nil
}

// Mount asks provider for the objects req describes. A response carrying an
// error code is returned as a *ProviderError, a response without
// object_version as ErrInvalidResponse. File paths are not checked here.
func (c *Client) Mount(ctx context.Context, provider string, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	if req == nil {
		return nil, errors.New("providerclient: nil mount request")
	}
	cc, err := c.connFor(provider)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := v1alpha1.NewCSIDriverProviderClient(cc).Mount(ctx, req)
	if err != nil {
		return nil, c.callError(ctx, provider, "Mount", err)
	}
	if code := resp.GetError().GetCode(); code != "" {
		return nil, &ProviderError{Provider: provider, Code: codeFromName(code), ErrorCode: bound(code, maxErrorCodeLen)}
	}
	if len(resp.GetObjectVersion()) == 0 {
		return nil, fmt.Errorf("%w from %q: no object_version; a provider must report every object it mounted",
			ErrInvalidResponse, provider)
	}
	return resp, nil
}

// Version asks provider which runtime it is and which API version it speaks.
func (c *Client) Version(ctx context.Context, provider string) (*v1alpha1.VersionResponse, error) {
	cc, err := c.connFor(provider)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := v1alpha1.NewCSIDriverProviderClient(cc).Version(ctx, &v1alpha1.VersionRequest{Version: apiVersion})
	if err != nil {
		return nil, c.callError(ctx, provider, "Version", err)
	}
	return resp, nil
}

// Unpublish tells provider, through keymount's provider extension
// (keymount.provider.v1.VolumeLifecycle, served on the same socket), that a
// volume it served is unmounted. A provider that does not serve the
// extension (every upstream provider) fails it with codes.Unimplemented.
func (c *Client) Unpublish(ctx context.Context, provider string, req *keymountv1.UnpublishRequest) error {
	cc, err := c.connFor(provider)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := keymountv1.NewVolumeLifecycleClient(cc).Unpublish(ctx, req); err != nil {
		return c.callError(ctx, provider, "Unpublish", err)
	}
	return nil
}

// Push asks provider, through keymount's push extension
// (keymount.provider.v1.SecretPusher, served on the same socket), to write
// req's items into its store. A provider that does not serve it (every
// upstream provider) fails it with codes.Unimplemented. A response with
// another number of results than items is ErrInvalidResponse.
func (c *Client) Push(ctx context.Context, provider string, req *keymountv1.PushRequest) ([]*keymountv1.ItemResult, error) {
	cc, err := c.connFor(provider)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := keymountv1.NewSecretPusherClient(cc).Push(ctx, req)
	if err != nil {
		return nil, c.callError(ctx, provider, "Push", err)
	}
	return results(provider, resp, len(req.GetItems()))
}

// Remove asks provider to delete what keymount wrote for req's items (a
// PushSecret's deletionPolicy Delete), as Push.
func (c *Client) Remove(ctx context.Context, provider string, req *keymountv1.RemoveRequest) ([]*keymountv1.ItemResult, error) {
	cc, err := c.connFor(provider)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := keymountv1.NewSecretPusherClient(cc).Remove(ctx, req)
	if err != nil {
		return nil, c.callError(ctx, provider, "Remove", err)
	}
	return results(provider, resp, len(req.GetItems()))
}

func results(provider string, resp *keymountv1.PushResponse, items int) ([]*keymountv1.ItemResult, error) {
	if got := len(resp.GetResults()); got != items {
		return nil, fmt.Errorf("%w from %q: %d results for %d items", ErrInvalidResponse, provider, got, items)
	}
	return resp.GetResults(), nil
}

// Close closes every connection. Calls after Close fail with ErrClosed;
// calls in flight end with codes.Canceled.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for path, cc := range c.conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close connection to %s: %w", path, err))
		}
		delete(c.conns, path)
	}
	return errors.Join(errs...)
}

// connFor discovers provider's socket and returns the connection to it,
// creating the connection on first use.
func (c *Client) connFor(provider string) (*grpc.ClientConn, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	path, err := c.SocketPath(provider)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if cc, ok := c.conns[path]; ok {
		return cc, nil
	}
	cc, err := c.dial(path)
	if err != nil {
		return nil, fmt.Errorf("provider %q: connect to %s: %w", provider, path, err)
	}
	c.conns[path] = cc
	klog.V(4).InfoS("created provider connection", "provider", provider, "socket", path)
	return cc, nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// dial creates a lazy connection to the socket at path. The target is a
// passthrough name and a dialer holds the path, so a directory name is never
// parsed as a URL.
func (c *Client) dial(path string) (*grpc.ClientConn, error) {
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
	return grpc.NewClient("passthrough:///"+authority,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer),
		grpc.WithAuthority(authority),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.maxRecvMsgSize)),
		grpc.WithDefaultServiceConfig(serviceConfig),
		// A local socket is cheap to retry: keep reconnect backoff short so a
		// restarted provider is reachable again within a second or two.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 20 * time.Second,
		}),
	)
}
