package hostile_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/tests/harness"
)

// Names the atomic writer keeps in a volume beside the user-visible ones.
const (
	dataLink    = "..data"
	dataTmpLink = "..data_tmp"
	nameTmpLink = "..name_tmp"
	recordFile  = "record.json"
)

// assertCode checks an RPC error's gRPC code and that its message names
// every string in mention.
func assertCode(t *testing.T, err error, want codes.Code, mention ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want %v", want)
	}
	st := status.Convert(err)
	if st.Code() != want {
		t.Fatalf("got %v (%.500s), want %v", st.Code(), st.Message(), want)
	}
	for _, s := range mention {
		if !strings.Contains(st.Message(), s) {
			t.Errorf("message %.500q does not mention %q", st.Message(), s)
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

// assertNotPublished checks that nothing of v is left on the node: no mount
// at or below its target, no mount and no directory of its tmpfs.
func assertNotPublished(t *testing.T, h *harness.Harness, v harness.Volume) {
	t.Helper()
	assertNoMounts(t, v.Target)
	assertNoMounts(t, h.VolumeDir(v.ID))
	if _, err := os.Lstat(h.VolumeDir(v.ID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("volume dir %s still exists (lstat: %v)", h.VolumeDir(v.ID), err)
	}
}

// assertStateEmpty checks that the driver keeps no volume directory.
func assertStateEmpty(t *testing.T, h *harness.Harness) {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(h.StateDir, "volumes"))
	if err != nil {
		t.Fatalf("list volume dirs: %v", err)
	}
	for _, de := range des {
		t.Errorf("volume dir left in the state dir: %s", de.Name())
	}
}

// generationOf returns the generation ..data names in target and its files
// (path -> contents), read from the generation directory itself.
func generationOf(t *testing.T, target string) (string, map[string]string) {
	t.Helper()
	gen, err := os.Readlink(filepath.Join(target, dataLink))
	if err != nil {
		t.Fatalf("read %s: %v", dataLink, err)
	}
	if !strings.HasPrefix(gen, "..") || strings.Contains(gen, "/") {
		t.Fatalf("%s -> %q: not a generation directory beside it", dataLink, gen)
	}
	return gen, treeFiles(t, filepath.Join(target, gen))
}

// treeFiles returns every regular file below dir, path -> contents, and
// fails on anything else but directories.
func treeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			t.Errorf("%s: %v in a generation, want only files and directories", p, d.Type())
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return files
}

// assertShows checks that target shows exactly want: ..data names a
// generation holding exactly these files, every top-level name is a link
// into ..data, every file reads back through the target, and no other
// user-visible name, dangling link or temporary link is there.
func assertShows(t *testing.T, target string, want map[string]string) {
	t.Helper()
	_, got := generationOf(t, target)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files of the current generation (-want +got):\n%s", diff)
	}
	top := map[string]bool{}
	for p, contents := range want {
		top[strings.Split(p, "/")[0]] = true
		data, err := os.ReadFile(filepath.Join(target, p))
		if err != nil || string(data) != contents {
			t.Errorf("%s through the target: %.100q (%v), want %.100q", p, data, err, contents)
		}
	}
	for name := range top {
		if link, err := os.Readlink(filepath.Join(target, name)); err != nil || link != path.Join(dataLink, name) {
			t.Errorf("%s: want a link to %s/%s, got %q (%v)", name, dataLink, name, link, err)
		}
	}
	for _, name := range visibleNames(t, target) {
		if !top[name] {
			t.Errorf("%s: user-visible name that is not a provider file", name)
		}
	}
	assertNoDanglingOrTemp(t, target)
}

// visibleNames lists the names in dir that do not start with "..".
func visibleNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	var names []string
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), "..") {
			names = append(names, de.Name())
		}
	}
	return names
}

// assertNoDanglingOrTemp checks that every symlink in the top level of
// target resolves and that no temporary link of the writer is left.
func assertNoDanglingOrTemp(t *testing.T, target string) {
	t.Helper()
	des, err := os.ReadDir(target)
	if err != nil {
		t.Fatalf("list %s: %v", target, err)
	}
	for _, de := range des {
		name := de.Name()
		if name == dataTmpLink || name == nameTmpLink {
			t.Errorf("temporary link %s left in %s", name, target)
		}
		if de.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if _, err := os.Stat(filepath.Join(target, name)); err != nil {
			t.Errorf("dangling link %s in %s: %v", name, target, err)
		}
	}
}

// filesWithMarker lists the regular files below root (symlinks not
// followed) whose contents hold marker.
func filesWithMarker(t *testing.T, root string, marker []byte) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err == nil && bytes.Contains(data, marker) {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return found
}

// editRecord rewrites the record in the tmpfs of volumeID through edit,
// the way someone with write access to the node could.
func editRecord(t *testing.T, h *harness.Harness, volumeID string, edit func(map[string]any)) {
	t.Helper()
	p := filepath.Join(h.VolumeDir(volumeID), recordFile)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read record: %v", err)
	}
	rec := map[string]any{}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("decode record: %v", err)
	}
	edit(rec)
	if data, err = json.Marshal(rec); err != nil {
		t.Fatalf("encode record: %v", err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatalf("write record: %v", err)
	}
}
