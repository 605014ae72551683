package atomicwrite_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/internal/atomicwrite"
)

func TestValidatePath(t *testing.T) {
	tests := []struct {
		path     string
		wantRule string // "" when the path is valid
	}{
		{path: "token"},
		{path: "db/password"},
		{path: "a/b/c/d.pem"},
		{path: ".hidden"},
		{path: "a/..b"},
		{path: "a/..."},
		{path: "a.."},
		{path: "~"},
		{path: "with space/and\nnewline"},
		{path: strings.Repeat("n", 255)},
		{path: strings.Repeat("d/", 2047) + "ff"},
		{path: "", wantRule: "empty"},
		{path: "/etc/passwd", wantRule: "absolute"},
		{path: "..", wantRule: `".." element`},
		{path: "../x", wantRule: `".." element`},
		{path: "a/../b", wantRule: `".." element`},
		{path: ".", wantRule: "volume itself"},
		{path: "./a", wantRule: "not clean"},
		{path: "a//b", wantRule: "not clean"},
		{path: "a/", wantRule: "not clean"},
		{path: "a/./b", wantRule: "not clean"},
		{path: "...", wantRule: "reserved"},
		{path: "..data", wantRule: "reserved"},
		{path: "..data/x", wantRule: "reserved"},
		{path: "a\\b", wantRule: "backslash"},
		{path: "a\x00b", wantRule: "NUL"},
		{path: strings.Repeat("n", 256), wantRule: "longer than 255"},
		{path: strings.Repeat("d/", 2048) + "f", wantRule: "longer than 4096"},
	}
	for _, tt := range tests {
		name := tt.path
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		t.Run(name, func(t *testing.T) {
			err := atomicwrite.ValidatePath(tt.path)
			if tt.wantRule == "" {
				if err != nil {
					t.Errorf("ValidatePath(%q) = %v, want nil", tt.path, err)
				}
				return
			}
			if !errors.Is(err, atomicwrite.ErrInvalidPath) {
				t.Fatalf("ValidatePath(%q) = %v, want ErrInvalidPath", tt.path, err)
			}
			quoted := strconv.Quote(tt.path)
			if len(tt.path) > 256 {
				quoted = strconv.Quote(tt.path[:256])
			}
			if msg := err.Error(); !strings.Contains(msg, quoted) || !strings.Contains(msg, tt.wantRule) {
				t.Errorf("ValidatePath(%q) = %q, want it to name the path and %q", tt.path, msg, tt.wantRule)
			}
		})
	}
}

// abuseCases are file sets a provider may send that Write must reject whole.
// gen is the name of the generation directory the volume holds already.
var abuseCases = []struct {
	name  string
	files func(gen string) []string
}{
	{name: "empty", files: paths("")},
	{name: "absolute", files: paths("/etc/passwd")},
	{name: "root", files: paths("/")},
	{name: "absolute into sibling", files: paths("/tmp/outside/x")},
	{name: "parent", files: paths("..")},
	{name: "parent file", files: paths("../x")},
	{name: "parent of sibling", files: paths("../outside/x")},
	{name: "deep escape", files: paths("../../../../etc/cron.d/x")},
	{name: "escape after element", files: paths("a/../../x")},
	{name: "unclean dotdot", files: paths("a/../b")},
	{name: "trailing dotdot", files: paths("a/..")},
	{name: "dot", files: paths(".")},
	{name: "dot prefix", files: paths("./a")},
	{name: "dot element", files: paths("a/./b")},
	{name: "double slash", files: paths("a//b")},
	{name: "leading double slash", files: paths("//x")},
	{name: "trailing slash", files: paths("a/")},
	{name: "three dots", files: paths("...")},
	{name: "data link", files: paths("..data")},
	{name: "through data link", files: paths("..data/x")},
	{name: "temporary data link", files: paths("..data_tmp")},
	{name: "generation-like name", files: paths("..2026_x")},
	{name: "existing generation", files: func(gen string) []string { return []string{gen} }},
	{name: "into existing generation", files: func(gen string) []string { return []string{gen + "/token"} }},
	{name: "backslash", files: paths("a\\b")},
	{name: "backslash escape", files: paths("..\\x")},
	{name: "NUL", files: paths("a\x00b")},
	{name: "only NUL", files: paths("\x00")},
	{name: "duplicate", files: paths("a", "b", "a")},
	{name: "file and its directory", files: paths("a", "a/b")},
	{name: "directory and its file", files: paths("a/b", "a")},
	{name: "nested file and directory", files: paths("a/b/c", "a/b")},
	{name: "path too long", files: paths(strings.Repeat("d/", 2048) + "f")},
	{name: "element too long", files: paths(strings.Repeat("n", 256))},
	{name: "one bad among good", files: paths("ok", "db/ok", "../x")},
}

func paths(ps ...string) func(string) []string {
	return func(string) []string { return ps }
}

func TestWriteRejectsAbuse(t *testing.T) {
	if len(abuseCases) < 24 {
		t.Fatalf("only %d abuse cases", len(abuseCases))
	}
	old := []atomicwrite.File{file("token", "old", 0), file("db/password", "old", 0o600)}
	for _, bk := range backends {
		for _, tc := range abuseCases {
			t.Run(bk.name+"/"+tc.name, func(t *testing.T) {
				v := newVolume(t, bk.tmpfs)
				mustWrite(t, v.dir, old)
				var files []atomicwrite.File
				for _, p := range tc.files(currentGen(t, v.dir)) {
					files = append(files, file(p, "new", 0))
				}
				before := snapshot(t, v.base)
				changed, err := atomicwrite.Write(v.dir, files)
				if !errors.Is(err, atomicwrite.ErrInvalidPath) || changed {
					t.Fatalf("Write = %v, %v; want false, ErrInvalidPath", changed, err)
				}
				if diff := cmp.Diff(before, snapshot(t, v.base)); diff != "" {
					t.Errorf("rejected Write changed the file system (-before +after):\n%s", diff)
				}
				checkVolume(t, v.dir, old)
				assertEmpty(t, v.outside)
			})
		}
	}
}

func FuzzValidatePath(f *testing.F) {
	for _, tc := range abuseCases {
		for _, p := range tc.files("..2026_11_21_10_52_01.123456789.42") {
			f.Add(p)
		}
	}
	for _, p := range []string{"token", "db/password", ".hidden", "a/..b", "a..", "~", "a/b/c"} {
		f.Add(p)
	}
	const root = "/volume/root"
	f.Fuzz(func(t *testing.T, p string) {
		err := atomicwrite.ValidatePath(p)
		if err != nil {
			if !errors.Is(err, atomicwrite.ErrInvalidPath) {
				t.Fatalf("ValidatePath(%q) = %v, does not wrap ErrInvalidPath", p, err)
			}
			return
		}
		joined := filepath.Join(root, p)
		if !strings.HasPrefix(joined, root+"/") || joined == root+"/" {
			t.Errorf("accepted %q joins to %q, outside %q", p, joined, root)
		}
		if rel, err := filepath.Rel(root, joined); err != nil || rel != p {
			t.Errorf("accepted %q: Rel from root = %q, %v", p, rel, err)
		}
		if filepath.Clean(p) != p {
			t.Errorf("accepted unclean %q", p)
		}
		if first, _, _ := strings.Cut(p, "/"); strings.HasPrefix(first, "..") {
			t.Errorf("accepted %q whose first element %q is reserved", p, first)
		}
		if strings.ContainsAny(p, "\x00\\") {
			t.Errorf("accepted %q with a NUL or backslash", p)
		}
	})
}

func TestFileRedactsContents(t *testing.T) {
	f := atomicwrite.File{Path: "db/password", Mode: 0o600, Contents: []byte("hunter2")}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if got := fmt.Sprintf(format, f); strings.Contains(got, "hunter2") || !strings.Contains(got, "db/password") {
			t.Errorf("Sprintf(%q) = %q, want the path and no contents", format, got)
		}
	}
	if got := fmt.Sprint([]atomicwrite.File{f}); strings.Contains(got, "hunter2") {
		t.Errorf("Sprint of a slice = %q, leaks contents", got)
	}
}
