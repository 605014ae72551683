package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestUnmountNeverMounted(t *testing.T) {
	e := newEnv(t, demoClass)
	var out bytes.Buffer
	if err := unmountCommand(t.Context(), []string{e.target, "--state-dir", e.stateDir}, &out, &out); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	if got, want := out.String(), "nothing mounted at "+e.target+"\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// A mount keymount did not make is left alone, whatever the path.
func TestUnmountRefusesForeignMount(t *testing.T) {
	e := newEnv(t, demoClass)
	foreign := filepath.Join(e.dir, "foreign")
	if err := os.Mkdir(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", foreign, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := unmountCommand(t.Context(), []string{foreign, "--state-dir", e.stateDir}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "not by keymount") {
		t.Fatalf("unmount of a foreign mount: err = %v, want a refusal", err)
	}
	if m := mountsUnder(t, e.dir); len(m) != 1 || m[0] != foreign {
		t.Errorf("mounts after the refusal = %q, want only %s", m, foreign)
	}
}

func TestUnmountUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"a", "b"}, {"--timeout", "0s", "a"}} {
		var out bytes.Buffer
		err := unmountCommand(t.Context(), args, &out, &out)
		if code := exitCode(err, &out); code != exitUsage {
			t.Errorf("unmount %q: exit %d (%v), want %d", args, code, err, exitUsage)
		}
	}
}

// A foreign mount over a mounted keymount target is left alone, and so is
// the volume under it; once it is gone, unmount removes the volume.
func TestUnmountRefusesForeignMountOverTarget(t *testing.T) {
	e := newEnv(t, demoClass)
	var out bytes.Buffer
	if err := mountCommand(t.Context(), e.mountArgs(), &out, &out); err != nil {
		t.Fatalf("mount: %v", err)
	}
	if err := unix.Mount("tmpfs", e.target, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	before := mountsUnder(t, e.dir)

	err := unmountCommand(t.Context(), []string{e.target, "--state-dir", e.stateDir}, &out, &out)

	if err == nil || !strings.Contains(err.Error(), "leaving it alone") {
		t.Fatalf("unmount under a foreign mount: err = %v, want a refusal", err)
	}
	if after := mountsUnder(t, e.dir); !slices.Equal(before, after) {
		t.Errorf("mounts = %q, want them unchanged: %q", after, before)
	}
	if err := unix.Unmount(e.target, 0); err != nil {
		t.Fatal(err)
	}
	if err := unmountCommand(t.Context(), []string{e.target, "--state-dir", e.stateDir}, &out, &out); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	if m := mountsUnder(t, e.dir); len(m) > 0 {
		t.Errorf("still mounted after unmount: %q", m)
	}
}
