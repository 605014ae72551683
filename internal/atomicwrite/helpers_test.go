package atomicwrite_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/internal/atomicwrite"
)

// volume is a volume directory with an empty sentinel directory beside it
// that no Write may ever touch.
type volume struct {
	base    string // parent of dir and outside
	dir     string
	outside string
}

// backends are the file systems every volume test runs on.
var backends = []struct {
	name  string
	tmpfs bool
}{
	{name: "tempdir"},
	{name: "tmpfs", tmpfs: true},
}

func newVolume(t testing.TB, tmpfs bool) volume {
	t.Helper()
	base := t.TempDir()
	v := volume{base: base, dir: filepath.Join(base, "vol"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{v.dir, v.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if tmpfs {
		mountTmpfs(t, v.dir)
	}
	return v
}

// mountTmpfs mounts a fresh tmpfs on dir until the test ends. Tests run as
// root, so a failed mount is a failure, not a skip.
func mountTmpfs(t testing.TB, dir string) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=512m,mode=0755"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount tmpfs %s: %v", dir, err)
		}
	})
}

func mustWrite(t testing.TB, dir string, files []atomicwrite.File) bool {
	t.Helper()
	changed, err := atomicwrite.Write(dir, files)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return changed
}

// generations lists the generation directories in dir.
func generations(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var gens []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "..") {
			gens = append(gens, e.Name())
		}
	}
	return gens
}

// age sets the mtime of dir/name, the time a generation was retired, to long ago.
func age(t testing.TB, dir, name string) {
	t.Helper()
	long := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, name), long, long); err != nil {
		t.Fatal(err)
	}
}

func currentGen(t testing.TB, dir string) string {
	t.Helper()
	gen, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatalf("read ..data: %v", err)
	}
	return gen
}

// entry is what a snapshot records about one file system entry.
type entry struct {
	Mode     fs.FileMode
	ModTime  time.Time
	Target   string
	Contents string
}

// snapshot records every entry under root, without following symlinks.
func snapshot(t testing.TB, root string) map[string]entry {
	t.Helper()
	snap := make(map[string]entry)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{Mode: fi.Mode(), ModTime: fi.ModTime()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Target, err = os.Readlink(p)
		case fi.Mode().IsRegular():
			var b []byte
			b, err = os.ReadFile(p)
			e.Contents = string(b)
		}
		rel, _ := filepath.Rel(root, p)
		snap[rel] = e
		return err
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", root, err)
	}
	return snap
}

func assertEmpty(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("%s holds %d entries, want none: something was written outside the volume", dir, len(entries))
	}
}

// normalized is files sorted by Path with DefaultMode filled in, as Read returns them.
func normalized(files []atomicwrite.File) []atomicwrite.File {
	out := slices.Clone(files)
	for i := range out {
		if out[i].Mode == 0 {
			out[i].Mode = atomicwrite.DefaultMode
		}
	}
	slices.SortFunc(out, func(a, b atomicwrite.File) int { return strings.Compare(a.Path, b.Path) })
	if out == nil {
		out = []atomicwrite.File{}
	}
	return out
}

// checkVolume asserts that dir holds exactly files in the documented layout.
func checkVolume(t *testing.T, dir string, files []atomicwrite.File) {
	t.Helper()
	want := normalized(files)
	got, err := atomicwrite.Read(dir)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	for _, f := range want {
		checkFile(t, dir, f)
	}
	checkRoot(t, dir, want)
}

// checkFile checks the real file through ..data and the user path through the top-level link.
func checkFile(t *testing.T, dir string, f atomicwrite.File) {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(dir, "..data", f.Path))
	if err != nil {
		t.Fatalf("lstat real file: %v", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != f.Mode {
		t.Errorf("%s: mode %v, want regular file %v", f.Path, fi.Mode(), f.Mode)
	}
	b, err := os.ReadFile(filepath.Join(dir, f.Path))
	if err != nil {
		t.Fatalf("read through user path: %v", err)
	}
	if string(b) != string(f.Contents) {
		t.Errorf("%s: contents %q, want %q", f.Path, b, f.Contents)
	}
	for d := filepath.Dir(f.Path); d != "."; d = filepath.Dir(d) {
		di, err := os.Lstat(filepath.Join(dir, "..data", d))
		if err != nil || !di.IsDir() || di.Mode().Perm() != 0o755 {
			t.Errorf("directory %s: %v, %v; want a 0755 directory", d, di, err)
		}
	}
}

// checkRoot checks that dir holds ..data, the current generation and one link
// per top-level name, nothing else besides retired generations.
func checkRoot(t *testing.T, dir string, want []atomicwrite.File) {
	t.Helper()
	gen := currentGen(t, dir)
	wantRoot := map[string]string{"..data": gen, gen: "dir 0755"}
	for _, f := range want {
		name, _, _ := strings.Cut(f.Path, "/")
		wantRoot[name] = "..data/" + name
	}
	gotRoot := make(map[string]string)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() && strings.HasPrefix(e.Name(), "..") && e.Name() != gen {
			continue // a retired generation, see TestWriteRetiresGenerations
		}
		if e.Type()&fs.ModeSymlink != 0 {
			gotRoot[e.Name()], _ = os.Readlink(p)
			continue
		}
		fi, _ := os.Lstat(p)
		gotRoot[e.Name()] = fi.Mode().String()
		if fi.IsDir() && fi.Mode().Perm() == 0o755 {
			gotRoot[e.Name()] = "dir 0755"
		}
	}
	if diff := cmp.Diff(wantRoot, gotRoot); diff != "" {
		t.Errorf("volume root entries (-want +got):\n%s", diff)
	}
}
