package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/providerclient"
	"github.com/keymount/keymount/tests/poll"
)

// ProviderName is the spec.provider of classes served by the harness's
// local provider; its socket is <ProviderDir>/local.sock.
const ProviderName = "local"

// startTimeout bounds how long a driver or provider may take to come up or
// to stop.
const startTimeout = 15 * time.Second

// Options tune a Harness. The zero value is a sensible node.
type Options struct {
	// DriverName is reported by GetPluginInfo; driver.DefaultDriverName when empty.
	DriverName string
	// NodeID is reported by NodeGetInfo; "keymount-test-node" when empty.
	NodeID string
	// TmpfsSize caps each volume's tmpfs; volume.DefaultSizeBytes when zero.
	TmpfsSize int64
	// ProviderTimeout is the driver's deadline for one provider call; 10s when zero.
	ProviderTimeout time.Duration
	// Namespace of the pods the harness makes up; "default" when empty.
	Namespace string
	// Cluster, when set, gives every driver the harness starts (Start,
	// RestartDriver) a cluster side, as a node with an API server has: it
	// is called before that driver starts, with a context that ends when
	// the driver stops, and returns the driver's Cluster and the resolver
	// it reads classes with (nil keeps the class directory). Nil: no API
	// server, classes from ClassDir.
	Cluster func(ctx context.Context) (driver.Cluster, class.Resolver, error)
	// Refresh is the driver's refresh policy; nil refreshes on every
	// republish.
	Refresh driver.RefreshPolicy
	// Clock is the driver's clock; the real one when nil.
	Clock clock.PassiveClock
}

func (o *Options) defaults() {
	if o.DriverName == "" {
		o.DriverName = driver.DefaultDriverName
	}
	if o.NodeID == "" {
		o.NodeID = "keymount-test-node"
	}
	if o.TmpfsSize == 0 {
		o.TmpfsSize = volume.DefaultSizeBytes
	}
	if o.ProviderTimeout == 0 {
		o.ProviderTimeout = 10 * time.Second
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
}

// Harness is a running node: the local provider and the driver, each on its
// own unix socket, over directories private to one test.
//
// Methods that can fail call Fatalf on the testing.TB given to Start, so
// call them from the goroutine of that test (or benchmark), not from its
// subtests; RPCs go through Node and Identity and return their errors.
type Harness struct {
	// Node and Identity are clients of the driver's CSI socket. RestartDriver
	// replaces them: read the fields again after a restart.
	Node     csi.NodeClient
	Identity csi.IdentityClient

	// Dir is the temporary directory holding everything below.
	Dir string
	// Endpoint is the driver's CSI endpoint, unix:///<Dir>/csi.sock.
	Endpoint string
	// Root is the local provider's root: WriteObject puts objects there.
	Root string
	// ClassDir holds the SecretProviderClass manifests WriteClass writes.
	ClassDir string
	// ProviderDir is the provider socket directory the driver searches.
	ProviderDir string
	// StateDir is the driver's state directory (volume tmpfs mounts, records).
	StateDir string
	// TargetBase stands in for kubelet's root directory (/var/lib/kubelet).
	TargetBase string

	tb      testing.TB
	opts    Options
	volumes *volume.Manager // paths only (Lookup); each driver has its own
	drv     *runningDriver
	prov    *runningProvider
}

// Start starts the local provider and the driver and registers a cleanup
// that stops both, unmounts everything left under Dir and removes it. It
// fails the test, never skips it, when the node cannot be started (for
// example when not running as root).
func Start(tb testing.TB, opts Options) *Harness {
	tb.Helper()
	opts.defaults()
	if os.Geteuid() != 0 {
		tb.Fatalf("the keymount harness mounts tmpfs volumes and must run as root (euid %d)", os.Geteuid())
	}
	dir, err := sockettest.MkdirTemp("km") // short, whatever TMPDIR: it holds the sockets
	if err != nil {
		tb.Fatalf("create harness dir: %v", err)
	}
	h := &Harness{
		Dir:         dir,
		Endpoint:    "unix://" + filepath.Join(dir, "csi.sock"),
		Root:        filepath.Join(dir, "root"),
		ClassDir:    filepath.Join(dir, "classes"),
		ProviderDir: filepath.Join(dir, "providers"),
		StateDir:    filepath.Join(dir, "state"),
		TargetBase:  filepath.Join(dir, "kubelet"),
		tb:          tb,
		opts:        opts,
	}
	tb.Cleanup(h.cleanup)
	for _, d := range []string{h.Root, h.ClassDir, h.ProviderDir, h.StateDir, h.TargetBase} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			tb.Fatalf("create %s: %v", d, err)
		}
	}
	if h.volumes, err = driver.NewVolumeManager(h.StateDir, opts.TmpfsSize); err != nil {
		tb.Fatalf("volume manager: %v", err)
	}
	if h.prov, err = startProvider(h.ProviderDir, h.Root); err != nil {
		tb.Fatalf("start local provider: %v", err)
	}
	if h.drv, err = h.startDriver(); err != nil {
		tb.Fatalf("start driver: %v", err)
	}
	h.setClients()
	return h
}

// RestartDriver stops the driver and starts a new one with the same
// configuration and directories. Nothing is carried over in memory, so
// whatever works afterwards works from the state on disk and in the mount
// table alone.
func (h *Harness) RestartDriver() {
	h.tb.Helper()
	if err := h.drv.stop(); err != nil {
		h.tb.Fatalf("stop driver: %v", err)
	}
	h.drv = nil
	drv, err := h.startDriver()
	if err != nil {
		h.tb.Fatalf("restart driver: %v", err)
	}
	h.drv = drv
	h.setClients()
}

// VolumeDir is the driver's private tmpfs mount point of volumeID.
func (h *Harness) VolumeDir(volumeID string) string {
	return h.volumes.Lookup(volumeID).Dir
}

// Record returns the driver's record of volumeID, nil when there is none.
func (h *Harness) Record(volumeID string) (*volume.Record, error) {
	return h.volumes.Lookup(volumeID).LoadRecord()
}

// DiscardLogs sends klog output (the driver's and the provider's) nowhere.
// Benchmarks call it once; tests keep the logs, which go test shows for a
// failing package.
func DiscardLogs() {
	klog.SetLogger(logr.Discard())
}

func (h *Harness) setClients() {
	h.Node = csi.NewNodeClient(h.drv.conn)
	h.Identity = csi.NewIdentityClient(h.drv.conn)
}

func (h *Harness) cleanup() {
	var errs []error
	if h.drv != nil {
		errs = append(errs, h.drv.stop())
	}
	if h.prov != nil {
		errs = append(errs, h.prov.stop())
	}
	n, err := UnmountAll(h.Dir)
	errs = append(errs, err)
	if n > 0 {
		h.tb.Logf("harness: unmounted %d mount(s) left under %s", n, h.Dir)
	}
	if err == nil {
		errs = append(errs, os.RemoveAll(h.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		h.tb.Errorf("harness cleanup: %v", err)
	}
}

// runningDriver is one driver instance serving on the harness endpoint.
type runningDriver struct {
	d         *driver.Driver
	cancel    context.CancelFunc
	done      chan error
	conn      *grpc.ClientConn
	providers *providerclient.Client
}

func (h *Harness) startDriver() (*runningDriver, error) {
	vols, err := driver.NewVolumeManager(h.StateDir, h.opts.TmpfsSize)
	if err != nil {
		return nil, err
	}
	pc, err := providerclient.New(providerclient.Config{Dirs: []string{h.ProviderDir}, Timeout: h.opts.ProviderTimeout})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	deps, err := h.driverDeps(ctx, pc, vols)
	if err != nil {
		cancel()
		return nil, errors.Join(err, pc.Close())
	}
	d, err := driver.New(driver.Config{
		DriverName:  h.opts.DriverName,
		Version:     "test",
		NodeID:      h.opts.NodeID,
		Endpoint:    h.Endpoint,
		ProviderDir: h.ProviderDir,
		// TargetBase stands in for kubelet's root directory.
		KubeletRootDir: h.TargetBase,
	}, deps)
	if err != nil {
		cancel()
		return nil, errors.Join(err, pc.Close())
	}
	r := &runningDriver{d: d, cancel: cancel, done: make(chan error, 1), providers: pc}
	go func() { r.done <- d.Run(ctx) }()

	sock := h.SocketPath()
	if err := waitForSocket(sock, r.done); err != nil {
		return nil, errors.Join(err, r.stop())
	}
	r.conn, err = Dial(sock)
	if err != nil {
		return nil, errors.Join(err, r.stop())
	}
	if err := waitReady(csi.NewIdentityClient(r.conn), r.done); err != nil {
		return nil, errors.Join(err, r.stop())
	}
	return r, nil
}

// driverDeps returns a driver's collaborators: classes from ClassDir and no
// cluster side, or the cluster side Options.Cluster starts for ctx.
func (h *Harness) driverDeps(ctx context.Context, pc *providerclient.Client, vols *volume.Manager) (driver.Deps, error) {
	deps := driver.Deps{
		Classes:   &class.FileResolver{Paths: []string{h.ClassDir}},
		Providers: pc,
		Volumes:   vols,
		Refresh:   h.opts.Refresh,
		Clock:     h.opts.Clock,
	}
	if h.opts.Cluster == nil {
		return deps, nil
	}
	cl, classes, err := h.opts.Cluster(ctx)
	if err != nil {
		return driver.Deps{}, fmt.Errorf("start the cluster side: %w", err)
	}
	deps.Cluster = cl
	if classes != nil {
		deps.Classes = classes
	}
	return deps, nil
}

// Driver is the running driver, for what kubelet does not call (triggers).
func (h *Harness) Driver() *driver.Driver {
	return h.drv.d
}

// SocketPath is the filesystem path of the driver's CSI socket.
func (h *Harness) SocketPath() string {
	return filepath.Join(h.Dir, "csi.sock")
}

// Dial connects to a CSI socket the way kubelet does: insecure, authority
// localhost.
func Dial(socket string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"))
}

func (r *runningDriver) stop() error {
	var errs []error
	if r.conn != nil {
		errs = append(errs, r.conn.Close())
	}
	r.cancel()
	select {
	case err := <-r.done:
		errs = append(errs, err)
	case <-time.After(startTimeout):
		errs = append(errs, errors.New("driver did not stop within "+startTimeout.String()))
	}
	errs = append(errs, r.providers.Close())
	return errors.Join(errs...)
}

// waitForSocket waits until a server has created its socket file, or its
// Serve/Run has returned (failed).
func waitForSocket(path string, done <-chan error) error {
	err := poll.Wait(context.Background(), startTimeout, func(context.Context) (bool, error) {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return true, nil
		}
		select {
		case err := <-done:
			return false, fmt.Errorf("server stopped before listening on %s: %w", path, err)
		default:
		}
		return false, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no socket at %s: %w", path, err)
	}
	return err
}

// waitReady polls Probe until the driver says it is ready.
func waitReady(id csi.IdentityClient, done <-chan error) error {
	var last error
	err := poll.Wait(context.Background(), startTimeout, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := id.Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil && resp.GetReady().GetValue() {
			return true, nil
		}
		last = err
		select {
		case err := <-done:
			return false, fmt.Errorf("driver stopped before it was ready: %w", err)
		default:
		}
		return false, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("driver not ready: %w (last probe error: %w)", err, last)
	}
	return err
}
