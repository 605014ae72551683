package session

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestVolumeID(t *testing.T) {
	a, b := VolumeID("/mnt/a"), VolumeID("/mnt/b")
	if a != VolumeID("/mnt/a") {
		t.Error("VolumeID is not deterministic")
	}
	if a == b {
		t.Errorf("VolumeID(/mnt/a) == VolumeID(/mnt/b) == %s", a)
	}
	// The volume manager keeps IDs of this form as they are.
	if !regexp.MustCompile(`^cli-[0-9a-f]{32}$`).MatchString(a) {
		t.Errorf("VolumeID = %q, want cli- and 32 hex digits", a)
	}
}

func TestPodUID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := PodUID("/mnt/a"), PodUID("/mnt/b")
	if a != PodUID("/mnt/a") {
		t.Error("PodUID is not deterministic")
	}
	if !uuid.MatchString(a) || !uuid.MatchString(b) || a == b {
		t.Errorf("PodUID(/mnt/a) = %q, PodUID(/mnt/b) = %q: want distinct UUIDs", a, b)
	}
}

func TestShortTempDirWithLongTMPDIR(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)
	dir, err := shortTempDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if n := len(filepath.Join(dir, localSocketDir, localName+".sock")); n > maxSocketPath {
		t.Errorf("socket path in %s is %d bytes, more than %d", dir, n, maxSocketPath)
	}
}
