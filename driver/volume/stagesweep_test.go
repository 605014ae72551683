package volume

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// leaveStages leaves in the volume directory of pod/name what a driver
// killed at each step of a provider call leaves: a stage tmpfs (mounted
// twice over), a bare directory, a directory a late provider wrote into,
// and a symlink carrying the prefix; beside kubelet's own entries.
func leaveStages(t *testing.T, e *testEnv, pod, name string) (volDir, outside string) {
	t.Helper()
	tg := e.target(t, pod, name)
	f, err := tg.Open(true)
	must(t, err)
	_ = f.Close()
	volDir = filepath.Dir(tg.Path)
	must(t, os.WriteFile(filepath.Join(volDir, "vol_data.json"), []byte("{}"), 0o600))
	mounted := filepath.Join(volDir, StagePrefix+"mounted")
	must(t, os.Mkdir(mounted, 0o750))
	for range 2 {
		must(t, unix.Mount("tmpfs", mounted, "tmpfs", 0, "size=1m"))
		must(t, os.WriteFile(filepath.Join(mounted, "secret"), []byte("s"), 0o600))
	}
	must(t, os.Mkdir(filepath.Join(volDir, StagePrefix+"bare"), 0o750))
	must(t, os.MkdirAll(filepath.Join(volDir, StagePrefix+"late", "d"), 0o750))
	must(t, os.WriteFile(filepath.Join(volDir, StagePrefix+"late", "d", "secret"), []byte("s"), 0o600))
	outside = filepath.Join(e.base, "outside-"+pod+name)
	must(t, os.Mkdir(outside, 0o750))
	must(t, os.WriteFile(filepath.Join(outside, "keep"), nil, 0o600))
	must(t, os.Symlink(outside, filepath.Join(volDir, StagePrefix+"link")))
	return volDir, outside
}

func checkSwept(t *testing.T, volDir, outside string) {
	t.Helper()
	entries, err := os.ReadDir(volDir)
	must(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != "mount" || names[1] != "vol_data.json" {
		t.Errorf("%s holds %v after the sweep, want kubelet's mount and vol_data.json only", volDir, names)
	}
	if isMounted(t, filepath.Join(volDir, StagePrefix+"mounted")) {
		t.Error("the stage tmpfs is still mounted")
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("the sweep followed a symlink out of the volume directory: %v", err)
	}
}

// TestRemoveStages: what a killed driver leaves beside a target is
// unmounted and removed, without following a symlink, and kubelet's own
// entries stay; kubelet can then remove the volume directory as it does
// after an unpublish (mount dir, vol_data.json, then the directory).
func TestRemoveStages(t *testing.T) {
	e := newEnv(t)
	volDir, outside := leaveStages(t, e, "uid", "s")
	n, err := e.m.RemoveStages(e.target(t, "uid", "s"))
	if err != nil || n != 4 {
		t.Fatalf("RemoveStages = %d, %v; want 4 removed", n, err)
	}
	checkSwept(t, volDir, outside)
	for _, p := range []string{filepath.Join(volDir, "mount"), filepath.Join(volDir, "vol_data.json"), volDir} {
		if err := os.Remove(p); err != nil {
			t.Errorf("kubelet's clean-up: %v", err)
		}
	}
	if n, err := e.m.RemoveStages(e.target(t, "uid", "s")); err != nil || n != 0 {
		t.Errorf("RemoveStages of a volume directory kubelet removed = %d, %v; want 0, nil", n, err)
	}
}

// TestRemoveOrphanStages: at start-up the stages of every pod volume are
// removed, and nothing else below the kubelet root.
func TestRemoveOrphanStages(t *testing.T) {
	e := newEnv(t)
	dirA, outA := leaveStages(t, e, "pod-a", "one")
	dirB, outB := leaveStages(t, e, "pod-b", "two")
	other := filepath.Join(e.root, "pods", "pod-c", "volumes", "kubernetes.io~empty-dir", "x", StagePrefix+"kept")
	must(t, os.MkdirAll(other, 0o750))
	n, err := e.m.RemoveOrphanStages(e.root)
	if err != nil || n != 8 {
		t.Fatalf("RemoveOrphanStages = %d, %v; want 8", n, err)
	}
	checkSwept(t, dirA, outA)
	checkSwept(t, dirB, outB)
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a directory outside the CSI volume directories was touched: %v", err)
	}
	if n, err := e.m.RemoveOrphanStages(filepath.Join(e.base, "no-kubelet")); err != nil || n != 0 {
		t.Errorf("RemoveOrphanStages without a pods directory = %d, %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(e.base, "no-kubelet")); !errors.Is(err, os.ErrNotExist) {
		t.Error("RemoveOrphanStages created the kubelet root")
	}
}
