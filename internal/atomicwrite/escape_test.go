package atomicwrite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/keymount/keymount/internal/atomicwrite"
)

// TestWriteSymlinkEscape plants symlinks to a directory outside the volume
// where Write will put its own entries: nothing may land outside, and the
// planted links are replaced by the writer's own.
func TestWriteSymlinkEscape(t *testing.T) {
	tests := []struct {
		name  string
		link  string // planted in the volume root, pointing to the outside directory
		files []atomicwrite.File
	}{
		{name: "directory link", link: "evil", files: []atomicwrite.File{file("evil/x", "x", 0)}},
		{name: "nested below link", link: "evil", files: []atomicwrite.File{file("evil/a/b/x", "x", 0), file("ok", "ok", 0)}},
		{name: "file link", link: "evil", files: []atomicwrite.File{file("evil", "x", 0)}},
		{name: "data link", link: "..data", files: []atomicwrite.File{file("x", "x", 0)}},
		{name: "temporary data link", link: "..data_tmp", files: []atomicwrite.File{file("x", "x", 0)}},
		{name: "temporary name link", link: "..name_tmp", files: []atomicwrite.File{file("x", "x", 0)}},
	}
	for _, bk := range backends {
		for _, tt := range tests {
			t.Run(bk.name+"/"+tt.name, func(t *testing.T) {
				v := newVolume(t, bk.tmpfs)
				if err := os.Symlink(v.outside, filepath.Join(v.dir, tt.link)); err != nil {
					t.Fatal(err)
				}
				mustWrite(t, v.dir, tt.files)
				assertEmpty(t, v.outside)
				checkVolume(t, v.dir, tt.files)
				// A second round through the now-replaced link stays inside as well.
				mustWrite(t, v.dir, append(tt.files, file("y", "y", 0)))
				assertEmpty(t, v.outside)
			})
		}
	}
}

// TestWriteKeepsForeignLinkTarget checks that removing stale links never
// follows a foreign link: the outside directory keeps its content.
func TestWriteKeepsForeignLinkTarget(t *testing.T) {
	v := newVolume(t, false)
	keep := filepath.Join(v.outside, "keep")
	if err := os.WriteFile(keep, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"foreign", "..foreign"} {
		if err := os.Symlink(v.outside, filepath.Join(v.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, v.dir, []atomicwrite.File{file("a", "1", 0)})
	mustWrite(t, v.dir, []atomicwrite.File{file("b", "2", 0)})
	if b, err := os.ReadFile(keep); err != nil || string(b) != "keep" {
		t.Errorf("outside file after writes: %q, %v", b, err)
	}
	entries, err := os.ReadDir(v.outside)
	if err != nil || len(entries) != 1 {
		t.Errorf("outside directory holds %v, %v; want only keep", entries, err)
	}
}
