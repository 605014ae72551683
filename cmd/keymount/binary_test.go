package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinary builds keymount and runs mount, unmount and convert (reading
// stdin) as processes, as a user (and hack/demo.sh) does.
func TestBinary(t *testing.T) {
	e := newEnv(t, demoClass)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test builds the binary and needs the go command: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "keymount")
	if out, err := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	keymount := func(args ...string) (string, error) {
		out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
		return string(out), err
	}

	out, err := keymount(append([]string{"mount"}, e.mountArgs("--read-only")...)...)
	if err != nil {
		t.Fatalf("keymount mount: %v\n%s", err, out)
	}
	if !strings.Contains(out, "mounted 3 files") {
		t.Errorf("mount output:\n%s", out)
	}
	// The mount outlives the process that made it.
	checkFiles(t, e.target, map[string]string{"db/password": demoFiles["db-password"]})

	out, err = keymount("unmount", e.target, "--state-dir", e.stateDir)
	if err != nil {
		t.Fatalf("keymount unmount: %v\n%s", err, out)
	}
	if m := mountsUnder(t, e.dir); len(m) > 0 {
		t.Errorf("still mounted: %q", m)
	}
	if _, err := os.Lstat(e.target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("target after unmount: %v, want it gone", err)
	}

	out, err = keymount("mount", "-f", filepath.Join(e.dir, "missing.yaml"), "--target", e.target)
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != exitError || !strings.HasPrefix(out, "keymount: read class file") {
		t.Errorf("mount of a missing class file: %v, output %q; want exit 1 and a clear message", err, out)
	}

	// keymount convert -f - reads the process's stdin.
	in, err := os.Open(convertTestdata + "eso-template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	convertCmd := exec.CommandContext(t.Context(), bin, "convert", "-f", "-")
	convertCmd.Stdin = in
	got, err := convertCmd.Output()
	want, rerr := os.ReadFile(convertTestdata + "eso-template.golden")
	if err != nil || rerr != nil || string(got) != string(want) {
		t.Errorf("keymount convert -f - < eso-template.yaml: %v, %v; output:\n%s\nwant the golden output", err, rerr, got)
	}
}
