package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/unixsocket"
	"github.com/keymount/keymount/provider/providerclient"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/poll"
)

// gatedProvider is a provider served over a real unix socket whose Mount
// calls hang until the test opens its gate (a nil gate answers at once),
// and whose Version fails while versionErr is set.
type gatedProvider struct {
	v1alpha1.UnimplementedCSIDriverProviderServer
	gate       chan struct{}
	inFlight   atomic.Int64
	versionErr atomic.Pointer[error]
	versions   atomic.Int64
}

func (p *gatedProvider) Mount(ctx context.Context, _ *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return okResponse(&v1alpha1.File{Path: "f", Mode: 0o644, Contents: []byte("x")}), nil
}

func (p *gatedProvider) Version(context.Context, *v1alpha1.VersionRequest) (*v1alpha1.VersionResponse, error) {
	p.versions.Add(1)
	if err := p.versionErr.Load(); err != nil {
		return nil, *err
	}
	return &v1alpha1.VersionResponse{Version: "v1alpha1", RuntimeName: "gated", RuntimeVersion: "test"}, nil
}

// socketDir returns a short directory for provider sockets: a socket path
// must fit in 108 bytes whatever TMPDIR is, so it is made under /tmp.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "kmf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// serveGated serves p as <dir>/<name>.sock until stop is called or the
// test ends.
func serveGated(t *testing.T, dir, name string, p *gatedProvider) (stop func()) {
	t.Helper()
	l, err := unixsocket.Listen(filepath.Join(dir, name+".sock"))
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	v1alpha1.RegisterCSIDriverProviderServer(s, p)
	go func() { _ = s.Serve(l) }()
	var once sync.Once
	stop = func() { once.Do(s.Stop) }
	t.Cleanup(stop)
	return stop
}

// classFile writes one SecretProviderClass per provider, named after it.
func classFile(t *testing.T, dir string, providers ...string) string {
	t.Helper()
	var doc string
	for _, p := range providers {
		doc += fmt.Sprintf("---\napiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: %s\nspec:\n  provider: %s\n", p, p)
	}
	path := filepath.Join(dir, "classes.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// socketNode is a driver whose providers are real gRPC servers in a socket
// directory, called through the real provider client.
type socketNode struct {
	srv     *nodeServer
	base    string
	sockets string
	classes string
	client  *providerclient.Client
}

func newSocketNode(t *testing.T, cfg Config, providers ...string) *socketNode {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("publish tests mount tmpfs and must run as root")
	}
	base := t.TempDir()
	t.Cleanup(func() { detachUnder(t, base) })
	sockets := socketDir(t)
	client, err := providerclient.New(providerclient.Config{Dirs: []string{sockets}, Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	n := &socketNode{base: base, sockets: sockets, classes: classFile(t, base, providers...), client: client}
	n.srv = &nodeServer{d: n.newDriver(t, cfg)}
	return n
}

// newDriver returns a driver of the node: its state directory, classes and
// provider sockets.
func (n *socketNode) newDriver(t *testing.T, cfg Config) *Driver {
	t.Helper()
	vols, err := volume.NewManager(filepath.Join(n.base, "state"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	cfg.NodeID, cfg.Endpoint, cfg.ProviderDir, cfg.KubeletRootDir = "n", "unix:///unused.sock", n.sockets, n.base
	d, err := New(cfg, Deps{Classes: &class.FileResolver{Paths: []string{n.classes}}, Providers: n.client, Volumes: vols})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// request is the publish request of volume name of class className.
func (n *socketNode) request(className, name string) *csi.NodePublishVolumeRequest {
	req := validRequest()
	req.VolumeId = "csi-" + name
	req.TargetPath = filepath.Join(n.base, "pods", "uid", "volumes", "kubernetes.io~csi", name, "mount")
	req.VolumeContext[AttrClass] = className
	return req
}

// publish publishes volume name of class className.
func (n *socketNode) publish(ctx context.Context, className, name string) error {
	_, err := n.srv.NodePublishVolume(ctx, n.request(className, name))
	return err
}

// unpublish unpublishes volume name.
func (n *socketNode) unpublish(ctx context.Context, name string) error {
	req := n.request("", name)
	_, err := n.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: req.VolumeId, TargetPath: req.TargetPath})
	return err
}

// TestHungProviderStallsNoOther: 32 publishes of a provider whose calls
// hang (their deadline ten minutes away) take that provider's share of the
// node's provider slots and wait for more; then publishes of another
// provider, sent 16 at once and one after another, all complete while
// every hung call is still hanging: none of the hung publishes has
// returned when the last of the others does. Once the hung provider
// answers, its 32 publishes complete too.
func TestHungProviderStallsNoOther(t *testing.T) {
	n := newSocketNode(t, Config{}, "hung", "quick") // default bounds: 8 calls, 2 of them kept for others
	hung := &gatedProvider{gate: make(chan struct{})}
	quick := &gatedProvider{}
	serveGated(t, n.sockets, "hung", hung)
	serveGated(t, n.sockets, "quick", quick)
	s := n.srv.d.slots
	share := int64(s.capacity - s.reserve)

	const hungCalls = 32
	var hungReturned atomic.Int64
	hungErrs := make(chan error, hungCalls)
	for i := range hungCalls {
		go func() {
			err := n.publish(t.Context(), "hung", fmt.Sprintf("hung-%d", i))
			hungReturned.Add(1)
			hungErrs <- err
		}()
	}
	poll.UntilTrue(t, "the hung provider's share in flight and its other publishes waiting", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return hung.inFlight.Load() == share && len(s.waiting) == hungCalls-int(share)
	})

	var wg sync.WaitGroup
	var slowest atomic.Int64
	// A publish that waited for the hung calls would fail here, long
	// before their deadline, instead of hanging the test.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	publishQuick := func(name string) {
		start := time.Now()
		if err := n.publish(ctx, "quick", name); err != nil {
			t.Errorf("publish %s of the healthy provider: %v", name, err)
		}
		slowest.Store(max(slowest.Load(), int64(time.Since(start))))
	}
	for i := range 16 {
		wg.Go(func() { publishQuick(fmt.Sprintf("quick-%d", i)) })
	}
	wg.Wait()
	for i := range 8 {
		publishQuick(fmt.Sprintf("quick-seq-%d", i))
	}
	if got := hungReturned.Load(); got != 0 {
		t.Fatalf("%d of the hung provider's publishes returned before the healthy provider's finished: the test proves nothing", got)
	}
	if got := hung.inFlight.Load(); got != share {
		t.Fatalf("the hung provider has %d calls in flight after the healthy provider's publishes, want its share %d", got, share)
	}
	t.Logf("24 publishes of the healthy provider done, the slowest in %s, while %d calls of the hung provider hang (deadline 10m)",
		time.Duration(slowest.Load()), share)

	close(hung.gate)
	for range hungCalls {
		if err := <-hungErrs; err != nil {
			t.Errorf("publish of the hung provider once it answers: %v", err)
		}
	}
	if held, free := s.inUse("hung"); held != 0 || free != s.capacity {
		t.Errorf("afterwards the hung provider holds %d slots and %d are free, want 0 and %d", held, free, s.capacity)
	}
}
