package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/unixsocket"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/poll"
)

// funcProvider answers Mount with a function the test sets.
type funcProvider func(ctx context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error)

func (f funcProvider) Mount(ctx context.Context, _ string, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	return f(ctx, req)
}

// Unpublish answers as a provider without keymount's extension.
func (f funcProvider) Unpublish(context.Context, string, *keymountv1.UnpublishRequest) error {
	return errNoExtension()
}

// errNoExtension is what gRPC answers for a service the provider does not
// serve: keymount's extension called on an upstream provider.
func errNoExtension() error {
	return status.Error(codes.Unimplemented, "unknown service keymount.provider.v1.VolumeLifecycle")
}

// Version answers as a provider that is up.
func (f funcProvider) Version(context.Context, string) (*v1alpha1.VersionResponse, error) {
	return &v1alpha1.VersionResponse{Version: "v1alpha1", RuntimeName: "func"}, nil
}

func okResponse(files ...*v1alpha1.File) *v1alpha1.MountResponse {
	return &v1alpha1.MountResponse{Files: files, ObjectVersion: []*v1alpha1.ObjectVersion{{Id: "obj", Version: "1"}}}
}

// servedNode is a driver serving on a real unix socket.
type servedNode struct {
	node     csi.NodeClient
	identity csi.IdentityClient
	d        *Driver
	base     string
	endpoint string
}

func serveNode(t *testing.T, p ProviderClient, cl Cluster) *servedNode {
	t.Helper()
	return serveNodeWith(t, func(deps *Deps) { deps.Providers, deps.Cluster = p, cl })
}

// serveNodeWith is serveNode with the dependencies set chooses.
func serveNodeWith(t *testing.T, set func(*Deps)) *servedNode {
	t.Helper()
	n := newTestNode(t) // root check, class file, clean-up of mounts
	vols, err := volume.NewManager(filepath.Join(n.base, "state2"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "unix://" + filepath.Join(n.base, "csi.sock")
	deps := Deps{Classes: &class.FileResolver{Paths: []string{filepath.Join(n.base, "spc.yaml")}}, Volumes: vols}
	set(&deps)
	d, err := New(Config{NodeID: "n", Endpoint: endpoint, ProviderDir: n.base, KubeletRootDir: n.base, ReportTimeout: time.Second}, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("driver stopped with %v", err)
		}
	})
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s := &servedNode{node: csi.NewNodeClient(conn), identity: csi.NewIdentityClient(conn), d: d, base: n.base, endpoint: endpoint}
	poll.UntilTrue(t, "driver serving", func() bool {
		_, err := s.identity.GetPluginInfo(t.Context(), &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
		return err == nil
	})
	return s
}

func (s *servedNode) request(name string) *csi.NodePublishVolumeRequest {
	req := validRequest()
	req.VolumeId = "csi-" + name
	req.TargetPath = filepath.Join(s.base, "pods", "uid", "volumes", "kubernetes.io~csi", name, "mount")
	req.VolumeContext[AttrClass] = "app"
	return req
}

func (s *servedNode) unpublish(ctx context.Context, req *csi.NodePublishVolumeRequest) error {
	_, err := s.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: req.VolumeId, TargetPath: req.TargetPath})
	return err
}

// TestHandlerPanicIsInternal: a panic inside a handler (here in the provider
// client) fails that call with Internal; the driver keeps serving.
func TestHandlerPanicIsInternal(t *testing.T) {
	var panics atomic.Bool
	panics.Store(true)
	s := serveNode(t, funcProvider(func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		if panics.Load() {
			panic("injected provider client bug")
		}
		return okResponse(&v1alpha1.File{Path: "a", Contents: []byte("x")}), nil
	}), nil)
	req := s.request("p")
	_, err := s.node.NodePublishVolume(t.Context(), req)
	if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "panicked") {
		t.Fatalf("publish with a panicking handler: %v, want Internal saying it panicked", err)
	}
	panics.Store(false)
	if _, err := s.node.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatalf("publish after the panic: %v (the driver must keep serving)", err)
	}
	if err := s.unpublish(t.Context(), req); err != nil {
		t.Fatal(err)
	}
}

// TestSecondInstanceKeepsLiveSocket: a second driver on the endpoint of one
// that serves fails with a clear error, and the first keeps serving.
func TestSecondInstanceKeepsLiveSocket(t *testing.T) {
	s := serveNode(t, funcProvider(func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		return okResponse(), nil
	}), nil)
	vols, err := volume.NewManager(filepath.Join(s.base, "state3"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	second, err := New(Config{NodeID: "n", Endpoint: s.endpoint, ProviderDir: s.base, KubeletRootDir: s.base},
		Deps{Classes: &class.FileResolver{}, Providers: funcProvider(nil), Volumes: vols})
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Run(t.Context()); !errors.Is(err, unixsocket.ErrInUse) {
		t.Fatalf("second instance Run = %v, want ErrInUse", err)
	}
	if _, err := s.identity.Probe(t.Context(), &csi.ProbeRequest{}); err != nil {
		t.Fatalf("first instance stopped answering: %v", err)
	}
	if _, err := os.Stat(strings.TrimPrefix(s.endpoint, "unix://")); err != nil {
		t.Fatalf("the live socket is gone: %v", err)
	}
}

// stuckCluster is an API server that never answers until released, and
// reports its caches unsynced until told.
type stuckCluster struct {
	NoCluster
	release  chan struct{}
	synced   atomic.Bool
	mu       sync.Mutex
	written  []*Outcome
	deleted  []string
	attempts atomic.Int32
	fail     atomic.Bool
}

func newStuckCluster() *stuckCluster { return &stuckCluster{release: make(chan struct{})} }

func (c *stuckCluster) Synced() bool { return c.synced.Load() }

func (c *stuckCluster) AfterPublish(ctx context.Context, o *Outcome) error {
	c.attempts.Add(1)
	select {
	case <-c.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if c.fail.Load() {
		return errors.New("API server unavailable")
	}
	c.mu.Lock()
	c.written = append(c.written, o)
	c.mu.Unlock()
	return nil
}

func (c *stuckCluster) AfterUnpublish(ctx context.Context, rec *volume.Record) error {
	select {
	case <-c.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	c.deleted = append(c.deleted, rec.VolumeID)
	c.mu.Unlock()
	return nil
}

// TestAPIServerNeverBlocksKubelet: with an API server that does not answer,
// publish and unpublish return at once (no deadline reached, no Aborted for a
// concurrent call), and the pod status is written once it answers again.
func TestAPIServerNeverBlocksKubelet(t *testing.T) {
	cl := newStuckCluster()
	cl.fail.Store(true)
	s := serveNode(t, funcProvider(func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		return okResponse(&v1alpha1.File{Path: "a", Contents: []byte("x")}), nil
	}), cl)
	// Kubelet's calls carry a deadline far below the report deadline times
	// the retries: had a call waited for the API server, it would fail.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	reqs := []*csi.NodePublishVolumeRequest{s.request("a"), s.request("b")}
	for _, req := range reqs {
		if _, err := s.node.NodePublishVolume(ctx, req); err != nil {
			t.Fatalf("publish with a stuck API server: %v", err)
		}
		if _, err := s.node.NodePublishVolume(ctx, req); err != nil {
			t.Fatalf("republish with a stuck API server: %v", err)
		}
	}
	if err := s.unpublish(ctx, reqs[1]); err != nil {
		t.Fatalf("unpublish with a stuck API server: %v", err)
	}
	if s.d.reporter.idle() {
		t.Fatal("nothing is pending although the API server never answered")
	}
	// The API server comes back: what was pending is written, not lost.
	cl.fail.Store(false)
	close(cl.release)
	poll.UntilTrue(t, "pending reports written", s.d.reporter.idle)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	// Writes in flight when a newer outcome came are finished; the rest is
	// coalesced: never more writes than publishes, and the newest last.
	if len(cl.written) == 0 || len(cl.written) > 4 {
		t.Fatalf("written = %d outcomes for 4 publishes", len(cl.written))
	}
	var lastA *Outcome
	for _, o := range cl.written {
		if o.VolumeID == "csi-a" {
			lastA = o
		}
	}
	if lastA == nil || lastA.First {
		t.Fatalf("the last status written for csi-a is %+v, want its republish", lastA)
	}
	if len(cl.deleted) != 1 || cl.deleted[0] != "csi-b" {
		t.Fatalf("deleted = %v, want csi-b", cl.deleted)
	}
	if cl.attempts.Load() < 2 {
		t.Fatalf("AfterPublish attempts = %d, want retries", cl.attempts.Load())
	}
}

// TestProbeWaitsForCaches: the socket serves and unpublish works before the
// API caches sync; Probe reports ready only once they have.
func TestProbeWaitsForCaches(t *testing.T) {
	cl := newStuckCluster()
	close(cl.release)
	s := serveNode(t, funcProvider(func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		return okResponse(&v1alpha1.File{Path: "a", Contents: []byte("x")}), nil
	}), cl)
	resp, err := s.identity.Probe(t.Context(), &csi.ProbeRequest{})
	if err != nil || resp.GetReady().GetValue() {
		t.Fatalf("Probe before the caches synced = %v, %v; want not ready", resp.GetReady(), err)
	}
	req := s.request("early")
	if _, err := s.node.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatalf("publish before the caches synced: %v", err)
	}
	if err := s.unpublish(t.Context(), req); err != nil {
		t.Fatalf("unpublish before the caches synced: %v", err)
	}
	cl.synced.Store(true)
	resp, err = s.identity.Probe(t.Context(), &csi.ProbeRequest{})
	if err != nil || !resp.GetReady().GetValue() {
		t.Fatalf("Probe after the caches synced = %v, %v; want ready", resp.GetReady(), err)
	}
}

// TestModesAreNeverWidened: a negative mode or bits outside 0777 fail the
// publish with InvalidArgument naming the file.
func TestModesAreNeverWidened(t *testing.T) {
	var mode atomic.Int32
	s := serveNode(t, funcProvider(func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		return okResponse(&v1alpha1.File{Path: "db/password", Mode: mode.Load(), Contents: []byte("x")}), nil
	}), nil)
	for _, m := range []int32{-1, -0o644, 0o1000, 0o4755, 0o2755, 1 << 30} {
		mode.Store(m)
		_, err := s.node.NodePublishVolume(t.Context(), s.request("m"))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), `"db/password"`) {
			t.Errorf("mode %d: %v, want InvalidArgument naming db/password", m, err)
		}
	}
	mode.Store(0o640)
	req := s.request("m")
	if _, err := s.node.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(req.TargetPath, "db", "password"))
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode = %v, %v; want 0640", fi.Mode(), err)
	}
	if err := s.unpublish(t.Context(), req); err != nil {
		t.Fatal(err)
	}
}
