package conformance_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/tests/harness"
)

func TestPublish(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")

	publish(t, h, v, appClass)

	assertPublished(t, h, v)
	assertFiles(t, v.Target, appFiles("v1"))
	assertTidy(t, v.Target)

	rec, err := h.Record(v.ID)
	if err != nil || rec == nil {
		t.Fatalf("record of %s: %v, %v", v.ID, rec, err)
	}
	want := &volume.Record{
		VolumeID: v.ID, TargetPath: v.Target,
		PodName: v.Pod.Name, PodNamespace: v.Pod.Namespace, PodUID: v.Pod.UID, ServiceAccount: v.Pod.ServiceAccount,
		Class: appClass, Provider: harness.ProviderName, ReadOnly: true, Generation: 1,
	}
	ignore := cmpopts.IgnoreFields(volume.Record{}, "Objects", "LastMount", "LastChange")
	if diff := cmp.Diff(want, rec, ignore); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	var ids []string
	for _, o := range rec.Objects {
		ids = append(ids, o.ID)
		if o.Version == "" {
			t.Errorf("object %s recorded without a version", o.ID)
		}
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]string{"api-token", "config/app.yaml", "db/password"}, ids); diff != "" {
		t.Errorf("recorded objects (-want +got):\n%s", diff)
	}
	if rec.LastMount.IsZero() || rec.LastChange.IsZero() {
		t.Errorf("record times not set: lastMount %v lastChange %v", rec.LastMount, rec.LastChange)
	}
	// The record lives beside the data, never in the pod's view.
	if _, err := os.Lstat(filepath.Join(v.Target, "record.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("record.json is visible in the target (lstat: %v)", err)
	}
}

// TestPublishTwoVolumes checks that volumes are independent: two pods, two
// classes, each target shows its own files.
func TestPublishTwoVolumes(t *testing.T) {
	h := startApp(t)
	h.WriteObject("other", "other-contents")
	h.WriteClass("other", harness.ObjectsYAML("other"))
	a, b := h.NewVolume("secrets"), h.NewVolume("secrets")

	publish(t, h, a, appClass)
	publish(t, h, b, "other")

	assertFiles(t, a.Target, appFiles("v1"))
	assertFiles(t, b.Target, map[string]file{"other": {"other-contents", 0o644}})
	unpublish(t, h, a)
	assertGone(t, h, a)
	assertPublished(t, h, b)
	assertFiles(t, b.Target, map[string]file{"other": {"other-contents", 0o644}})
}

// TestPublishOntoForeignMount: kubelet publishes a volume whose target is
// already a mount point that does not show the volume's tmpfs, which is gone
// (the node's state directory was lost, or someone mounted over the target).
// The driver cannot vouch for that mount: it answers AlreadyExists and
// leaves it alone, and kubelet's unpublish leaves it alone too. Once the
// target is free again, the same volume publishes fine.
//
// This replaces the former TestPublishRepairsStaleMount, which expected the
// driver to unmount whatever was on the target: by design (DESIGN.md,
// "Volume safety") the driver now acts only on mounts it can vouch for.
func TestPublishOntoForeignMount(t *testing.T) {
	tests := []struct {
		name  string
		stale func(t *testing.T, h *harness.Harness, v harness.Volume)
	}{
		{
			name: "target on another tmpfs",
			stale: func(t *testing.T, h *harness.Harness, v harness.Volume) {
				mustUnmount(t, v.Target)
				mustUnmount(t, h.VolumeDir(v.ID))
				mustMount(t, "tmpfs", v.Target, "tmpfs", 0, "size=1m")
				mustWrite(t, filepath.Join(v.Target, "stale"), "stale")
			},
		},
		{
			name: "target bound to another directory",
			stale: func(t *testing.T, h *harness.Harness, v harness.Volume) {
				other := filepath.Join(h.Dir, "elsewhere")
				mustWrite(t, filepath.Join(other, "stale"), "stale")
				mustUnmount(t, v.Target)
				mustUnmount(t, h.VolumeDir(v.ID))
				mustMount(t, other, v.Target, "", unix.MS_BIND, "")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := harness.Start(t, harness.Options{})
			h.WriteClass(appClass, appObjects)
			writeApp(h, "v1")
			v := h.NewVolume("secrets")
			publish(t, h, v, appClass)

			tt.stale(t, h, v)
			if m, _ := harness.MountAt(h.VolumeDir(v.ID)); m != nil {
				t.Fatalf("setup: the volume tmpfs is still mounted")
			}
			assertStale(t, v.Target)
			foreign := mustMountAt(t, v.Target)

			writeApp(h, "v2")
			err := h.Publish(t.Context(), v, appClass, true)
			assertCode(t, err, codes.AlreadyExists, v.Target)
			assertStale(t, v.Target)
			if m := mustMountAt(t, v.Target); m.ID != foreign.ID {
				t.Errorf("target mount %d replaced by %d after a refused publish", foreign.ID, m.ID)
			}
			if rec, err := h.Record(v.ID); rec != nil || err != nil {
				t.Errorf("record after a refused first publish: %v, %v", rec, err)
			}
			assertNoMounts(t, h.StateDir)

			// Kubelet gives up and unpublishes: the foreign mount stays.
			unpublish(t, h, v)
			assertStale(t, v.Target)

			// Once whoever mounted it unmounts it, the volume publishes.
			mustUnmount(t, v.Target)
			publish(t, h, v, appClass)
			assertPublished(t, h, v)
			assertFiles(t, v.Target, appFiles("v2"))
			unpublish(t, h, v)
			assertGone(t, h, v)
		})
	}
}

// TestVanishedTmpfsUnderLiveBindHeals: the volume's tmpfs was unmounted
// from the state directory while the target's bind of it stays live (the
// record went with it). The driver knows that bind as its own (its mount
// source names the volume's directory): the next republish replaces it
// with a fresh volume holding the current content, and an unpublish
// removes it; neither is AlreadyExists or leaves a mount behind.
//
// Regression: 66d3deb ("conformance: publish read-only as kubelet does")
// turned this case of TestPublishRepairsStaleMount into AlreadyExists, and
// unpublish left the bind, because nothing told the driver's bind from a
// foreign mount once the tmpfs was gone from the state directory.
func TestVanishedTmpfsUnderLiveBindHeals(t *testing.T) {
	for _, next := range []string{"republish", "unpublish"} {
		t.Run(next, func(t *testing.T) {
			h := startApp(t)
			v := h.NewVolume("secrets")
			publish(t, h, v, appClass)
			// The target is read-only: write through the volume's own mount.
			mustWrite(t, filepath.Join(h.VolumeDir(v.ID), "data", "stale"), "stale")
			mustUnmount(t, h.VolumeDir(v.ID))
			assertStale(t, v.Target)

			if next == "republish" {
				writeApp(h, "v2")
				publish(t, h, v, appClass)
				assertPublished(t, h, v)
				assertFiles(t, v.Target, appFiles("v2"))
				if ms, err := harness.Mounts(v.Target); err != nil || len(ms) != 1 {
					t.Errorf("%d mounts at the target after the heal (%v), want one", len(ms), err)
				}
			}
			unpublish(t, h, v)
			assertGone(t, h, v)
			assertNoMounts(t, h.StateDir)
			if ms, err := harness.Mounts(v.Target); err != nil || len(ms) != 0 {
				t.Errorf("%d mounts left at the target after unpublish (%v)", len(ms), err)
			}
		})
	}
}

// TestRepublishOntoForeignMount: the volume's tmpfs is intact but something
// else is mounted on the target. The republish must not answer OK while the
// pod sees the other mount, nor unmount what it cannot vouch for: it answers
// AlreadyExists (kubelet leaves a target that is a mount point in place) and
// leaves the mount alone. Once the target is free, a republish binds the
// volume again with its current content.
//
// This replaces the former TestRepublishReplacesForeignMountOverTarget,
// which expected the driver to replace the foreign mount.
func TestRepublishOntoForeignMount(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	other := filepath.Join(h.Dir, "elsewhere")
	mustWrite(t, filepath.Join(other, "stale"), "stale")
	mustUnmount(t, v.Target)
	mustMount(t, other, v.Target, "", unix.MS_BIND, "")
	foreign := mustMountAt(t, v.Target)

	writeApp(h, "v2")
	err := h.Publish(t.Context(), v, appClass, true)

	assertCode(t, err, codes.AlreadyExists, v.Target)
	assertStale(t, v.Target)
	if m := mustMountAt(t, v.Target); m.ID != foreign.ID {
		t.Errorf("target mount %d replaced by %d after a refused republish", foreign.ID, m.ID)
	}
	if m, _ := harness.MountAt(h.VolumeDir(v.ID)); m == nil {
		t.Errorf("the volume tmpfs was removed by a refused republish")
	}

	mustUnmount(t, v.Target)
	publish(t, h, v, appClass)
	assertPublished(t, h, v)
	assertFiles(t, v.Target, appFiles("v2"))
	unpublish(t, h, v)
	assertGone(t, h, v)
}

// assertStale checks that target shows the foreign mount tests put there.
func assertStale(t *testing.T, target string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(target, "stale"))
	if err != nil || string(got) != "stale" {
		t.Fatalf("target does not show the foreign mount: %q, %v", got, err)
	}
}

func mustMountAt(t *testing.T, path string) *mountinfo.Info {
	t.Helper()
	m, err := harness.MountAt(path)
	if err != nil || m == nil {
		t.Fatalf("%s is not a mount point: %v", path, err)
	}
	return m
}

// TestRepublishRebindsUnmountedTarget: the volume's tmpfs is intact but the
// target is no longer mounted (someone unmounted it). A republish binds it
// again, without a new generation.
func TestRepublishRebindsUnmountedTarget(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	gen := generation(t, h.VolumeDir(v.ID)+"/data")
	mustUnmount(t, v.Target)

	publish(t, h, v, appClass)

	assertPublished(t, h, v)
	assertFiles(t, v.Target, appFiles("v1"))
	if got := generation(t, v.Target); got != gen {
		t.Errorf("generation %s after rebinding, want the unchanged %s", got, gen)
	}
}

func TestNodeGetVolumeStats(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)

	resp, err := h.Node.NodeGetVolumeStats(t.Context(), &csi.NodeGetVolumeStatsRequest{VolumeId: v.ID, VolumePath: v.Target})
	if err != nil {
		t.Fatalf("NodeGetVolumeStats: %v", err)
	}
	usage := map[csi.VolumeUsage_Unit]*csi.VolumeUsage{}
	for _, u := range resp.GetUsage() {
		usage[u.GetUnit()] = u
	}
	b, i := usage[csi.VolumeUsage_BYTES], usage[csi.VolumeUsage_INODES]
	if b == nil || i == nil {
		t.Fatalf("usage %v: want BYTES and INODES", resp.GetUsage())
	}
	if b.GetUsed() <= 0 || b.GetTotal() < b.GetUsed() || b.GetAvailable() <= 0 {
		t.Errorf("bytes: used %d available %d total %d: want 0 < used <= total", b.GetUsed(), b.GetAvailable(), b.GetTotal())
	}
	if i.GetUsed() <= 0 || i.GetTotal() < i.GetUsed() {
		t.Errorf("inodes: used %d total %d: want 0 < used <= total", i.GetUsed(), i.GetTotal())
	}

	t.Run("unknown volume", func(t *testing.T) {
		other := h.NewVolume("secrets")
		_, err := h.Node.NodeGetVolumeStats(t.Context(), &csi.NodeGetVolumeStatsRequest{VolumeId: other.ID, VolumePath: other.Target})
		assertCode(t, err, codes.NotFound)
	})
	t.Run("published volume at a path that is not its target", func(t *testing.T) {
		_, err := h.Node.NodeGetVolumeStats(t.Context(), &csi.NodeGetVolumeStatsRequest{VolumeId: v.ID, VolumePath: filepath.Dir(v.Target)})
		assertCode(t, err, codes.NotFound)
	})
	t.Run("published volume at another volume's target", func(t *testing.T) {
		other := h.NewVolume("secrets")
		publish(t, h, other, appClass)
		_, err := h.Node.NodeGetVolumeStats(t.Context(), &csi.NodeGetVolumeStatsRequest{VolumeId: v.ID, VolumePath: other.Target})
		assertCode(t, err, codes.NotFound)
	})
	t.Run("after unpublish", func(t *testing.T) {
		unpublish(t, h, v)
		_, err := h.Node.NodeGetVolumeStats(t.Context(), &csi.NodeGetVolumeStatsRequest{VolumeId: v.ID, VolumePath: v.Target})
		assertCode(t, err, codes.NotFound)
	})
}

func mustUnmount(t *testing.T, target string) {
	t.Helper()
	if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
		t.Fatalf("unmount %s: %v", target, err)
	}
}

func mustMount(t *testing.T, source, target, fstype string, flags uintptr, data string) {
	t.Helper()
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		t.Fatalf("mount %s on %s: %v", source, target, err)
	}
}

func mustWrite(t *testing.T, path, contents string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(contents), 0o600); err != nil {
		t.Fatal(err)
	}
}
