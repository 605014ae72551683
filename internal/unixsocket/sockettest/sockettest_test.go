package sockettest

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirIgnoresLongTMPDIR: with a TMPDIR that alone nearly fills sun_path,
// a socket still binds in Dir, and Dir is gone after the test.
func TestDirIgnoresLongTMPDIR(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("x", 100))
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)
	t.Setenv("GOTMPDIR", long)

	var dir string
	t.Run("bind", func(t *testing.T) {
		path := Path(t, "plugins_registry", "secrets-store.csi.k8s.io-reg.sock")
		dir = filepath.Dir(filepath.Dir(path))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		var lc net.ListenConfig
		l, err := lc.Listen(t.Context(), "unix", path)
		if err != nil {
			t.Fatalf("listen on %s (%d bytes): %v", path, len(path), err)
		}
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		if strings.HasPrefix(path, long) {
			t.Errorf("socket path %s is under TMPDIR", path)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("socket directory %s still there after the test: %v", dir, err)
	}
}
