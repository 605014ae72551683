package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	mount "k8s.io/mount-utils"

	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// scriptedProvider returns whatever files the test sets: it stands in for a
// buggy or hostile provider, which no real provider here can be made to be.
type scriptedProvider struct {
	files []*v1alpha1.File
	calls int
	// writeOwn, when set, runs in the call: a provider that writes the
	// files into the target itself.
	writeOwn func(target string) error
	version  string
	// req is the request of the call in progress (or of the last one).
	req *v1alpha1.MountRequest
	// unpublish answers Unpublish; nil answers Unimplemented, as every
	// upstream provider does.
	unpublish func(ctx context.Context, req *keymountv1.UnpublishRequest) error
}

func (p *scriptedProvider) Mount(_ context.Context, _ string, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	p.calls++
	p.req = req
	if p.writeOwn != nil {
		if err := p.writeOwn(req.GetTargetPath()); err != nil {
			return nil, err
		}
	}
	version := p.version
	if version == "" {
		version = "1"
	}
	return &v1alpha1.MountResponse{
		Files:         p.files,
		ObjectVersion: []*v1alpha1.ObjectVersion{{Id: "obj", Version: version}},
	}, nil
}

// Unpublish answers with p.unpublish.
func (p *scriptedProvider) Unpublish(ctx context.Context, _ string, req *keymountv1.UnpublishRequest) error {
	if p.unpublish == nil {
		return errNoExtension()
	}
	return p.unpublish(ctx, req)
}

// Version answers as a provider that is up.
func (p *scriptedProvider) Version(context.Context, string) (*v1alpha1.VersionResponse, error) {
	return &v1alpha1.VersionResponse{Version: "v1alpha1", RuntimeName: "scripted"}, nil
}

type testNode struct {
	srv      *nodeServer
	provider *scriptedProvider
	base     string
	outside  string
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("publish tests mount tmpfs and must run as root")
	}
	base := sockettest.Dir(t) // serve_test.go binds csi.sock in it
	t.Cleanup(func() { detachUnder(t, base) })
	classFile := filepath.Join(base, "spc.yaml")
	spc := "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: app\nspec:\n  provider: scripted\n"
	if err := os.WriteFile(classFile, []byte(spc), 0o600); err != nil {
		t.Fatal(err)
	}
	vols, err := volume.NewManager(filepath.Join(base, "state"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	p := &scriptedProvider{}
	d, err := New(Config{NodeID: "n", Endpoint: "unix:///unused.sock", ProviderDir: base, KubeletRootDir: base},
		Deps{Classes: &class.FileResolver{Paths: []string{classFile}}, Providers: p, Volumes: vols})
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	return &testNode{srv: &nodeServer{d: d}, provider: p, base: base, outside: outside}
}

func detachUnder(t *testing.T, dir string) {
	mps, err := mount.New("").List()
	if err != nil {
		t.Error(err)
		return
	}
	for i := len(mps) - 1; i >= 0; i-- {
		if rel, err := filepath.Rel(dir, mps[i].Path); err == nil && filepath.IsLocal(rel) {
			_ = unix.Unmount(mps[i].Path, unix.MNT_DETACH)
		}
	}
}

// target is kubelet's target path of volume name of the test pod "uid".
func (n *testNode) target(name string) string {
	return filepath.Join(n.base, "pods", "uid", "volumes", "kubernetes.io~csi", name, "mount")
}

func (n *testNode) publish(t *testing.T, target string) error {
	t.Helper()
	req := validRequest()
	req.TargetPath = target
	req.VolumeContext[AttrClass] = "app"
	req.VolumeId = "csi-" + filepath.Base(filepath.Dir(target))
	_, err := n.srv.NodePublishVolume(t.Context(), req)
	return err
}

func abusivePaths(outside string) []string {
	return []string{
		"", "/", "/etc/passwd", outside + "/x", "..", "../x", "../../x", "a/../../x", "a/../b", "./a", ".",
		"a//b", "a/", "a/./b", "..data", "..data/x", "..data_tmp", "..2026_11_21_10_52_01.1.2/x", "...", "..x",
		`a\b`, `..\x`, "a\x00b", strings.Repeat("a", 256), strings.Repeat("a/", 2100) + "a",
	}
}

// TestPublishRejectsAbusivePaths: a provider path that could land outside
// the volume, or clobber the writer's own entries, fails the first publish
// with Internal before anything is written, and leaves no mount behind.
func TestPublishRejectsAbusivePaths(t *testing.T) {
	n := newTestNode(t)
	paths := abusivePaths(n.outside)
	if len(paths) < 20 {
		t.Fatalf("only %d cases", len(paths))
	}
	for i, bad := range paths {
		n.provider.files = []*v1alpha1.File{
			{Path: "good", Mode: 0o644, Contents: []byte("ok")},
			{Path: bad, Mode: 0o644, Contents: []byte("evil")},
		}
		target := n.target("v" + string(rune('a'+i%26)))
		err := n.publish(t, target)
		if status.Code(err) != codes.Internal || !strings.Contains(status.Convert(err).Message(), "invalid file path") {
			t.Errorf("path %q: err = %v, want Internal naming the invalid path", bad, err)
		}
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("path %q: target %s left behind after a failed first publish", bad, target)
		}
		assertNothingUnder(t, n.outside)
		assertNoMountsUnder(t, n.base)
	}
}

// TestRepublishWithAbusivePathKeepsFiles: the same provider turning bad on a
// refresh leaves the pod's files untouched and answers OK.
func TestRepublishWithAbusivePathKeepsFiles(t *testing.T) {
	n := newTestNode(t)
	target := n.target("secrets")
	n.provider.files = []*v1alpha1.File{{Path: "good", Mode: 0o644, Contents: []byte("v1")}}
	if err := n.publish(t, target); err != nil {
		t.Fatal(err)
	}
	for _, bad := range abusivePaths(n.outside) {
		n.provider.files = []*v1alpha1.File{{Path: "good", Contents: []byte("v2")}, {Path: bad, Contents: []byte("evil")}}
		if err := n.publish(t, target); err != nil {
			t.Fatalf("republish with %q: err = %v, want OK (old files kept)", bad, err)
		}
		if b, err := os.ReadFile(filepath.Join(target, "good")); err != nil || string(b) != "v1" {
			t.Fatalf("republish with %q: good = %q, %v; want the old value", bad, b, err)
		}
		assertNothingUnder(t, n.outside)
	}
	rec, err := n.srv.d.deps.Volumes.Lookup("csi-secrets").LoadRecord()
	if err != nil || !strings.Contains(rec.LastError, "invalid file path") {
		t.Fatalf("record = %+v, %v; want the last failure recorded", rec, err)
	}
}

func assertNothingUnder(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("%s holds %d entries (%v): something was written outside the volume", dir, len(entries), err)
	}
}

func assertNoMountsUnder(t *testing.T, dir string) {
	t.Helper()
	mps, err := mount.New("").List()
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range mps {
		if rel, err := filepath.Rel(dir, mp.Path); err == nil && filepath.IsLocal(rel) {
			t.Fatalf("mount left behind at %s", mp.Path)
		}
	}
}
