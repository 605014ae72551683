package driver

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/provider/v1alpha1"
)

// writeLikeAWS writes files into target the way the existing AWS provider
// does in its default mode: a temporary file in the target, renamed over
// the file's name.
func writeLikeAWS(files map[string]string) func(target string) error {
	return func(target string) error {
		for name, content := range files {
			dst := filepath.Join(target, name)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+filepath.Base(name))
			if err != nil {
				return err
			}
			if _, err := tmp.WriteString(content); err != nil {
				return err
			}
			if err := errors.Join(tmp.Chmod(0o640), tmp.Close()); err != nil {
				return err
			}
			if err := os.Rename(tmp.Name(), dst); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestProviderWritesOwnFiles: a provider that returns no files has written
// them into target_path itself (upstream's legacy mode). It can write there
// on the first publish and on a republish, the target the pod sees stays a
// single read-only mount, the files reach the mount a running container
// holds, and the record keeps the versions and the mode.
func TestProviderWritesOwnFiles(t *testing.T) {
	n := newTestNode(t)
	target := n.target("legacy")
	n.provider.writeOwn = writeLikeAWS(map[string]string{"db.json": `{"v":1}`, "nested/user": "u1"})

	if err := n.publish(t, target); err != nil {
		t.Fatalf("first publish with a provider writing its own files: %v", err)
	}
	checkFile(t, target, "db.json", `{"v":1}`, 0o640)
	checkFile(t, target, "nested/user", "u1", 0o640)
	checkSingleReadOnlyMount(t, target)
	if err := os.WriteFile(filepath.Join(target, "planted"), nil, 0o600); !errors.Is(err, unix.EROFS) {
		t.Errorf("writing into the target after the publish: %v, want EROFS", err)
	}

	// What a running container holds: the target's mount as it is now.
	held, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()

	n.provider.writeOwn = writeLikeAWS(map[string]string{"db.json": `{"v":2}`, "nested/user": "u1"})
	n.provider.version = "2"
	if err := n.publish(t, target); err != nil {
		t.Fatalf("republish with a provider writing its own files: %v", err)
	}
	checkFile(t, target, "db.json", `{"v":2}`, 0o640)
	checkSingleReadOnlyMount(t, target)
	data, err := os.ReadFile(filepath.Join("/proc/self/fd", strconv.Itoa(int(held.Fd())), "db.json"))
	if err != nil || string(data) != `{"v":2}` {
		t.Errorf("through the mount held since the first publish: %q, %v; want the new content", data, err)
	}

	rec, err := n.srv.d.deps.Volumes.Lookup("csi-legacy").LoadRecord()
	if err != nil {
		t.Fatal(err)
	}
	if !rec.ProviderWrites || rec.Generation != 2 || len(rec.Objects) != 1 || rec.Objects[0].Version != "2" {
		t.Errorf("record: providerWrites=%t generation=%d objects=%+v; want true, 2, obj@2", rec.ProviderWrites, rec.Generation, rec.Objects)
	}
	if n.provider.calls != 2 {
		t.Errorf("provider calls = %d, want 2", n.provider.calls)
	}
}

// TestProviderWritesSymlinkRefused: a provider in the legacy mode that
// plants a symlink in the target gets an error, and nothing is published.
func TestProviderWritesSymlinkRefused(t *testing.T) {
	n := newTestNode(t)
	target := n.target("planted")
	n.provider.writeOwn = func(target string) error { return os.Symlink("/etc/shadow", filepath.Join(target, "shadow")) }
	err := n.publish(t, target)
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("publish: %v, want an error about the symlink", err)
	}
	if ms, _ := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target)); len(ms) != 0 {
		t.Errorf("%d mounts left at the target", len(ms))
	}
}

// TestNormalProviderIgnoresStage: a provider that returns files is in the
// normal mode; anything it also wrote into the target is not the volume's.
func TestNormalProviderIgnoresStage(t *testing.T) {
	n := newTestNode(t)
	target := n.target("normal")
	n.provider.files = []*v1alpha1.File{{Path: "a", Mode: 0o644, Contents: []byte("from the response")}}
	n.provider.writeOwn = writeLikeAWS(map[string]string{"stray": "x"})
	if err := n.publish(t, target); err != nil {
		t.Fatal(err)
	}
	checkFile(t, target, "a", "from the response", 0o644)
	if _, err := os.Stat(filepath.Join(target, "stray")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file the provider wrote besides its response is visible: %v", err)
	}
	checkSingleReadOnlyMount(t, target)
	rec, err := n.srv.d.deps.Volumes.Lookup("csi-normal").LoadRecord()
	if err != nil || rec.ProviderWrites {
		t.Errorf("record: %+v, %v; want providerWrites false", rec, err)
	}
}

func checkFile(t *testing.T, target, name, want string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(target, name)
	data, err := os.ReadFile(p)
	if err != nil || string(data) != want {
		t.Errorf("%s = %q, %v; want %q", name, data, err, want)
		return
	}
	info, err := os.Stat(p)
	if err != nil || info.Mode().Perm() != mode {
		t.Errorf("%s mode = %v, %v; want %v", name, info.Mode().Perm(), err, mode)
	}
}

func checkSingleReadOnlyMount(t *testing.T, target string) {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Fatalf("%d mounts at the target, want 1 (the volume's bind; no stage left)", len(ms))
	}
	if !strings.Contains(","+ms[0].Options+",", ",ro,") {
		t.Errorf("the target's mount options %q are not read-only", ms[0].Options)
	}
}
