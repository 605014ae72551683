package volume

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"

	"github.com/keymount/keymount/driver/targetpath"
)

type testEnv struct {
	m    *Manager
	base string
	root string // kubelet root
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("volume tests mount tmpfs and must run as root")
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(filepath.Join(base, "state"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmountUnder(t, base) })
	root := filepath.Join(base, "kubelet")
	if err := os.Mkdir(root, 0o750); err != nil {
		t.Fatal(err)
	}
	return &testEnv{m: m, base: base, root: root}
}

func (e *testEnv) target(t *testing.T, pod, name string) *targetpath.Target {
	t.Helper()
	tg, err := targetpath.Parse(e.root, filepath.Join(e.root, "pods", pod, "volumes", "kubernetes.io~csi", name, "mount"), pod)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// publish mounts a tmpfs for id and binds it read-only onto tg.
func (e *testEnv) publish(t *testing.T, id string, tg *targetpath.Target) *Volume {
	t.Helper()
	v := e.m.Lookup(id)
	if err := e.m.MountTmpfs(v); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Bind(v, tg, true); err != nil {
		t.Fatal(err)
	}
	return v
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
	ok, err := isMountRoot(unix.AT_FDCWD, p)
	if errors.Is(err, unix.ENOENT) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestBindIsReadOnlyFromTheStart(t *testing.T) {
	e := newEnv(t)
	tg := e.target(t, "uid", "s")
	v := e.publish(t, "csi-1", tg)
	if !isMounted(t, v.Dir) || !isMounted(t, tg.Path) {
		t.Fatal("tmpfs or target not mounted")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(tg.Path, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Fatalf("target is not backed by tmpfs: %v", err)
	}
	if err := os.WriteFile(filepath.Join(v.DataDir, "x"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(tg.Path, "x")); err != nil || string(b) != "1" {
		t.Fatalf("read through target: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(tg.Path, "y"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("write into read-only target: err = %v, want EROFS", err)
	}
	if _, err := os.Stat(filepath.Join(tg.Path, recordFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the record must not be visible through the target")
	}
	if err := e.m.Bind(v, tg, true); err != nil {
		t.Fatalf("second Bind of the same volume: %v", err)
	}
	if bound, err := e.m.BoundTo(v, tg); err != nil || !bound {
		t.Fatalf("BoundTo = %v, %v", bound, err)
	}
}

func TestBindRefusesForeignMountsAndSymlinks(t *testing.T) {
	e := newEnv(t)
	// A target another volume shows.
	tg := e.target(t, "uid", "s")
	e.publish(t, "csi-a", tg)
	other := e.m.Lookup("csi-b")
	if err := e.m.MountTmpfs(other); err != nil {
		t.Fatal(err)
	}
	if err := e.m.CheckTarget(other, tg); !errors.Is(err, ErrTargetInUse) {
		t.Fatalf("CheckTarget of a target bound to another volume: %v, want ErrTargetInUse", err)
	}
	if err := e.m.Bind(other, tg, true); !errors.Is(err, ErrTargetInUse) {
		t.Fatalf("Bind onto another volume's target: %v, want ErrTargetInUse", err)
	}
	// A symlink planted where kubelet's volume directory should be.
	outside := filepath.Join(e.base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	evil := e.target(t, "evil", "s")
	if err := os.MkdirAll(filepath.Dir(filepath.Dir(evil.Path)), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Dir(evil.Path)); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Bind(other, evil, true); !errors.Is(err, targetpath.ErrSymlink) {
		t.Fatalf("Bind through a symlink: %v, want ErrSymlink", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 || isMounted(t, outside) {
		t.Fatal("something was created or mounted through the symlink")
	}
}

func TestUnbindTouchesOnlyItsOwnMount(t *testing.T) {
	e := newEnv(t)
	tg := e.target(t, "uid", "s")
	v := e.publish(t, "csi-1", tg)
	stranger := e.m.Lookup("csi-2")
	if unbound, err := e.m.Unbind(stranger, tg); err != nil || unbound {
		t.Fatalf("Unbind by another volume: unbound=%v err=%v", unbound, err)
	}
	if !isMounted(t, tg.Path) {
		t.Fatal("another volume's Unbind unmounted the target")
	}
	if unbound, err := e.m.Unbind(v, tg); err != nil || !unbound {
		t.Fatalf("Unbind: unbound=%v err=%v", unbound, err)
	}
	if _, err := os.Stat(tg.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("Unbind left the target directory")
	}
	if err := e.m.RemoveTmpfs(v); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(v.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("RemoveTmpfs left the volume dir")
	}
	if err := e.m.RemoveTmpfs(v); err != nil {
		t.Fatalf("second RemoveTmpfs: %v", err)
	}
	if _, err := e.m.Get("csi-1", tg.Path); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after removal: %v, want ErrNotFound", err)
	}
}

func TestRemoveOrphans(t *testing.T) {
	e := newEnv(t)
	kept := e.publish(t, "csi-kept", e.target(t, "uid", "kept"))
	orphanTarget := e.target(t, "uid", "orphan")
	orphan := e.publish(t, "csi-orphan", orphanTarget)
	// kubelet (or a node reboot of the pod dir) unmounted the target while
	// the driver was away.
	if err := unix.Unmount(orphanTarget.Path, 0); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(e.m.root, dirPrefix+"empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	n, err := e.m.RemoveOrphans()
	if err != nil || n != 1 {
		t.Fatalf("RemoveOrphans = %d, %v; want 1 removed", n, err)
	}
	if isMounted(t, orphan.Dir) {
		t.Fatal("the orphaned tmpfs is still mounted")
	}
	for _, p := range []string{orphan.Dir, empty} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s survived", p)
		}
	}
	if !isMounted(t, kept.Dir) {
		t.Fatal("a tmpfs a target shows was removed")
	}
}

func TestRecordRoundTripAndCorruption(t *testing.T) {
	e := newEnv(t)
	v := e.publish(t, "csi-4", e.target(t, "uid", "t"))
	if r, err := v.LoadRecord(); r != nil || err != nil {
		t.Fatalf("fresh volume record = %v, %v; want none", r, err)
	}
	want := &Record{VolumeID: "csi-4", Class: "db", Objects: []Object{{ID: "a", Version: "1"}}, Generation: 3}
	if err := v.SaveRecord(want); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.Lookup("csi-4").LoadRecord()
	if err != nil || got.Class != "db" || got.Generation != 3 || got.Objects[0].Version != "1" {
		t.Fatalf("record = %+v, %v", got, err)
	}
	for name, data := range map[string]string{
		"truncated":      `{"volumeID":"csi-4","secretProv`,
		"empty":          ``,
		"another volume": `{"volumeID":"csi-5"}`,
	} {
		if err := os.WriteFile(filepath.Join(v.Dir, recordFile), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := v.LoadRecord(); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s record: err = %v, want ErrCorruptRecord", name, err)
		}
	}
}

// TestVolumeDirsAreInjective: every ID gets its own directory, whatever it
// contains, also IDs that look like directory names of other IDs.
func TestVolumeDirsAreInjective(t *testing.T) {
	m := &Manager{root: "/state/volumes"}
	ids := []string{"csi-0123abc", "../../etc", "a/b", ".hidden", string(make([]byte, 200)), "",
		"v-" + "0123", "sha256-abc", "CSI-0123ABC", "csi-0123abc ", "csi-0123abc\x00"}
	seen := map[string]string{}
	for _, id := range ids {
		dir := m.Lookup(id).Dir
		if filepath.Dir(dir) != "/state/volumes" {
			t.Errorf("ID %q mapped outside the volumes dir: %s", id, dir)
		}
		if prev, dup := seen[dir]; dup {
			t.Errorf("IDs %q and %q share %s", prev, id, dir)
		}
		seen[dir] = id
	}
}

func TestNewManagerValidates(t *testing.T) {
	if _, err := NewManager("relative", 1); err == nil {
		t.Error("relative state dir accepted")
	}
	if _, err := NewManager(t.TempDir(), 0); err == nil {
		t.Error("zero size accepted")
	}
}
