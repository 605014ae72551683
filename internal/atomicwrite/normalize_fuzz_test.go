package atomicwrite

import (
	"encoding/binary"
	"errors"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzFiles turns fuzz input into files: one path per line of paths, the
// mode of file i from bytes 4i..4i+3 of modes (little endian, 0 when
// missing), and the path itself as contents.
func fuzzFiles(paths string, modes []byte) []File {
	if paths == "" {
		return nil
	}
	lines := strings.Split(paths, "\n")
	files := make([]File, 0, len(lines))
	for i, p := range lines {
		var m uint32
		if len(modes) >= 4*i+4 {
			m = binary.LittleEndian.Uint32(modes[4*i:])
		}
		files = append(files, File{Path: p, Mode: os.FileMode(m), Contents: []byte(p)})
	}
	return files
}

// wantNormalizeOK says whether normalize must accept files, from the rules
// its documentation states, checked independently.
func wantNormalizeOK(files []File) bool {
	paths := map[string]bool{}
	for _, f := range files {
		if ValidatePath(f.Path) != nil || f.Mode&^os.ModePerm != 0 || paths[f.Path] {
			return false
		}
		paths[f.Path] = true
	}
	for p := range paths {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if paths[d] {
				return false
			}
		}
	}
	return true
}

// FuzzNormalize: normalize accepts exactly the sets of valid, unique paths
// where no file is another's parent, with modes of permission bits only; it
// returns them sorted, with every mode set and contents kept, and leaves its
// argument alone.
func FuzzNormalize(f *testing.F) {
	le := func(modes ...uint32) []byte {
		b := make([]byte, 0, 4*len(modes))
		for _, m := range modes {
			b = binary.LittleEndian.AppendUint32(b, m)
		}
		return b
	}
	f.Add("db/password\ntoken", le(0o600, 0))
	f.Add("b\na\nc/d", le(0o644, 0o400, 0o777))
	f.Add("a\na/b", le())
	f.Add("a\na", le(0o600, 0o644))
	f.Add("../etc/passwd", le())
	f.Add("..data/x", le())
	f.Add("a/../b", le())
	f.Add("/abs", le())
	f.Add("a\x00b", le())
	f.Add(`a\b`, le())
	f.Add("x", le(uint32(os.ModeSetuid|0o755)))
	f.Add("x", le(uint32(os.ModeSymlink|0o777)))
	f.Add("x", le(0xffffffff))
	f.Add("", le())
	f.Add("\n", le())
	f.Add("./a\na//b\na/", le())
	f.Add(strings.Repeat("a", 256)+"\n"+strings.Repeat("b/", 2049), le())
	f.Fuzz(func(t *testing.T, paths string, modes []byte) {
		in := fuzzFiles(paths, modes)
		before := slices.Clone(in)
		got, err := normalize(in)
		if diff := cmp.Diff(before, in); diff != "" {
			t.Fatalf("normalize changed its argument (-before +after):\n%s", diff)
		}
		wantOK := wantNormalizeOK(in)
		if err != nil {
			if got != nil {
				t.Errorf("normalize returned %v with error %v", got, err)
			}
			if !errors.Is(err, ErrInvalidPath) && !errors.Is(err, ErrInvalidMode) {
				t.Errorf("error %v wraps neither ErrInvalidPath nor ErrInvalidMode", err)
			}
			if wantOK {
				t.Fatalf("normalize(%v) = %v, want it accepted", in, err)
			}
			return
		}
		if !wantOK {
			t.Fatalf("normalize(%v) accepted an invalid set: %v", in, got)
		}
		if len(got) != len(in) {
			t.Fatalf("normalize returned %d files for %d", len(got), len(in))
		}
		byPath := map[string]File{}
		for _, f := range in {
			byPath[f.Path] = f
		}
		for i, g := range got {
			if i > 0 && got[i-1].Path >= g.Path {
				t.Errorf("not sorted and unique: %q then %q", got[i-1].Path, g.Path)
			}
			if err := ValidatePath(g.Path); err != nil {
				t.Errorf("returned file: %v", err)
			}
			want, ok := byPath[g.Path]
			if !ok {
				t.Fatalf("returned %q, which was not given", g.Path)
			}
			if want.Mode == 0 {
				want.Mode = DefaultMode
			}
			if g.Mode != want.Mode || g.Mode&^os.ModePerm != 0 {
				t.Errorf("%q: mode %v, want %v", g.Path, g.Mode, want.Mode)
			}
			if string(g.Contents) != string(want.Contents) {
				t.Errorf("%q: contents changed", g.Path)
			}
		}
	})
}
