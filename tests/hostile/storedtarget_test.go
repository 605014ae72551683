package hostile_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/tests/harness"
)

// Kinds of foreign things at a path the driver is pointed at.
const (
	foreignMount = "mount" // a tmpfs someone else mounted, holding a file
	foreignDir   = "dir"   // a plain directory holding a file
	foreignFile  = "file"  // a regular file
)

const foreignContents = "not the driver's"

// foreign is something at path the driver did not make and must leave as
// it is.
type foreign struct {
	path    string
	kind    string
	mountID int
}

// makeForeign creates a foreign thing of kind at path.
func makeForeign(t *testing.T, path, kind string) *foreign {
	t.Helper()
	f := &foreign{path: path, kind: kind}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(path, "keep")
	switch kind {
	case foreignFile:
		keep = path
	case foreignMount:
		if err := os.MkdirAll(path, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", path, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount foreign tmpfs at %s: %v", path, err)
		}
		m, err := harness.MountAt(path)
		if err != nil || m == nil {
			t.Fatalf("foreign mount at %s not in the mount table (%v)", path, err)
		}
		f.mountID = m.ID
	case foreignDir:
		if err := os.MkdirAll(path, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(keep, []byte(foreignContents), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// assertIntact checks that f is still there, unchanged.
func (f *foreign) assertIntact(t *testing.T) {
	t.Helper()
	keep := filepath.Join(f.path, "keep")
	switch f.kind {
	case foreignFile:
		keep = f.path
	case foreignMount:
		m, err := harness.MountAt(f.path)
		if err != nil || m == nil || m.ID != f.mountID {
			t.Errorf("foreign mount %d at %s is gone (now %+v, %v)", f.mountID, f.path, m, err)
		}
	}
	if data, err := os.ReadFile(keep); err != nil || string(data) != foreignContents {
		t.Errorf("foreign %s at %s changed: %q (%v)", f.kind, f.path, data, err)
	}
}

// TestCVE2020_8568StoredTargetPathNotTrusted guards the class of
// CVE-2020-8568: a target path the driver reads back from storage must not
// lead it to unmount or remove anything but its own volume. The record in
// the volume's tmpfs is edited to name a foreign mount or directory under
// the kubelet root, another keymount volume's target, the kubelet root
// itself, or an /etc-like directory outside it (with and without the pod
// UID changed to match); unpublishing the volume at its real target and at
// the recorded one, and republishing it, must leave the foreign path as it
// was.
func TestCVE2020_8568StoredTargetPathNotTrusted(t *testing.T) {
	cases := []struct {
		name string
		kind string
		// where returns the foreign path and its pod UID ("" outside pods).
		where func(n *node, v harness.Volume) (string, string)
	}{
		{"other-pod-mount", foreignMount, otherPodTarget},
		{"other-pod-dir", foreignDir, otherPodTarget},
		{"same-pod-other-volume-mount", foreignMount, func(n *node, v harness.Volume) (string, string) {
			return n.TargetPath(v.Pod.UID, "other"), v.Pod.UID
		}},
		{"outside-kubelet-mount", foreignMount, func(n *node, _ harness.Volume) (string, string) {
			return filepath.Join(n.Dir, "etc"), ""
		}},
		{"outside-kubelet-dir", foreignDir, func(n *node, _ harness.Volume) (string, string) {
			return filepath.Join(n.Dir, "etc"), ""
		}},
		{"kubelet-root", foreignDir, func(n *node, _ harness.Volume) (string, string) {
			return n.TargetBase, ""
		}},
	}
	for _, tc := range cases {
		for _, uid := range []string{"uid-kept", "uid-edited"} {
			t.Run(tc.name+"/"+uid, func(t *testing.T) {
				n := startNode(t, harness.Options{})
				n.prov.set(answer(fileOf("ok", "v1")))
				v := n.NewVolume("secrets")
				n.mustPublish(t, v)
				path, podUID := tc.where(n, v)
				f := makeForeign(t, path, tc.kind)
				editRecord(t, n.Harness, v.ID, func(rec map[string]any) {
					rec["targetPath"] = path
					if uid == "uid-edited" && podUID != "" {
						rec["podUID"] = podUID
					}
				})
				assertUnpublishSpares(t, n, v.ID, []string{v.Target, path}, f.assertIntact)
				_ = n.publish(t, v) // whatever it answers, it must not touch the foreign path
				f.assertIntact(t)
			})
		}
	}
	t.Run("other-keymount-volume", func(t *testing.T) {
		n := startNode(t, harness.Options{})
		n.prov.set(answer(fileOf("ok", "v1")))
		v, w := n.NewVolume("secrets"), n.NewVolume("secrets")
		n.mustPublish(t, v)
		n.mustPublish(t, w)
		editRecord(t, n.Harness, v.ID, func(rec map[string]any) {
			rec["targetPath"], rec["podUID"] = w.Target, w.Pod.UID
		})
		assertUnpublishSpares(t, n, v.ID, []string{v.Target, w.Target}, func(t *testing.T) {
			t.Helper()
			assertShows(t, w.Target, map[string]string{"ok": "v1"})
		})
	})
}

// otherPodTarget is the target of a volume of another pod.
func otherPodTarget(n *node, _ harness.Volume) (string, string) {
	uid := "7f1d2c3b-4a5e-4f60-8172-93a4b5c6d7e8"
	return n.TargetPath(uid, "secrets"), uid
}

// assertUnpublishSpares unpublishes volumeID at each target in turn and
// checks after each call that it succeeded and that intact holds.
func assertUnpublishSpares(t *testing.T, n *node, volumeID string, targets []string, intact func(*testing.T)) {
	t.Helper()
	for _, target := range targets {
		if _, err := n.Node.NodeUnpublishVolume(t.Context(), harness.UnpublishRequest(volumeID, target)); err != nil {
			t.Errorf("NodeUnpublishVolume(%s): %v, want OK", target, err)
		}
		intact(t)
	}
}

// TestUnpublishLeavesForeignTargets: NodeUnpublishVolume for a kubelet-shaped
// path holding a regular file, a foreign mount or a foreign directory
// succeeds and leaves it as it is, whether the volume ID is unknown to the
// driver or names a volume it published elsewhere.
//
// Known driver bug when this test was written: for a regular file at the
// target and a volume ID without a record, NodeUnpublishVolume answers
// Internal ("open <target>: not a directory") instead of OK, so kubelet
// would retry the unmount forever. The file case fails until it is fixed.
func TestUnpublishLeavesForeignTargets(t *testing.T) {
	for _, kind := range []string{foreignFile, foreignMount, foreignDir} {
		t.Run(kind, func(t *testing.T) {
			n := startNode(t, harness.Options{})
			n.prov.set(answer(fileOf("ok", "v1")))
			published := n.NewVolume("secrets")
			n.mustPublish(t, published)
			stranger := n.NewVolume("secrets")
			f := makeForeign(t, stranger.Target, kind)

			ids := []string{stranger.ID, published.ID, harness.VolumeID("no-such-pod", "secrets")}
			for _, id := range ids {
				if _, err := n.Node.NodeUnpublishVolume(t.Context(), harness.UnpublishRequest(id, stranger.Target)); err != nil {
					t.Errorf("NodeUnpublishVolume(%s, %s): %v, want OK", id, stranger.Target, err)
				}
				f.assertIntact(t)
			}
			assertShows(t, published.Target, map[string]string{"ok": "v1"})
		})
	}
}
