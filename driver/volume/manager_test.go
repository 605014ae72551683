package volume

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

func newManager(t *testing.T) (*Manager, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("volume tests mount tmpfs and must run as root")
	}
	base := t.TempDir()
	m, err := NewManager(filepath.Join(base, "state"), 1<<20, mount.New(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmountUnder(t, base) })
	return m, base
}

// unmountUnder removes every mount a failed test left below dir.
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	for range 4 {
		mps, err := mount.New("").List()
		if err != nil {
			t.Error(err)
			return
		}
		found := false
		for i := len(mps) - 1; i >= 0; i-- {
			if rel, err := filepath.Rel(dir, mps[i].Path); err == nil && filepath.IsLocal(rel) {
				found = true
				_ = unix.Unmount(mps[i].Path, unix.MNT_DETACH)
			}
		}
		if !found {
			return
		}
	}
}

func isMounted(t *testing.T, p string) bool {
	t.Helper()
	ok, err := mount.New("").IsMountPoint(p)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func fsType(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Type
}

func TestEnsureMountsAndBinds(t *testing.T) {
	m, base := newManager(t)
	target := filepath.Join(base, "pods", "uid", "volumes", "kubernetes.io~csi", "s", "mount")
	v, created, err := m.Ensure("csi-1", target, true)
	if err != nil {
		t.Fatal(err)
	}
	if !created || !isMounted(t, v.Dir) || !isMounted(t, target) {
		t.Fatalf("created=%v dir mounted=%v target mounted=%v", created, isMounted(t, v.Dir), isMounted(t, target))
	}
	if fsType(t, target) != unix.TMPFS_MAGIC {
		t.Fatal("target is not backed by tmpfs")
	}
	// The driver writes into DataDir; the pod sees it through the read-only bind.
	if err := os.WriteFile(filepath.Join(v.DataDir, "x"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "x")); err != nil || string(b) != "1" {
		t.Fatalf("read through target: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(target, "y"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("write into read-only target: err = %v, want EROFS", err)
	}
	if _, err := os.Stat(filepath.Join(target, recordFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the record must not be visible through the target")
	}

	again, created, err := m.Ensure("csi-1", target, true)
	if err != nil || created || again.Dir != v.Dir {
		t.Fatalf("second Ensure: created=%v err=%v", created, err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "x")); err != nil || string(b) != "1" {
		t.Fatal("second Ensure must keep the content")
	}
}

func TestEnsureReplacesStaleTarget(t *testing.T) {
	m, base := newManager(t)
	target := filepath.Join(base, "target")
	stale := filepath.Join(base, "stale")
	for _, d := range []string{target, stale} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(stale, "old"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(stale, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	v, created, err := m.Ensure("csi-2", target, false)
	if err != nil || !created {
		t.Fatalf("Ensure over stale mount: created=%v err=%v", created, err)
	}
	if _, err := os.Stat(filepath.Join(target, "old")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("target still shows the stale mount")
	}
	if err := os.WriteFile(filepath.Join(target, "rw"), nil, 0o644); err != nil {
		t.Fatalf("read-write volume not writable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(v.DataDir, "rw")); err != nil {
		t.Fatal("target is not bound to the volume's data dir")
	}
}

func TestRemoveIsIdempotent(t *testing.T) {
	m, base := newManager(t)
	target := filepath.Join(base, "target")
	v, _, err := m.Ensure("csi-3", target, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := m.Remove("csi-3", target); err != nil {
			t.Fatalf("Remove #%d: %v", i+1, err)
		}
		for _, p := range []string{target, v.Dir} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("Remove #%d left %s behind", i+1, p)
			}
		}
	}
	if _, err := m.Get("csi-3", target); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Remove: err = %v, want ErrNotFound", err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	m, base := newManager(t)
	v, _, err := m.Ensure("csi-4", filepath.Join(base, "t"), false)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := v.LoadRecord(); r != nil || err != nil {
		t.Fatalf("fresh volume record = %v, %v; want none", r, err)
	}
	want := &Record{VolumeID: "csi-4", Class: "db", Objects: []Object{{ID: "a", Version: "1"}}, Generation: 3}
	if err := v.SaveRecord(want); err != nil {
		t.Fatal(err)
	}
	got, err := m.Lookup("csi-4", "").LoadRecord()
	if err != nil || got.Class != "db" || got.Generation != 3 || got.Objects[0].Version != "1" {
		t.Fatalf("record = %+v, %v", got, err)
	}
}

func TestVolumeNames(t *testing.T) {
	m := &Manager{root: "/state/volumes"}
	if got := m.volume("csi-0123abc", "/t").Dir; got != "/state/volumes/csi-0123abc" {
		t.Errorf("safe ID dir = %s", got)
	}
	for _, id := range []string{"../../etc", "a/b", ".hidden", string(make([]byte, 200))} {
		dir := m.volume(id, "/t").Dir
		if filepath.Dir(dir) != "/state/volumes" || filepath.Base(dir)[:7] != "sha256-" {
			t.Errorf("unsafe ID %q mapped to %s", id, dir)
		}
	}
}

func TestNewManagerValidates(t *testing.T) {
	if _, err := NewManager("relative", 1, mount.New("")); err == nil {
		t.Error("relative state dir accepted")
	}
	if _, err := NewManager(t.TempDir(), 0, mount.New("")); err == nil {
		t.Error("zero size accepted")
	}
}
