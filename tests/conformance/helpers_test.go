package conformance_test

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/tests/harness"
)

// file is what a test expects at a path of the volume.
type file struct {
	contents string
	mode     os.FileMode
}

// appClass is the class most tests publish: a renamed object with its own
// mode, an object with the default mode, and a nested path.
const (
	appClass   = "app"
	appObjects = `- objectName: db/password
  objectAlias: password
  filePermission: "0600"
- objectName: api-token
- objectName: config/app.yaml
`
)

// appFiles are the files appClass mounts from the objects writeApp writes.
func appFiles(suffix string) map[string]file {
	return map[string]file{
		"password":        {"s3cr3t" + suffix, 0o600},
		"api-token":       {"tok-" + suffix, 0o644},
		"config/app.yaml": {"level: " + suffix + "\n", 0o644},
	}
}

// startApp starts a node serving appClass with contents for suffix.
func startApp(t *testing.T) *harness.Harness {
	t.Helper()
	h := harness.Start(t, harness.Options{})
	h.WriteClass(appClass, appObjects)
	writeApp(h, "v1")
	return h
}

// writeApp writes the objects of appClass with contents for suffix.
func writeApp(h *harness.Harness, suffix string) {
	h.WriteObject("db/password", "s3cr3t"+suffix)
	h.WriteObject("api-token", "tok-"+suffix)
	h.WriteObject("config/app.yaml", "level: "+suffix+"\n")
}

// publish publishes v read-only, as kubelet does for every secrets volume
// (the driver refuses anything else).
func publish(t *testing.T, h *harness.Harness, v harness.Volume, class string) {
	t.Helper()
	if err := h.Publish(t.Context(), v, class, true); err != nil {
		t.Fatalf("NodePublishVolume(%s): %v", v.Name, err)
	}
}

func unpublish(t *testing.T, h *harness.Harness, v harness.Volume) {
	t.Helper()
	if err := h.Unpublish(t.Context(), v); err != nil {
		t.Fatalf("NodeUnpublishVolume(%s): %v", v.Name, err)
	}
}

// generation returns the generation directory ..data names in target.
func generation(t *testing.T, target string) string {
	t.Helper()
	gen, err := os.Readlink(filepath.Join(target, "..data"))
	if err != nil {
		t.Fatalf("read ..data: %v", err)
	}
	if !strings.HasPrefix(gen, "..") || strings.Contains(gen, "/") {
		t.Fatalf("..data points to %q, not to a generation directory beside it", gen)
	}
	return gen
}

// assertFiles checks that target shows exactly want: every top-level name
// is a symlink into ..data, every file has its contents and mode, and no
// other user-visible name exists.
func assertFiles(t *testing.T, target string, want map[string]file) {
	t.Helper()
	gen := generation(t, target)
	wantTop := map[string]bool{}
	for p, w := range want {
		top := strings.Split(p, "/")[0]
		wantTop[top] = true
		link, err := os.Readlink(filepath.Join(target, top))
		if err != nil || link != path.Join("..data", top) {
			t.Errorf("%s: want a symlink to ..data/%s, got %q (%v)", top, top, link, err)
		}
		fi, err := os.Stat(filepath.Join(target, p))
		if err != nil {
			t.Errorf("stat %s: %v", p, err)
			continue
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm() != w.mode {
			t.Errorf("%s: mode %v, want a regular file with %v", p, fi.Mode(), w.mode)
		}
		got, err := os.ReadFile(filepath.Join(target, p))
		if err != nil || string(got) != w.contents {
			t.Errorf("%s: contents %q (%v), want %q", p, got, err, w.contents)
		}
		if _, err := os.Stat(filepath.Join(target, gen, p)); err != nil {
			t.Errorf("%s is not in the current generation %s: %v", p, gen, err)
		}
	}
	var gotTop []string
	for _, name := range entries(t, target) {
		if !strings.HasPrefix(name, "..") {
			gotTop = append(gotTop, name)
		}
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(wantTop)), gotTop); diff != "" {
		t.Errorf("user-visible names in %s (-want +got):\n%s", target, diff)
	}
}

// assertTidy checks that target holds no temporary links and nothing
// beside ..data but generation directories: the current one and retired ones
// the writer keeps for a grace period so that a reader's lookup in flight
// still finds its files. It returns the retired generations.
func assertTidy(t *testing.T, target string) []string {
	t.Helper()
	gen := generation(t, target)
	var retired []string
	for _, name := range entries(t, target) {
		if !strings.HasPrefix(name, "..") || name == "..data" || name == gen {
			continue
		}
		fi, err := os.Lstat(filepath.Join(target, name))
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: leftover entry %q beside ..data -> %s", target, name, gen)
			continue
		}
		retired = append(retired, name)
	}
	return retired
}

// entries lists the names in dir, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	names := make([]string, 0, len(des))
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// assertPublished checks the mounts of a published volume: the target is a
// read-only bind mount of the data directory of a tmpfs, and the volume's
// own tmpfs is mounted (writable, for the driver) in the state directory.
func assertPublished(t *testing.T, h *harness.Harness, v harness.Volume) {
	t.Helper()
	m, err := harness.MountAt(v.Target)
	switch {
	case err != nil:
		t.Fatalf("read mount table: %v", err)
	case m == nil:
		t.Fatalf("target %s is not a mount point", v.Target)
	}
	if m.FSType != "tmpfs" || m.Root != "/data" {
		t.Errorf("target mount: fstype %q root %q, want tmpfs /data", m.FSType, m.Root)
	}
	if !harness.HasOption(m, "ro") {
		t.Errorf("target mount options %q: not read-only", m.Options)
	}
	vm, err := harness.MountAt(h.VolumeDir(v.ID))
	switch {
	case err != nil:
		t.Fatalf("read mount table: %v", err)
	case vm == nil:
		t.Fatalf("volume dir %s is not a mount point", h.VolumeDir(v.ID))
	}
	if vm.FSType != "tmpfs" || harness.HasOption(vm, "ro") {
		t.Errorf("volume mount: fstype %q options %q, want a writable tmpfs", vm.FSType, vm.Options)
	}
	if vm.Major != m.Major || vm.Minor != m.Minor {
		t.Errorf("target is device %d:%d, the volume tmpfs %d:%d: not the same filesystem", m.Major, m.Minor, vm.Major, vm.Minor)
	}
}

// assertGone checks that nothing of v is left: no mount at or below its
// target or volume directory, and neither directory.
func assertGone(t *testing.T, h *harness.Harness, v harness.Volume) {
	t.Helper()
	for _, dir := range []string{v.Target, h.VolumeDir(v.ID)} {
		assertNoMounts(t, dir)
		if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still exists (lstat: %v)", dir, err)
		}
	}
}

// assertNoMounts checks that nothing is mounted at dir or below it.
func assertNoMounts(t *testing.T, dir string) {
	t.Helper()
	ms, err := harness.Mounts(dir)
	if err != nil {
		t.Fatalf("read mount table: %v", err)
	}
	for _, m := range ms {
		t.Errorf("left mounted: %s (%s)", m.Mountpoint, m.FSType)
	}
}

// assertCode checks an RPC error's gRPC code and that its message names
// every string in mention.
func assertCode(t *testing.T, err error, want codes.Code, mention ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want %v", want)
	}
	st := status.Convert(err)
	if st.Code() != want {
		t.Fatalf("got %v (%s), want %v", st.Code(), st.Message(), want)
	}
	for _, s := range mention {
		if !strings.Contains(st.Message(), s) {
			t.Errorf("message %q does not mention %q", st.Message(), s)
		}
	}
}
