package conformance_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadOnlyPublish: a read-only volume cannot be written through its
// target, yet the driver still refreshes its content.
func TestReadOnlyPublish(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)

	assertPublished(t, h, v)
	assertFiles(t, v.Target, appFiles("v1"))
	writes := map[string]func() error{
		"create a file":    func() error { return os.WriteFile(filepath.Join(v.Target, "new"), []byte("x"), 0o600) },
		"overwrite a file": func() error { return os.WriteFile(filepath.Join(v.Target, "api-token"), []byte("x"), 0o600) },
		"remove a link":    func() error { return os.Remove(filepath.Join(v.Target, "password")) },
		"replace ..data":   func() error { return os.Symlink("/", filepath.Join(v.Target, "..data_evil")) },
		"create a dir":     func() error { return os.Mkdir(filepath.Join(v.Target, "dir"), 0o700) },
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, unix.EROFS) {
			t.Errorf("%s in a read-only volume: got %v, want EROFS", name, err)
		}
	}

	writeApp(h, "v2")
	publish(t, h, v, appClass)

	assertPublished(t, h, v)
	assertFiles(t, v.Target, appFiles("v2"))
	assertTidy(t, v.Target)
	if rec := mustRecord(t, h, v); !rec.ReadOnly || rec.Generation != 2 {
		t.Errorf("record: readOnly %v generation %d, want true and 2", rec.ReadOnly, rec.Generation)
	}
	unpublish(t, h, v)
	assertGone(t, h, v)
}
