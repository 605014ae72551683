package atomicwrite

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// crashSet is version v of a volume whose top-level names come and go:
// "keep" stays, "old" only in v1, "new" and "dir/" only in v2.
func crashSet(v string) []File {
	files := []File{{Path: "keep", Mode: 0o644, Contents: []byte(v)}}
	if v == "v1" {
		return append(files, File{Path: "old", Mode: 0o600, Contents: []byte(v)})
	}
	return append(files, File{Path: "new", Mode: 0o644, Contents: []byte(v)},
		File{Path: "dir/nested", Mode: 0o644, Contents: []byte(v)})
}

// killedWrite runs the steps of write that change dir, in the order write
// runs them, and stops after the named step, as a SIGKILL there would.
func killedWrite(t *testing.T, dir string, files []File, after string) {
	t.Helper()
	want, err := normalize(files)
	if err != nil {
		t.Fatal(err)
	}
	names := topLevelNames(want)
	prev, _ := currentGeneration(dir)
	gen, err := writeGeneration(dir, want, keepGroup)
	if err != nil || after == "write.generation" {
		mustNot(t, err)
		return
	}
	if _, err := linkNames(dir, names); err != nil || after == "write.linked" {
		mustNot(t, err)
		return
	}
	if err := swap(dir, gen); err != nil || after == "write.swapped" {
		mustNot(t, err)
		return
	}
	mustNot(t, finish(dir, names, gen, prev))
}

func mustNot(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// visible returns the files a reader of dir sees through the top-level
// names (following them, as a pod does), and the names that dangle.
func visible(t *testing.T, dir string) (map[string]string, []string) {
	t.Helper()
	got := map[string]string{}
	var dangling []string
	entries, err := os.ReadDir(dir)
	mustNot(t, err)
	for _, e := range entries {
		name := e.Name()
		if isGeneration(name) || name == dataLink {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			dangling = append(dangling, name)
			continue
		}
		mustNot(t, err)
		root := filepath.Join(dir, name)
		if fi.IsDir() {
			root += "/" // walk through the link
		}
		mustNot(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			got[rel] = string(data)
			return err
		}))
	}
	return got, dangling
}

func contents(files []File) map[string]string {
	m := map[string]string{}
	for _, f := range files {
		m[f.Path] = string(f.Contents)
	}
	return m
}

// TestKilledWriteLeavesOneCompleteSet: a writer killed after any step of a
// Write leaves every name of the generation ..data names linked, with that
// generation's contents (the old set or the new set, complete; a name of
// the other set may dangle), and Repair then leaves exactly that set, with
// no dangling or temporary link; the next Write writes the new set.
func TestKilledWriteLeavesOneCompleteSet(t *testing.T) {
	for _, step := range []string{"write.generation", "write.linked", "write.swapped", "write.cleaned"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := Write(dir, crashSet("v1")); err != nil {
				t.Fatal(err)
			}
			killedWrite(t, dir, crashSet("v2"), step)
			want, other := contents(crashSet("v1")), crashSet("v2")
			if step == "write.swapped" || step == "write.cleaned" {
				want, other = contents(crashSet("v2")), crashSet("v1")
			}
			got, dangling := visible(t, dir)
			for p, c := range want {
				if got[p] != c {
					t.Errorf("after a kill at %s, %s reads %q, want %q (one complete set)", step, p, got[p], c)
				}
			}
			// Until the next call repairs it, a name only the other set has
			// may dangle: a new one linked before the swap, an old one not
			// yet removed after it.
			for _, name := range dangling {
				if !slices.Contains(topLevelNames(other), name) {
					t.Errorf("after a kill at %s, %q dangles and is no name of the other set", step, name)
				}
			}

			mustNot(t, Repair(dir))
			got, dangling = visible(t, dir)
			if diff := cmp.Diff(want, got); diff != "" || len(dangling) > 0 {
				t.Errorf("after Repair (-want +got):\n%s\ndangling: %v", diff, dangling)
			}
			for _, tmp := range []string{dataTmpLink, nameTmpLink} {
				if _, err := os.Lstat(filepath.Join(dir, tmp)); err == nil {
					t.Errorf("%s left after Repair", tmp)
				}
			}

			if _, err := Write(dir, crashSet("v2")); err != nil {
				t.Fatal(err)
			}
			got, dangling = visible(t, dir)
			if diff := cmp.Diff(contents(crashSet("v2")), got); diff != "" || len(dangling) > 0 {
				t.Errorf("after the next Write (-want +got):\n%s\ndangling: %v", diff, dangling)
			}
		})
	}
}

// TestRepairLeftovers: Repair removes temporary links and the links of a
// volume without ..data (a first write killed before its swap), leaves
// correct links and entries the writer did not make, and is a no-op on a
// tidy volume.
func TestRepairLeftovers(t *testing.T) {
	dir := t.TempDir()
	killedWrite(t, dir, crashSet("v2"), "write.linked")
	mustNot(t, os.Symlink("..data/x", filepath.Join(dir, nameTmpLink)))
	mustNot(t, os.WriteFile(filepath.Join(dir, "foreign"), []byte("f"), 0o600))
	mustNot(t, Repair(dir))
	entries, err := os.ReadDir(dir)
	mustNot(t, err)
	var left []string
	for _, e := range entries {
		if !isGeneration(e.Name()) {
			left = append(left, e.Name())
		}
	}
	if !slices.Equal(left, []string{"foreign"}) {
		t.Errorf("entries after Repair of a volume without ..data: %v, want only the foreign file", left)
	}

	tidy := t.TempDir()
	if _, err := Write(tidy, crashSet("v1")); err != nil {
		t.Fatal(err)
	}
	before, _ := visible(t, tidy)
	gen, _ := currentGeneration(tidy)
	mustNot(t, Repair(tidy))
	after, dangling := visible(t, tidy)
	if now, _ := currentGeneration(tidy); now != gen || !cmp.Equal(before, after) || len(dangling) > 0 {
		t.Errorf("Repair changed a tidy volume: %s -> %s, %v -> %v, dangling %v", gen, now, before, after, dangling)
	}
}
