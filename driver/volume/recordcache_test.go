package volume

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRecordCache: a record read through the manager is served from memory
// while the file is the one read (a copy each time), read again after a
// save or when anyone damages or removes it, and forgotten with the tmpfs.
func TestRecordCache(t *testing.T) {
	e := newEnv(t)
	tg := e.target(t, "uid", "s")
	v := e.publish(t, "csi-1", tg)
	want := &Record{VolumeID: v.ID, TargetPath: tg.Path, Class: "db", Generation: 1, LastMount: time.Unix(100, 0).UTC()}
	if err := v.SaveRecord(want); err != nil {
		t.Fatal(err)
	}
	r1, err := e.m.LoadRecord(v)
	if err != nil || r1 == nil || r1.Class != "db" {
		t.Fatalf("LoadRecord = %+v, %v", r1, err)
	}
	r1.Class = "changed by the caller"
	if r2, err := e.m.LoadRecord(v); err != nil || r2.Class != "db" {
		t.Fatalf("a caller's change reached the cache: %+v, %v", r2, err)
	}
	if c := e.m.records.m[v.ID]; c == nil {
		t.Fatal("the record read was not cached")
	}

	want.Generation = 2
	if err := v.SaveRecord(want); err != nil {
		t.Fatal(err)
	}
	if r, err := e.m.LoadRecord(v); err != nil || r.Generation != 2 {
		t.Fatalf("after a save: %+v, %v; want generation 2", r, err)
	}

	// Damaged in place, same size: the change time differs.
	path := filepath.Join(v.Dir, recordFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged := make([]byte, len(data))
	for i := range damaged {
		damaged[i] = 'x'
	}
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.LoadRecord(v); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("a record damaged in place: %v, want ErrCorruptRecord", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if r, err := e.m.LoadRecord(v); err != nil || r != nil {
		t.Fatalf("a removed record: %+v, %v; want none", r, err)
	}

}

// TestShows: a cached volume is recognised at its bound target by one
// statx, not once the target is unmounted, and its cache entry goes with
// its tmpfs.
func TestShows(t *testing.T) {
	e := newEnv(t)
	tg := e.target(t, "uid", "s")
	v := e.publish(t, "csi-1", tg)
	if e.m.Shows(v, tg) {
		t.Error("Shows = true before the record was read: nothing is cached to compare with")
	}
	if err := v.SaveRecord(&Record{VolumeID: v.ID, TargetPath: tg.Path, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.LoadRecord(v); err != nil {
		t.Fatal(err)
	}
	if !e.m.Shows(v, tg) {
		t.Error("Shows = false for the target the volume is bound to")
	}
	if err := unix.Unmount(tg.Path, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if e.m.Shows(v, tg) {
		t.Error("Shows = true for an unmounted target")
	}
	if _, err := e.m.Unbind(v, tg); err != nil {
		t.Fatal(err)
	}
	if err := e.m.RemoveTmpfs(v); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.m.records.m[v.ID]; ok {
		t.Error("the cached record outlived the volume's tmpfs")
	}
}
