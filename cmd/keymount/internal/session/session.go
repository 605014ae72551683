package session

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/provider/providerclient"
)

// kubeletDir is the state directory's subdirectory standing in for
// kubelet's root directory.
const kubeletDir = "kubelet"

// maxSocketPath is the longest path a unix socket address holds (sun_path
// is 108 bytes including the terminating NUL).
const maxSocketPath = 107

// Config is what a Session needs to run the pipeline.
type Config struct {
	// Version is reported by the in-process driver and provider.
	Version string
	// StateDir holds each volume's tmpfs and record, and the private
	// kubelet layout (StateDir/kubelet) the driver publishes into. Publish
	// and unpublish of one volume must use the same StateDir. It must be
	// absolute.
	StateDir string
	// TmpfsSize caps each volume's tmpfs, in bytes; zero means
	// volume.DefaultSizeBytes.
	TmpfsSize int64
	// Classes resolves the classes volumes name: from manifest files, or
	// from an API server for a dry run against a cluster. Nil resolves none,
	// enough for a session that only unpublishes.
	Classes class.Resolver
	// ProviderDir is the main provider socket directory.
	ProviderDir string
	// LocalRoot, when set, serves the local provider in-process from this
	// directory; its socket directory is searched before ProviderDir.
	LocalRoot string
	// ProviderTimeout is the deadline of one provider call; zero means the
	// provider client's default.
	ProviderTimeout time.Duration
}

// Session is an in-process driver, and optionally a local provider, with a
// CSI client connected to the driver.
type Session struct {
	tmp         string
	kubeletRoot string // the private kubelet root dir, StateDir/kubelet
	volumes     *volume.Manager
	providers   *providerclient.Client
	conn        *grpc.ClientConn
	node        csi.NodeClient

	stop context.CancelFunc
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// Start starts the servers of a session. Close it when done.
func Start(cfg Config) (*Session, error) {
	if cfg.TmpfsSize == 0 {
		cfg.TmpfsSize = volume.DefaultSizeBytes
	}
	if cfg.Classes == nil {
		cfg.Classes = &class.FileResolver{}
	}
	volumes, err := driver.NewVolumeManager(cfg.StateDir, cfg.TmpfsSize)
	if err != nil {
		return nil, err
	}
	tmp, err := shortTempDir()
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Session{tmp: tmp, kubeletRoot: filepath.Join(cfg.StateDir, kubeletDir), volumes: volumes, stop: stop}
	if err := s.start(ctx, cfg); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// start starts the local provider when asked for, then the driver.
func (s *Session) start(ctx context.Context, cfg Config) error {
	dirs := []string{cfg.ProviderDir}
	if cfg.LocalRoot != "" {
		dir, err := s.startLocalProvider(ctx, cfg)
		if err != nil {
			return err
		}
		dirs = append([]string{dir}, dirs...)
	}
	return s.startDriver(ctx, cfg, dirs)
}

// startDriver serves the node plugin on <tmp>/csi.sock and connects the
// CSI client to it.
func (s *Session) startDriver(ctx context.Context, cfg Config, providerDirs []string) error {
	providers, err := providerclient.New(providerclient.Config{Dirs: providerDirs, Timeout: cfg.ProviderTimeout})
	if err != nil {
		return err
	}
	s.providers = providers
	sock := filepath.Join(s.tmp, "csi.sock")
	d, err := driver.New(driver.Config{
		DriverName:  driver.DefaultDriverName,
		Version:     cfg.Version,
		NodeID:      nodeID(),
		Endpoint:    "unix://" + sock,
		ProviderDir: cfg.ProviderDir,
		// The driver publishes only into kubelet's layout: the session
		// keeps one of its own and binds the volume onto the user's target.
		KubeletRootDir: s.kubeletRoot,
	}, driver.Deps{
		// No Cluster: a session writes nothing to an API server.
		Classes:   cfg.Classes,
		Providers: providers,
		Volumes:   s.volumes,
	})
	if err != nil {
		return err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listen on driver socket: %w", err)
	}
	s.serve("driver", func() error { return d.Serve(ctx, l) })
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to driver: %w", err)
	}
	s.conn = conn
	s.node = csi.NewNodeClient(conn)
	return nil
}

// serve runs one server in the background; Close collects its error.
func (s *Session) serve(name string, run func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := run(); err != nil {
			s.mu.Lock()
			s.errs = append(s.errs, fmt.Errorf("in-process %s: %w", name, err))
			s.mu.Unlock()
		}
	}()
}

// Close disconnects, stops the servers, waits for them and removes the
// temporary sockets. Mounted volumes are left as they are.
func (s *Session) Close() error {
	var errs []error
	if s.conn != nil {
		errs = append(errs, s.conn.Close())
	}
	s.stop()
	s.wg.Wait()
	if s.providers != nil {
		errs = append(errs, s.providers.Close())
	}
	s.mu.Lock()
	errs = append(errs, s.errs...)
	s.mu.Unlock()
	errs = append(errs, os.RemoveAll(s.tmp))
	return errors.Join(errs...)
}

// shortTempDir creates a private directory whose socket paths fit a unix
// socket address, falling back to /tmp when $TMPDIR is too long.
func shortTempDir() (string, error) {
	const longest = "/" + localSocketDir + "/" + localName + ".sock" // the longest socket path inside it
	dir, err := os.MkdirTemp("", "keymount-")
	if err != nil {
		return "", fmt.Errorf("create session dir: %w", err)
	}
	if len(dir)+len(longest) <= maxSocketPath {
		return dir, nil
	}
	_ = os.Remove(dir)
	dir, err = os.MkdirTemp("/tmp", "keymount-")
	if err != nil {
		return "", fmt.Errorf("create session dir: %w", err)
	}
	return dir, nil
}

func nodeID() string {
	if host, err := os.Hostname(); err == nil && host != "" {
		return host
	}
	return "keymount-cli"
}
