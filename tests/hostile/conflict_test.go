package hostile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/tests/harness"
)

// TestRepublishChangingTheVolumeAlreadyExists: a republish that changes
// what a published volume is (its class, its class's provider, its
// read-only flag, its target) is AlreadyExists; the volume keeps its files
// and generation, and nothing is mounted at a new target.
func TestRepublishChangingTheVolumeAlreadyExists(t *testing.T) {
	files := map[string]string{"ok": "v1"}
	cases := []struct {
		name    string
		mention string
		// change alters the node or the volume's record and returns the
		// republish request's target and class.
		change func(t *testing.T, n *node, v harness.Volume) (target, class string)
	}{
		{"class", "other-class", func(_ *testing.T, n *node, v harness.Volume) (string, string) {
			n.WriteClassFor("other-class", providerName, nil)
			return v.Target, "other-class"
		}},
		{"provider", "other-provider", func(t *testing.T, n *node, v harness.Volume) (string, string) {
			other := &scriptProvider{}
			other.set(answer(fileOf("ok", "from the other provider")))
			serveProvider(t, n.ProviderDir, "other-provider", other)
			n.WriteClassFor(className, "other-provider", nil)
			return v.Target, className
		}},
		{"read-only", "readOnly", func(t *testing.T, n *node, v harness.Volume) (string, string) {
			// A record of a read-write volume, as an older driver kept it.
			editRecord(t, n.Harness, v.ID, func(rec map[string]any) { rec["readOnly"] = false })
			return v.Target, className
		}},
		{"target", "published at", func(_ *testing.T, n *node, v harness.Volume) (string, string) {
			return n.TargetPath(v.Pod.UID, "moved"), className
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, harness.Options{})
			n.prov.set(answer(filesOf(files)...))
			v := n.NewVolume("secrets")
			n.mustPublish(t, v)
			gen, _ := generationOf(t, v.Target)
			target, class := tc.change(t, n, v)
			n.prov.set(answer(fileOf("ok", "v2")))
			calls := n.prov.calls.Load()

			_, err := n.Node.NodePublishVolume(t.Context(), n.PublishRequest(v.ID, target, class, true))
			assertCode(t, err, codes.AlreadyExists, tc.mention)
			if got := n.prov.calls.Load(); got != calls {
				t.Errorf("the provider was called for a conflicting republish")
			}
			if now, _ := generationOf(t, v.Target); now != gen {
				t.Errorf("..data -> %s after a refused republish, want %s", now, gen)
			}
			assertShows(t, v.Target, files)
			if target != v.Target {
				assertNoMounts(t, target)
			}
		})
	}
}

// TestTargetAlreadyMountedAlreadyExists: a first publish onto a target that
// is already a mount point (someone else's, or another volume's) is
// AlreadyExists; the mount there is left as it is and the refused volume
// leaves no tmpfs behind.
func TestTargetAlreadyMountedAlreadyExists(t *testing.T) {
	t.Run("foreign-mount", func(t *testing.T) {
		n := startNode(t, harness.Options{})
		n.prov.set(answer(fileOf("ok", "v1")))
		v := n.NewVolume("secrets")
		f := makeForeign(t, v.Target, foreignMount)
		assertCode(t, n.publish(t, v), codes.AlreadyExists, v.Target)
		f.assertIntact(t)
		assertStateEmpty(t, n.Harness)
		if calls := n.prov.calls.Load(); calls != 0 {
			t.Errorf("the provider was called %d times for a target in use", calls)
		}
	})
	t.Run("foreign-mount-over-published", func(t *testing.T) {
		n := startNode(t, harness.Options{})
		n.prov.set(answer(fileOf("ok", "v1")))
		v := n.NewVolume("secrets")
		n.mustPublish(t, v)
		// Someone mounts over the published target.
		f := &foreign{path: v.Target, kind: foreignMount}
		mustDo(t, unix.Mount("tmpfs", v.Target, "tmpfs", 0, "size=1m"))
		m, err := harness.MountAt(v.Target)
		if err != nil || m == nil {
			t.Fatalf("foreign mount over %s not in the mount table (%v)", v.Target, err)
		}
		f.mountID = m.ID
		mustDo(t, os.WriteFile(filepath.Join(v.Target, "keep"), []byte(foreignContents), 0o600))
		n.prov.set(answer(fileOf("ok", "v2")))

		assertCode(t, n.publish(t, v), codes.AlreadyExists, v.Target)
		f.assertIntact(t)
	})
	t.Run("other-volume", func(t *testing.T) {
		n := startNode(t, harness.Options{})
		n.prov.set(answer(fileOf("ok", "v1")))
		owner := n.NewVolume("secrets")
		n.mustPublish(t, owner)
		gen, _ := generationOf(t, owner.Target)
		intruder := owner
		intruder.ID = harness.VolumeID("another-pod", "secrets")
		n.prov.set(answer(fileOf("ok", "intruder")))

		assertCode(t, n.publish(t, intruder), codes.AlreadyExists, owner.Target)
		if _, err := os.Lstat(n.VolumeDir(intruder.ID)); err == nil {
			t.Errorf("the refused volume left its directory %s", n.VolumeDir(intruder.ID))
		}
		if now, _ := generationOf(t, owner.Target); now != gen {
			t.Errorf("..data -> %s after a refused publish of another volume, want %s", now, gen)
		}
		assertShows(t, owner.Target, map[string]string{"ok": "v1"})
		n.mustUnpublish(t, owner)
		assertNoMounts(t, n.Dir)
	})
}

// TestHostileVolumeIDsNeverShareATmpfs: volume IDs with "/", "..", ".",
// NUL, newlines, case and encoding variants and great length each get a
// tmpfs of their own, directly in the state directory; every target shows
// its own volume's content; unpublishing them all leaves nothing.
func TestHostileVolumeIDsNeverShareATmpfs(t *testing.T) {
	ids := []string{
		"vol", "vol/", "vol/.", "a/b", "a_b", "a%2Fb", "a\\b", "..", ".", "../../../etc", "/abs/id",
		"a\x00b", "a\x00c", "a", "A", "vol\n", "ünïcödé", strings.Repeat("x", 4096), strings.Repeat("x", 4095),
	}
	n := startNode(t, harness.Options{})
	n.prov.set(answerPodUID())
	vols := make([]harness.Volume, len(ids))
	dirs := map[string]string{}
	devs := map[[2]int]string{}
	volumesDir := filepath.Join(n.StateDir, "volumes")
	for i, id := range ids {
		v := n.NewVolume("secrets")
		v.ID = id
		vols[i] = v
		n.mustPublish(t, v)

		dir := n.VolumeDir(id)
		if other, dup := dirs[dir]; dup {
			t.Errorf("volume IDs %q and %q share the directory %s", id, other, dir)
		}
		dirs[dir] = id
		if filepath.Dir(dir) != volumesDir {
			t.Errorf("volume ID %q has its directory at %s, not directly in %s", id, dir, volumesDir)
		}
		m, err := harness.MountAt(v.Target)
		if err != nil || m == nil {
			t.Fatalf("target of volume ID %q is not a mount point (%v)", id, err)
		}
		dev := [2]int{m.Major, m.Minor}
		if other, dup := devs[dev]; dup {
			t.Errorf("volume IDs %q and %q share the tmpfs %d:%d", id, other, m.Major, m.Minor)
		}
		devs[dev] = id
	}
	for _, v := range vols {
		if got, err := os.ReadFile(filepath.Join(v.Target, "uid")); err != nil || string(got) != v.Pod.UID {
			t.Errorf("volume ID %q shows %q (%v), want its pod's UID %s", v.ID, got, err, v.Pod.UID)
		}
	}
	if des, err := os.ReadDir(volumesDir); err != nil || len(des) != len(ids) {
		t.Errorf("%d volume dirs (%v) for %d volume IDs", len(des), err, len(ids))
	}
	for _, v := range vols {
		n.mustUnpublish(t, v)
	}
	assertNoMounts(t, n.Dir)
	assertStateEmpty(t, n.Harness)
	if des, err := os.ReadDir(n.StateDir); err != nil || len(des) != 1 {
		t.Errorf("state dir holds %d entries (%v), want only volumes/", len(des), err)
	}
}
