package driver

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// upstreamTarget prepares target exactly as the upstream driver leaves a
// published volume: a tmpfs mounted at the target, the files in the ..data
// layout of Kubernetes' atomic writer (a timestamped generation directory,
// ..data pointing at it, every name a symlink through ..data), or, with
// plain, as a provider that writes its own files leaves them.
func upstreamTarget(t *testing.T, target string, files map[string]string, plain bool) {
	t.Helper()
	if err := os.MkdirAll(target, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	gen := "..2026_11_20_10_00_00.1234567890"
	if plain {
		gen = ""
	} else if err := os.Mkdir(filepath.Join(target, gen), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(target, gen, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if !plain {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(target, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !plain {
		if err := os.Symlink(gen, filepath.Join(target, "..data")); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAdoptUpstreamVolume: a volume the upstream driver mounted before the
// switch is adopted on keymount's first republish: new content reaches the
// mount a running container holds (no mount is stacked over it), later
// republishes keep writing there, and unpublish unmounts it.
func TestAdoptUpstreamVolume(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run("plain="+strconv.FormatBool(plain), func(t *testing.T) {
			n := newTestNode(t)
			target := n.target("adopted")
			// Only the upstream driver's pod status tells a plain tmpfs
			// (a provider wrote its own files) from any other mount.
			n.srv.d.deps.Cluster = upstreamStatus{mountedAt: target}
			upstreamTarget(t, target, map[string]string{"a": "old"}, plain)
			before := topMount(t, target)

			// What a running container holds: the upstream tmpfs.
			held, err := os.Open(target)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = held.Close() }()
			heldPath := filepath.Join("/proc/self/fd", strconv.Itoa(int(held.Fd())))

			n.provider.files = []*v1alpha1.File{{Path: "a", Mode: 0o644, Contents: []byte("new")}}
			if err := n.publish(t, target); err != nil {
				t.Fatalf("republish of an upstream volume: %v", err)
			}
			if got := readFile(t, filepath.Join(heldPath, "a")); got != "new" {
				t.Errorf("through the held mount: %q, want new", got)
			}
			if after := topMount(t, target); after.ID != before.ID {
				t.Errorf("the target's mount changed from %d to %d: a mount was stacked over the upstream volume", before.ID, after.ID)
			}
			rec := n.record(t, target)
			if !rec.Adopted || rec.AdoptedDevice == 0 {
				t.Errorf("record: adopted=%t device=%d", rec.Adopted, rec.AdoptedDevice)
			}

			n.provider.files = []*v1alpha1.File{{Path: "a", Mode: 0o644, Contents: []byte("newer")}, {Path: "b", Mode: 0o600, Contents: []byte("b")}}
			if err := n.publish(t, target); err != nil {
				t.Fatalf("second republish: %v", err)
			}
			if got := readFile(t, filepath.Join(heldPath, "a")); got != "newer" {
				t.Errorf("through the held mount after the second republish: %q, want newer", got)
			}
			if got := readFile(t, filepath.Join(target, "b")); got != "b" {
				t.Errorf("b = %q", got)
			}

			req := &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-adopted", TargetPath: target}
			if _, err := n.srv.NodeUnpublishVolume(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			if ms, _ := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target)); len(ms) != 0 {
				t.Errorf("%d mounts left at the target after unpublish", len(ms))
			}
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Errorf("target after unpublish: %v", err)
			}
			if _, err := os.Stat(n.srv.d.deps.Volumes.Lookup("csi-adopted").Dir); !os.IsNotExist(err) {
				t.Errorf("the adopted volume's state after unpublish: %v", err)
			}
		})
	}
}

// upstreamStatus is a Cluster whose API server holds the upstream
// driver's pod status saying the volume is mounted at mountedAt.
type upstreamStatus struct {
	NoCluster
	mountedAt string
}

func (u upstreamStatus) UpstreamMounted(_ context.Context, _, _, _, targetPath string) (bool, error) {
	return targetPath == u.mountedAt, nil
}

// TestForeignTmpfsNotAdopted: a tmpfs at the target without upstream's
// layout and without the upstream driver's pod status is someone else's
// mount: AlreadyExists, untouched.
func TestForeignTmpfsNotAdopted(t *testing.T) {
	n := newTestNode(t)
	target := n.target("foreign")
	n.srv.d.deps.Cluster = upstreamStatus{mountedAt: "/elsewhere"}
	upstreamTarget(t, target, map[string]string{"keep": "mine"}, true)
	n.provider.files = []*v1alpha1.File{{Path: "a", Mode: 0o644, Contents: []byte("x")}}
	err := n.publish(t, target)
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("publish onto a foreign tmpfs: %v, want AlreadyExists", err)
	}
	if got := readFile(t, filepath.Join(target, "keep")); got != "mine" {
		t.Errorf("the foreign file: %q", got)
	}
	if n.provider.calls != 0 {
		t.Errorf("the provider was called %d times", n.provider.calls)
	}
}

func topMount(t *testing.T, path string) *mountinfo.Info {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	if err != nil || len(ms) == 0 {
		t.Fatalf("mounts at %s: %v, %d", path, err, len(ms))
	}
	return ms[len(ms)-1]
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("read %s: %v", p, err)
	}
	return string(data)
}

// TestAdoptedRecordRemovedOnceItsTmpfsIsGone: the start-up sweep keeps the
// record of an adopted volume while its tmpfs is at the target, and removes
// it once the tmpfs is gone (the upstream driver unpublished it after a
// rollback): nothing of keymount's stays in the state directory.
func TestAdoptedRecordRemovedOnceItsTmpfsIsGone(t *testing.T) {
	n := newTestNode(t)
	target := n.target("adopted")
	upstreamTarget(t, target, map[string]string{"a": "old"}, false)
	n.provider.files = []*v1alpha1.File{{Path: "a", Mode: 0o644, Contents: []byte("new")}}
	if err := n.publish(t, target); err != nil {
		t.Fatalf("republish of an upstream volume: %v", err)
	}
	vols := n.srv.d.deps.Volumes
	dir := vols.Lookup("csi-adopted").Dir
	if _, err := vols.RemoveOrphans(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the sweep removed the record of an adopted volume still mounted: %v", err)
	}

	// The upstream driver, back after a rollback, unpublishes it.
	if err := unix.Unmount(target, 0); err != nil {
		t.Fatal(err)
	}
	removed, err := vols.RemoveOrphans()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) || removed != 1 {
		t.Errorf("after the upstream unpublish: the record's dir %v, %d removed; want it gone, 1 removed", err, removed)
	}
}

// TestDriverRestartRightAfterAdoption: a driver that adopted an upstream
// volume and restarts at once (a rollout during the switch) keeps it: the
// start-up sweep leaves the adopted volume's record while its tmpfs is at
// the target, the next republish writes into that same mount (no mount
// stacked over what the container holds), and unpublish unmounts it and
// removes the record.
func TestDriverRestartRightAfterAdoption(t *testing.T) {
	n := newTestNode(t)
	target := n.target("adopted")
	upstreamTarget(t, target, map[string]string{"a": "old"}, false)
	before := topMount(t, target)
	n.provider.files = []*v1alpha1.File{{Path: "a", Mode: 0o644, Contents: []byte("new")}}
	if err := n.publish(t, target); err != nil {
		t.Fatalf("republish of an upstream volume: %v", err)
	}

	// The restart: a new volume manager and driver over the same state
	// directory, nothing in memory, and the sweep Run does first.
	vols, err := volume.NewManager(filepath.Join(n.base, "state"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(n.srv.d.cfg, Deps{Classes: n.srv.d.deps.Classes, Providers: n.provider, Volumes: vols})
	if err != nil {
		t.Fatal(err)
	}
	if removed, err := vols.RemoveOrphans(); err != nil || removed != 0 {
		t.Fatalf("the start-up sweep after an adoption: %d removed, %v; want the adopted volume kept", removed, err)
	}
	n.srv = &nodeServer{d: d}
	rec := n.record(t, target)
	if !rec.Adopted {
		t.Fatalf("after the restart the volume's record says adopted=%t", rec.Adopted)
	}

	n.provider.files = []*v1alpha1.File{{Path: "a", Mode: 0o644, Contents: []byte("after-restart")}}
	n.provider.version = "2"
	if err := n.publish(t, target); err != nil {
		t.Fatalf("republish after the restart: %v", err)
	}
	if got := readFile(t, filepath.Join(target, "a")); got != "after-restart" {
		t.Errorf("after the restart the target reads %q, want after-restart", got)
	}
	if after := topMount(t, target); after.ID != before.ID {
		t.Errorf("the target's mount changed from %d to %d after the restart: a mount was stacked over the adopted volume", before.ID, after.ID)
	}

	req := &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-adopted", TargetPath: target}
	if _, err := n.srv.NodeUnpublishVolume(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if ms, _ := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target)); len(ms) != 0 {
		t.Errorf("%d mounts left at the target after unpublish", len(ms))
	}
	if _, err := os.Stat(vols.Lookup("csi-adopted").Dir); !os.IsNotExist(err) {
		t.Errorf("the adopted volume's state after unpublish: %v", err)
	}
}
