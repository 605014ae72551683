package hostile_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/unixsocket"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/providerclient"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/harness"
)

// panicky is the driver's provider client with a fault no real provider can
// cause: while armed, it panics inside the publish handler.
type panicky struct {
	real  driver.ProviderClient
	armed atomic.Bool
}

func (p *panicky) Mount(ctx context.Context, provider string, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	if p.armed.Load() {
		panic("hostile: the provider client panicked")
	}
	return p.real.Mount(ctx, provider, req)
}

func (p *panicky) Unpublish(ctx context.Context, provider string, req *keymountv1.UnpublishRequest) error {
	return p.real.Unpublish(ctx, provider, req)
}

func (p *panicky) Version(ctx context.Context, provider string) (*v1alpha1.VersionResponse, error) {
	return p.real.Version(ctx, provider)
}

// serveDriver runs a second driver beside the harness's one, over the same
// kubelet root, classes and provider directory but with its own socket and
// state directory, and providers as its provider client.
func serveDriver(t *testing.T, h *harness.Harness, name string, providers driver.ProviderClient) (csi.NodeClient, *volume.Manager) {
	t.Helper()
	vols, err := driver.NewVolumeManager(filepath.Join(h.Dir, name+"-state"), volume.DefaultSizeBytes)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(h.Dir, name+".sock")
	d, err := driver.New(driver.Config{
		NodeID: "hostile-node", Endpoint: "unix://" + sock, ProviderDir: h.ProviderDir, KubeletRootDir: h.TargetBase,
	}, driver.Deps{Classes: &class.FileResolver{Paths: []string{h.ClassDir}}, Providers: providers, Volumes: vols})
	if err != nil {
		t.Fatal(err)
	}
	l, err := unixsocket.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, l) }()
	conn, err := harness.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("driver %s: %v", name, err)
			}
		case <-time.After(waitLimit):
			t.Errorf("driver %s did not stop within %s", name, waitLimit)
		}
		_ = l.Close()
	})
	return csi.NewNodeClient(conn), vols
}

// TestHandlerPanicIsInternal: a panic inside NodePublishVolume ends that
// call with Internal, and only that call: the driver keeps serving, the
// failed first publish leaves no mount behind, the volume is not wedged
// (its next publish works), and a panic in a republish keeps the files.
func TestHandlerPanicIsInternal(t *testing.T) {
	h := harness.Start(t, harness.Options{})
	prov := &scriptProvider{}
	prov.set(answer(fileOf("ok", "v1")))
	serveProvider(t, h.ProviderDir, providerName, prov)
	h.WriteClassFor(className, providerName, nil)
	pc, err := providerclient.New(providerclient.Config{Dirs: []string{h.ProviderDir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	pan := &panicky{real: pc}
	node, vols := serveDriver(t, h, "panic", pan)
	publish := func(v harness.Volume) error {
		_, err := node.NodePublishVolume(t.Context(), h.PublishRequest(v.ID, v.Target, className, true))
		return err
	}

	v := h.NewVolume("secrets")
	pan.armed.Store(true)
	assertCode(t, publish(v), codes.Internal, "panicked")
	pan.armed.Store(false)
	assertNoMounts(t, v.Target)
	assertNoMounts(t, vols.Lookup(v.ID).Dir)
	if _, err := os.Lstat(vols.Lookup(v.ID).Dir); err == nil {
		t.Errorf("the first publish that panicked left its volume dir %s", vols.Lookup(v.ID).Dir)
	}

	w := h.NewVolume("secrets")
	if err := publish(w); err != nil {
		t.Errorf("publish of another volume after a panic: %v", err)
	}
	if err := publish(v); err != nil {
		t.Fatalf("publish of the volume whose call panicked, once the fault is gone: %v, want OK", err)
	}
	assertShows(t, v.Target, map[string]string{"ok": "v1"})

	pan.armed.Store(true)
	assertCode(t, publish(v), codes.Internal, "panicked")
	pan.armed.Store(false)
	assertShows(t, v.Target, map[string]string{"ok": "v1"})
	for _, x := range []harness.Volume{v, w} {
		if _, err := node.NodeUnpublishVolume(t.Context(), harness.UnpublishRequest(x.ID, x.Target)); err != nil {
			t.Errorf("unpublish after panics: %v", err)
		}
	}
	assertNoMounts(t, h.TargetBase)
}

// TestSecondDriverOnLiveSocketFails: a second driver instance started on
// the socket of a live one fails with unixsocket.ErrInUse before touching
// anything: the socket stays the first one's, which keeps serving, and its
// published volume stays mounted.
func TestSecondDriverOnLiveSocketFails(t *testing.T) {
	n := startNode(t, harness.Options{})
	n.prov.set(answer(fileOf("ok", "v1")))
	v := n.NewVolume("secrets")
	n.mustPublish(t, v)
	before, err := os.Lstat(n.SocketPath())
	if err != nil {
		t.Fatal(err)
	}

	vols, err := driver.NewVolumeManager(n.StateDir, volume.DefaultSizeBytes)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := providerclient.New(providerclient.Config{Dirs: []string{n.ProviderDir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	second, err := driver.New(driver.Config{
		NodeID: "hostile-node", Endpoint: n.Endpoint, ProviderDir: n.ProviderDir, KubeletRootDir: n.TargetBase,
	}, driver.Deps{Classes: &class.FileResolver{Paths: []string{n.ClassDir}}, Providers: pc, Volumes: vols})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- second.Run(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, unixsocket.ErrInUse) {
			t.Errorf("second driver on a live socket: %v, want an error wrapping unixsocket.ErrInUse", err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("second driver on a live socket still running after %s", waitLimit)
	}

	after, err := os.Lstat(n.SocketPath())
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the first driver's socket was replaced or removed (lstat: %v)", err)
	}
	w := n.NewVolume("secrets")
	n.mustPublish(t, w)
	assertShows(t, v.Target, map[string]string{"ok": "v1"})
	assertShows(t, w.Target, map[string]string{"ok": "v1"})
}
