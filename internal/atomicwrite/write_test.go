package atomicwrite_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/internal/atomicwrite"
)

func file(p, contents string, mode os.FileMode) atomicwrite.File {
	return atomicwrite.File{Path: p, Mode: mode, Contents: []byte(contents)}
}

func TestWrite(t *testing.T) {
	base := []atomicwrite.File{file("token", "t1", 0), file("db/password", "p1", 0o600), file("db/user", "u1", 0)}
	tests := []struct {
		name        string
		before      []atomicwrite.File // written first when non-nil
		files       []atomicwrite.File
		wantChanged bool
	}{
		{name: "first write", files: base, wantChanged: true},
		{name: "first write of no files", files: []atomicwrite.File{}, wantChanged: true},
		{name: "unchanged rewrite", before: base, files: base, wantChanged: false},
		{
			name:        "unchanged with default mode spelled out and another order",
			before:      base,
			files:       []atomicwrite.File{file("db/user", "u1", 0o644), file("token", "t1", 0o644), file("db/password", "p1", 0o600)},
			wantChanged: false,
		},
		{
			name:        "changed content",
			before:      base,
			files:       []atomicwrite.File{file("token", "t2", 0), file("db/password", "p1", 0o600), file("db/user", "u1", 0)},
			wantChanged: true,
		},
		{
			name:        "changed mode only",
			before:      base,
			files:       []atomicwrite.File{file("token", "t1", 0o400), file("db/password", "p1", 0o600), file("db/user", "u1", 0)},
			wantChanged: true,
		},
		{name: "top-level file removed", before: base, files: base[1:], wantChanged: true},
		{name: "nested file removed", before: base, files: base[:2], wantChanged: true},
		{name: "whole directory removed", before: base, files: base[:1], wantChanged: true},
		{name: "all files removed", before: base, files: []atomicwrite.File{}, wantChanged: true},
		{name: "file added", before: base, files: append([]atomicwrite.File{file("ca.crt", "ca", 0)}, base...), wantChanged: true},
		{
			name:        "nested paths",
			files:       []atomicwrite.File{file("a/b/c/d", "deep", 0), file("a/b/e", "e", 0), file("a/f", "f", 0), file("g", "g", 0)},
			wantChanged: true,
		},
		{
			name:        "directory becomes file",
			before:      base,
			files:       []atomicwrite.File{file("db", "now a file", 0), file("token", "t1", 0)},
			wantChanged: true,
		},
		{
			name: "modes per file",
			files: []atomicwrite.File{
				file("r", "r", 0o400), file("rw", "rw", 0o600), file("group", "g", 0o640),
				file("exec", "x", 0o755), file("all", "a", 0o777), file("d/write-only", "w", 0o200),
			},
			wantChanged: true,
		},
		{name: "empty contents", files: []atomicwrite.File{file("empty", "", 0)}, wantChanged: true},
		{name: "dot names that are not reserved", files: []atomicwrite.File{file(".hidden", "h", 0), file("a/..b", "b", 0), file("a/...", "c", 0)}, wantChanged: true},
	}
	for _, bk := range backends {
		for _, tt := range tests {
			t.Run(bk.name+"/"+tt.name, func(t *testing.T) {
				v := newVolume(t, bk.tmpfs)
				if tt.before != nil {
					mustWrite(t, v.dir, tt.before)
				}
				before := snapshot(t, v.dir)
				changed := mustWrite(t, v.dir, tt.files)
				if changed != tt.wantChanged {
					t.Errorf("Write changed = %v, want %v", changed, tt.wantChanged)
				}
				checkVolume(t, v.dir, tt.files)
				if !changed {
					if diff := cmp.Diff(before, snapshot(t, v.dir)); diff != "" {
						t.Errorf("unchanged Write touched the volume (-before +after):\n%s", diff)
					}
				}
				assertEmpty(t, v.outside)
			})
		}
	}
}

// TestWriteRetiresGenerations checks that a replaced generation stays for a
// grace period, so lookups in flight still find it, and is then removed by
// the next Write, changed or not.
func TestWriteRetiresGenerations(t *testing.T) {
	v := newVolume(t, false)
	mustWrite(t, v.dir, []atomicwrite.File{file("a", "1", 0)})
	gen1 := currentGen(t, v.dir)
	mustWrite(t, v.dir, []atomicwrite.File{file("a", "2", 0)})
	gen2 := currentGen(t, v.dir)
	if gen2 == gen1 {
		t.Fatalf("generation %s kept after a change", gen1)
	}
	if b, err := os.ReadFile(filepath.Join(v.dir, gen1, "a")); err != nil || string(b) != "1" {
		t.Errorf("just retired generation: a = %q, %v; want it kept with its content", b, err)
	}

	age(t, v.dir, gen1)
	mustWrite(t, v.dir, []atomicwrite.File{file("a", "3", 0)})
	gen3 := currentGen(t, v.dir)
	if diff := cmp.Diff([]string{gen2, gen3}, generations(t, v.dir)); diff != "" {
		t.Errorf("generations after a change (-want +got):\n%s", diff)
	}

	age(t, v.dir, gen2)
	if mustWrite(t, v.dir, []atomicwrite.File{file("a", "3", 0)}) {
		t.Errorf("unchanged Write returned changed=true")
	}
	if diff := cmp.Diff([]string{gen3}, generations(t, v.dir)); diff != "" {
		t.Errorf("generations after an unchanged Write (-want +got):\n%s", diff)
	}
	checkVolume(t, v.dir, []atomicwrite.File{file("a", "3", 0)})
}

func TestReadEmptyVolume(t *testing.T) {
	v := newVolume(t, false)
	files, err := atomicwrite.Read(v.dir)
	if err != nil || files != nil {
		t.Errorf("Read of a fresh volume = %v, %v; want nil, nil", files, err)
	}
}

func TestReadRejectsForeignDataLink(t *testing.T) {
	tests := []struct {
		name  string
		setup func(dir, outside string) error
	}{
		{name: "absolute target", setup: func(dir, outside string) error { return os.Symlink(outside, filepath.Join(dir, "..data")) }},
		{name: "target with a slash", setup: func(dir, _ string) error { return os.Symlink("../outside", filepath.Join(dir, "..data")) }},
		{name: "not a symlink", setup: func(dir, _ string) error { return os.Mkdir(filepath.Join(dir, "..data"), 0o755) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVolume(t, false)
			if err := tt.setup(v.dir, v.outside); err != nil {
				t.Fatal(err)
			}
			if _, err := atomicwrite.Read(v.dir); !errors.Is(err, atomicwrite.ErrConflict) {
				t.Errorf("Read error = %v, want ErrConflict", err)
			}
		})
	}
}

func TestWriteIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	v := newVolume(t, false)
	files := []atomicwrite.File{file("a/b", "b", 0o644), file("c", "c", 0o755), file("d", "d", 0)}
	mustWrite(t, v.dir, files)
	checkVolume(t, v.dir, files)
}

func TestWriteInvalidMode(t *testing.T) {
	for _, mode := range []os.FileMode{os.ModeDir | 0o755, os.ModeSetuid | 0o755, os.ModeSticky | 0o644, os.ModeSymlink} {
		t.Run(mode.String(), func(t *testing.T) {
			v := newVolume(t, false)
			changed, err := atomicwrite.Write(v.dir, []atomicwrite.File{file("a", "a", mode)})
			if !errors.Is(err, atomicwrite.ErrInvalidMode) || changed {
				t.Errorf("Write = %v, %v; want false, ErrInvalidMode", changed, err)
			}
			assertEmpty(t, v.dir)
		})
	}
}

func TestWriteConflictKeepsOldContent(t *testing.T) {
	v := newVolume(t, false)
	old := []atomicwrite.File{file("a", "a", 0)}
	mustWrite(t, v.dir, old)
	if err := os.Mkdir(filepath.Join(v.dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, v.dir)
	changed, err := atomicwrite.Write(v.dir, []atomicwrite.File{file("a", "a2", 0), file("b", "b", 0)})
	if !errors.Is(err, atomicwrite.ErrConflict) || changed {
		t.Fatalf("Write = %v, %v; want false, ErrConflict", changed, err)
	}
	if diff := cmp.Diff(before, snapshot(t, v.dir)); diff != "" {
		t.Errorf("failed Write changed the volume (-before +after):\n%s", diff)
	}
}

// TestWriteRepairsLayout covers a volume left untidy, for example by a crash
// after the swap: the same content is written again and the layout fixed.
func TestWriteRepairsLayout(t *testing.T) {
	files := []atomicwrite.File{file("a", "a", 0), file("b/c", "c", 0)}
	tests := []struct {
		name string
		mess func(dir string) error
	}{
		{name: "missing top-level link", mess: func(dir string) error { return os.Remove(filepath.Join(dir, "b")) }},
		{name: "wrong top-level link", mess: func(dir string) error {
			return errors.Join(os.Remove(filepath.Join(dir, "a")), os.Symlink("..data/b", filepath.Join(dir, "a")))
		}},
		{name: "stale link of a removed file", mess: func(dir string) error { return os.Symlink("..data/gone", filepath.Join(dir, "gone")) }},
		{name: "leftover temporary link", mess: func(dir string) error { return os.Symlink("..gone", filepath.Join(dir, "..data_tmp")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVolume(t, false)
			mustWrite(t, v.dir, files)
			if err := tt.mess(v.dir); err != nil {
				t.Fatal(err)
			}
			if !mustWrite(t, v.dir, files) {
				t.Errorf("Write of an untidy volume returned changed=false")
			}
			checkVolume(t, v.dir, files)
		})
	}
}

func TestWriteLeavesForeignEntries(t *testing.T) {
	v := newVolume(t, false)
	files := []atomicwrite.File{file("a", "a", 0)}
	mustWrite(t, v.dir, files)
	foreign := map[string]func(p string) error{
		"notes":       func(p string) error { return os.WriteFile(p, []byte("x"), 0o644) },
		"other-link":  func(p string) error { return os.Symlink("elsewhere", p) },
		"..foreign":   func(p string) error { return os.Symlink(v.outside, p) },
		"foreign-dir": func(p string) error { return os.Mkdir(p, 0o700) },
	}
	for name, create := range foreign {
		if err := create(filepath.Join(v.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, v.dir, []atomicwrite.File{file("a", "a2", 0)})
	if mustWrite(t, v.dir, []atomicwrite.File{file("a", "a2", 0)}) {
		t.Errorf("foreign entries make every Write a rewrite")
	}
	for name := range foreign {
		if _, err := os.Lstat(filepath.Join(v.dir, name)); err != nil {
			t.Errorf("foreign entry %s removed: %v", name, err)
		}
	}
	assertEmpty(t, v.outside)
}

// TestWriteConcurrentWriters runs writers of one volume at once: the lock
// serializes them, so the volume ends tidy with one writer's files.
func TestWriteConcurrentWriters(t *testing.T) {
	v := newVolume(t, true)
	const writers, rounds = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				files := []atomicwrite.File{file(fmt.Sprintf("w%d", w), fmt.Sprint(r), 0), file("shared/x", fmt.Sprint(w, r), 0)}
				if _, err := atomicwrite.Write(v.dir, files); err != nil {
					t.Errorf("writer %d round %d: %v", w, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	last, err := atomicwrite.Read(v.dir)
	if err != nil || len(last) != 2 {
		t.Fatalf("Read = %v, %v; want the 2 files of one writer", last, err)
	}
	checkVolume(t, v.dir, last)
}
