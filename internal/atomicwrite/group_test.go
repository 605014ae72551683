package atomicwrite_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/keymount/keymount/internal/atomicwrite"
)

// testGroup and otherGroup are group IDs no file of the test machine is
// likely to have by accident.
const (
	testGroup  = 4242
	otherGroup = 4343
)

// owner returns the uid and gid of p, not following a symlink.
func owner(t *testing.T, p string) (uid, gid uint32) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("%s: no stat_t", p)
	}
	return st.Uid, st.Gid
}

// checkGroup asserts that dir itself, the current generation and every
// directory and file in it belong to the writer's user and group gid, with
// the modes Write gives them.
func checkGroup(t *testing.T, dir string, files []atomicwrite.File, gid int) {
	t.Helper()
	wantUID := uint32(os.Geteuid())
	gen := filepath.Join(dir, currentGen(t, dir))
	for _, p := range []string{dir, gen} {
		if uid, g := owner(t, p); uid != wantUID || g != uint32(gid) {
			t.Errorf("%s: owner %d:%d, want %d:%d", p, uid, g, wantUID, gid)
		}
	}
	err := filepath.WalkDir(gen, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if uid, g := owner(t, p); uid != wantUID || g != uint32(gid) {
			t.Errorf("%s: owner %d:%d, want %d:%d", p, uid, g, wantUID, gid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkVolume(t, dir, files) // modes, contents and layout as Write gives them
}

// TestWriteGroup: WriteGroup puts the volume directory and every directory
// and file of the generation in the group, keeps owner and modes, and
// writes a new generation when the group changes, not when it stays.
func TestWriteGroup(t *testing.T) {
	files := []atomicwrite.File{file("token", "t1", 0o440), file("db/password", "p1", 0o400), file("a/b/c", "c", 0)}
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			v := newVolume(t, bk.tmpfs)
			if changed, err := atomicwrite.WriteGroup(v.dir, files, testGroup); err != nil || !changed {
				t.Fatalf("first WriteGroup: changed=%t, %v", changed, err)
			}
			checkGroup(t, v.dir, files, testGroup)
			first := currentGen(t, v.dir)

			if changed, err := atomicwrite.WriteGroup(v.dir, files, testGroup); err != nil || changed {
				t.Fatalf("same files, same group: changed=%t, %v; want unchanged", changed, err)
			}
			if got := currentGen(t, v.dir); got != first {
				t.Fatalf("same group: generation %s replaced by %s", first, got)
			}

			if changed, err := atomicwrite.WriteGroup(v.dir, files, otherGroup); err != nil || !changed {
				t.Fatalf("same files, other group: changed=%t, %v; want a new generation", changed, err)
			}
			if got := currentGen(t, v.dir); got == first {
				t.Fatal("other group: the generation was changed in place, not replaced")
			}
			checkGroup(t, v.dir, files, otherGroup)
			if _, g := owner(t, filepath.Join(v.dir, first, "token")); g != testGroup {
				t.Errorf("the retired generation's file changed group to %d: generations must never change once published", g)
			}
			assertEmpty(t, v.outside)
		})
	}
}

// TestWriteGroupEntryInOtherGroup: a current generation one of whose
// entries (the generation directory, a nested directory, a file) is in
// another group is rewritten, not taken as holding the files.
func TestWriteGroupEntryInOtherGroup(t *testing.T) {
	files := []atomicwrite.File{file("a/b/c", "c", 0o440), file("d", "d", 0o440)}
	for _, entry := range []string{".", "a", "a/b", "a/b/c", "d"} {
		t.Run(entry, func(t *testing.T) {
			v := newVolume(t, true)
			if _, err := atomicwrite.WriteGroup(v.dir, files, testGroup); err != nil {
				t.Fatal(err)
			}
			gen := currentGen(t, v.dir)
			if err := os.Lchown(filepath.Join(v.dir, gen, entry), -1, otherGroup); err != nil {
				t.Fatal(err)
			}
			if changed, err := atomicwrite.WriteGroup(v.dir, files, testGroup); err != nil || !changed {
				t.Fatalf("%s in another group: changed=%t, %v; want rewritten", entry, changed, err)
			}
			checkGroup(t, v.dir, files, testGroup)
		})
	}
}

// TestWriteGroupRepairsVolumeDirectory: the volume directory is put back in
// the group even when the files need no rewrite.
func TestWriteGroupRepairsVolumeDirectory(t *testing.T) {
	v := newVolume(t, true)
	files := []atomicwrite.File{file("token", "t", 0o440)}
	if _, err := atomicwrite.WriteGroup(v.dir, files, testGroup); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(v.dir, -1, otherGroup); err != nil {
		t.Fatal(err)
	}
	if changed, err := atomicwrite.WriteGroup(v.dir, files, testGroup); err != nil || changed {
		t.Fatalf("changed=%t, %v; want unchanged files", changed, err)
	}
	if _, g := owner(t, v.dir); g != testGroup {
		t.Fatalf("volume directory group %d, want %d", g, testGroup)
	}
}

// TestWriteKeepsGroups: plain Write neither sets nor compares groups.
func TestWriteKeepsGroups(t *testing.T) {
	v := newVolume(t, true)
	files := []atomicwrite.File{file("token", "t", 0o440)}
	if _, err := atomicwrite.WriteGroup(v.dir, files, testGroup); err != nil {
		t.Fatal(err)
	}
	if changed, err := atomicwrite.Write(v.dir, files); err != nil || changed {
		t.Fatalf("Write after WriteGroup with the same files: changed=%t, %v; want unchanged", changed, err)
	}
	if _, g := owner(t, filepath.Join(v.dir, "..data", "token")); g != testGroup {
		t.Fatalf("Write changed the group of an unchanged file to %d", g)
	}
}

func TestWriteGroupRejectsInvalidGroup(t *testing.T) {
	v := newVolume(t, false)
	for _, gid := range []int{-1, -2, 1 << 31} {
		changed, err := atomicwrite.WriteGroup(v.dir, []atomicwrite.File{file("token", "t", 0)}, gid)
		if changed || !errors.Is(err, atomicwrite.ErrInvalidGroup) {
			t.Errorf("gid %d: changed=%t, %v; want ErrInvalidGroup", gid, changed, err)
		}
	}
	entries, err := os.ReadDir(v.dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("volume holds %d entries (%v) after refused writes", len(entries), err)
	}
}
