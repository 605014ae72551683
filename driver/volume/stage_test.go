package volume

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"

	"github.com/keymount/keymount/driver/targetpath"
)

// stageEntries lists the stage directories in the volume directory of tg.
func stageEntries(t *testing.T, tg *targetpath.Target) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(tg.Path))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), StagePrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// writeRenamed writes a file the way the existing AWS provider does: a
// temporary file beside it, renamed over the name.
func writeRenamed(t *testing.T, dir, name, content string, mode os.FileMode) {
	t.Helper()
	tmp, err := os.CreateTemp(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(tmp.Chmod(mode), tmp.Close(), os.Rename(tmp.Name(), filepath.Join(dir, name))); err != nil {
		t.Fatal(err)
	}
}

// TestStageBesideTheTarget: the stage is a tmpfs in the pod volume's
// directory, never at or over the target (which keeps showing the
// volume, read-only), it holds a copy of the current files with their
// modes, the provider can read them back and replace them, and Finish
// returns the provider's set and leaves neither mount nor directory.
func TestStageBesideTheTarget(t *testing.T) {
	e := newEnv(t)
	tg := e.target(t, "uid", "s")
	v := e.publish(t, "csi-stage", tg)
	if err := os.WriteFile(filepath.Join(v.DataDir, "shown"), []byte("volume"), 0o644); err != nil {
		t.Fatal(err)
	}
	current := []StagedFile{
		{Path: "unchanged", Mode: 0o640, Contents: []byte("same")},
		{Path: "db/password", Mode: 0o600, Contents: []byte("old")},
	}
	s, err := e.m.Stage(tg, current)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(s.Path) != filepath.Dir(tg.Path) || !strings.HasPrefix(filepath.Base(s.Path), StagePrefix) {
		t.Fatalf("stage at %s, want a %s* sibling of the target %s", s.Path, StagePrefix, tg.Path)
	}
	checkStageDuringCall(t, s, tg, current)
	writeRenamed(t, filepath.Join(s.Path, "db"), "password", "new", 0o644)
	writeRenamed(t, s.Path, "added", "a", 0o644)

	files, readErr, err := s.Finish(1 << 20)
	if err != nil || readErr != nil {
		t.Fatalf("Finish: %v, %v", readErr, err)
	}
	slices.SortFunc(files, func(a, b StagedFile) int { return strings.Compare(a.Path, b.Path) })
	want := []StagedFile{
		{Path: "added", Mode: 0o644, Contents: []byte("a")},
		{Path: "db/password", Mode: 0o644, Contents: []byte("new")},
		{Path: "unchanged", Mode: 0o640, Contents: []byte("same")},
	}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if left := stageEntries(t, tg); len(left) != 0 {
		t.Errorf("stage directories left: %v", left)
	}
	if isMounted(t, s.Path) {
		t.Error("stage still mounted")
	}
	if !isMounted(t, tg.Path) {
		t.Error("the target no longer shows the volume")
	}
}

// checkStageDuringCall checks a stage as the provider finds it: a tmpfs
// holding a copy of current, while the target shows the volume read-only.
func checkStageDuringCall(t *testing.T, s *Stage, tg *targetpath.Target, current []StagedFile) {
	t.Helper()
	if !isMounted(t, s.Path) {
		t.Fatal("the stage is not a mount")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.Path, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		t.Fatalf("the stage is not a tmpfs: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(tg.Path, "shown")); err != nil || string(b) != "volume" {
		t.Fatalf("target during the stage: %q, %v; want the volume", b, err)
	}
	if err := os.WriteFile(filepath.Join(tg.Path, "w"), nil, 0o600); !errors.Is(err, unix.EROFS) {
		t.Fatalf("writing into the target during the stage: %v, want EROFS", err)
	}
	for _, f := range current {
		p := filepath.Join(s.Path, f.Path)
		b, err := os.ReadFile(p)
		fi, serr := os.Stat(p)
		if err != nil || serr != nil || string(b) != string(f.Contents) || fi.Mode().Perm() != f.Mode {
			t.Fatalf("copy of %s in the stage: %q %v (%v, %v)", f.Path, b, fi, err, serr)
		}
	}
}

// TestStageNamesAreFresh: two stages of one target never share a
// directory, so a provider call that outlived its deadline cannot write
// into a later call's stage; and a new stage removes the earlier one.
func TestStageNamesAreFresh(t *testing.T) {
	e := newEnv(t)
	tg := e.target(t, "uid", "s")
	first, err := e.m.Stage(tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.m.Stage(tg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Path == second.Path {
		t.Fatalf("two stages at %s", first.Path)
	}
	if _, err := os.Stat(first.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier stage is still there: %v", err)
	}
	if err := os.WriteFile(filepath.Join(first.Path, "late"), []byte("x"), 0o600); err == nil {
		t.Error("a late write into the removed stage succeeded")
	}
	if err := second.Discard(); err != nil {
		t.Fatal(err)
	}
	if left := stageEntries(t, tg); len(left) != 0 {
		t.Errorf("stage directories left: %v", left)
	}
}

// TestStageValidatesWhatTheProviderWrote: only regular files with
// permission bits become the volume's, within the byte limit; a symlink,
// FIFO, socket, device or a file of mode 0000 is refused, naming it; modes
// beyond permission bits are narrowed, never widened; and the stage is
// gone in every case.
func TestStageValidatesWhatTheProviderWrote(t *testing.T) {
	cases := []struct {
		name    string
		write   func(t *testing.T, dir string)
		limit   int64
		wantErr error
		want    []StagedFile
	}{
		{name: "symlink", wantErr: ErrStagedFile, write: func(t *testing.T, dir string) { must(t, os.Symlink("/etc/shadow", filepath.Join(dir, "shadow"))) }},
		{name: "dangling symlink in a directory", wantErr: ErrStagedFile, write: func(t *testing.T, dir string) {
			must(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
			must(t, os.Symlink("nowhere", filepath.Join(dir, "d", "x")))
		}},
		{name: "fifo", wantErr: ErrStagedFile, write: func(t *testing.T, dir string) { must(t, unix.Mkfifo(filepath.Join(dir, "p"), 0o644)) }},
		{name: "device", wantErr: ErrStagedFile, write: func(t *testing.T, dir string) {
			must(t, unix.Mknod(filepath.Join(dir, "null"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))))
		}},
		{name: "socket", wantErr: ErrStagedFile, write: func(t *testing.T, dir string) {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			must(t, err)
			defer func() { _ = unix.Close(fd) }()
			d, err := os.Open(dir)
			must(t, err)
			defer func() { _ = d.Close() }()
			// Through the descriptor: the stage's path may pass the 108-byte limit.
			must(t, unix.Bind(fd, &unix.SockaddrUnix{Name: procFd(int(d.Fd())) + "/s"}))
		}},
		{name: "mode 0000", wantErr: ErrStagedFile, write: func(t *testing.T, dir string) { must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0)) }},
		{name: "too large", limit: 10, wantErr: ErrStagedTooLarge, write: func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "a"), []byte("123456"), 0o644))
			must(t, os.WriteFile(filepath.Join(dir, "b"), []byte("123456"), 0o644))
		}},
		{name: "exactly the limit", limit: 12, write: func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "a"), []byte("123456"), 0o644))
			must(t, os.WriteFile(filepath.Join(dir, "b"), []byte("123456"), 0o644))
		}, want: []StagedFile{{Path: "a", Mode: 0o644, Contents: []byte("123456")}, {Path: "b", Mode: 0o644, Contents: []byte("123456")}}},
		{name: "setuid narrowed", write: func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600))
			must(t, os.Chmod(filepath.Join(dir, "f"), 0o4755|os.ModeSetuid|os.ModeSticky))
		}, want: []StagedFile{{Path: "f", Mode: 0o755, Contents: []byte("x")}}},
		{name: "nested and empty directories", write: func(t *testing.T, dir string) {
			must(t, os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755))
			must(t, os.MkdirAll(filepath.Join(dir, "empty"), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, "a/b/c/d"), nil, 0o400))
		}, want: []StagedFile{{Path: "a/b/c/d", Mode: 0o400, Contents: []byte{}}}},
	}
	e := newEnv(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg := e.target(t, "uid", "v")
			s, err := e.m.Stage(tg, nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.write(t, s.Path)
			limit := tc.limit
			if limit == 0 {
				limit = 1 << 20
			}
			files, readErr, err := s.Finish(limit)
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if tc.wantErr != nil {
				if !errors.Is(readErr, tc.wantErr) {
					t.Errorf("read error %v, want %v", readErr, tc.wantErr)
				}
			} else if readErr != nil {
				t.Errorf("read error %v", readErr)
			} else if diff := cmp.Diff(tc.want, files, sortStaged); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if left := stageEntries(t, tg); len(left) != 0 {
				t.Errorf("stage directories left: %v", left)
			}
		})
	}
}

var sortStaged = cmpopts.SortSlices(func(a, b StagedFile) bool { return a.Path < b.Path })

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
