package sockettest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// MaxPath is the longest unix socket path Linux binds: sun_path holds 108
// bytes, the terminating NUL included.
const MaxPath = 107

// base is where the directories are made: not os.TempDir, which follows
// TMPDIR and may be of any length.
const base = "/tmp"

// Dir returns a new directory for sockets, about 15 bytes long (see
// MkdirTemp), removed with everything in it when the test ends.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir, err := MkdirTemp("km")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			tb.Errorf("remove socket directory: %v", err)
		}
	})
	return dir
}

// MkdirTemp makes a new directory as os.MkdirTemp does, but under /tmp
// whatever TMPDIR says, with symlinks resolved, for callers that remove
// it themselves (after unmounting what they mounted under it). Keep
// pattern short: every byte of it is a byte less for socket names.
func MkdirTemp(pattern string) (string, error) {
	dir, err := os.MkdirTemp(base, pattern)
	if err != nil {
		return "", fmt.Errorf("create a socket directory under %s: %w", base, err)
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		_ = os.Remove(dir)
		return "", fmt.Errorf("resolve socket directory %s: %w", dir, err)
	}
	return resolved, nil
}

// Path returns the path elems name inside a new Dir, failing the test when
// it is too long to bind.
func Path(tb testing.TB, elems ...string) string {
	tb.Helper()
	p := filepath.Join(append([]string{Dir(tb)}, elems...)...)
	if len(p) > MaxPath {
		tb.Fatalf("socket path %s is %d bytes, more than the %d a unix socket allows: shorten the names the test adds", p, len(p), MaxPath)
	}
	return p
}
