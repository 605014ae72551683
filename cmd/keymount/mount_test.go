package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMountThenUnmount(t *testing.T) {
	e := newEnv(t, demoClass)
	var out bytes.Buffer
	if err := mountCommand(t.Context(), e.mountArgs("--read-only"), &out, &out); err != nil {
		t.Fatalf("mount: %v\n%s", err, out.String())
	}
	for _, want := range []string{`mounted 3 files of SecretProviderClass "demo"`, "db/password", "api-token", "config/app.properties", "(read-only)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("mount output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "not-a-secret") {
		t.Errorf("mount output shows file contents:\n%s", out.String())
	}
	checkFiles(t, e.target, map[string]string{
		"db/password":           demoFiles["db-password"],
		"api-token":             demoFiles["api-token"],
		"config/app.properties": demoFiles["config/app.properties"],
	})
	checkMode(t, filepath.Join(e.target, "api-token"), 0o600)
	if err := os.WriteFile(filepath.Join(e.target, "new"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("write into the mount: %v, want EROFS", err)
	}
	// The driver published into the private kubelet layout, and the target
	// is a read-only bind of that volume.
	kubeletTargets := privateTargets(t, e)
	if len(kubeletTargets) != 1 {
		t.Fatalf("private kubelet targets %q, want one", kubeletTargets)
	}
	if got := mountsUnder(t, e.dir); !slices.Contains(got, e.target) || !slices.Contains(got, kubeletTargets[0]) {
		t.Errorf("mounts %q lack the target %s or the kubelet target %s", got, e.target, kubeletTargets[0])
	}
	if !sameInode(t, e.target, kubeletTargets[0]) {
		t.Errorf("%s does not show the volume published at %s", e.target, kubeletTargets[0])
	}

	out.Reset()
	if err := unmountCommand(t.Context(), []string{e.target, "--state-dir", e.stateDir}, &out, &out); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	if got := out.String(); got != "unmounted "+e.target+"\n" {
		t.Errorf("unmount output = %q", got)
	}
	if _, err := os.Lstat(e.target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("target after unmount: %v, want it gone", err)
	}
	if m := mountsUnder(t, e.dir); len(m) > 0 {
		t.Errorf("still mounted after unmount: %q", m)
	}
	if left := privateDirs(t, e); len(left) > 0 {
		t.Errorf("private kubelet dirs left after unmount: %q", left)
	}

	out.Reset()
	if err := unmountCommand(t.Context(), []string{"--state-dir", e.stateDir, e.target}, &out, &out); err != nil {
		t.Fatalf("second unmount: %v", err)
	}
	if got := out.String(); got != "nothing mounted at "+e.target+"\n" {
		t.Errorf("second unmount output = %q", got)
	}
}

func TestMountAgainRefreshes(t *testing.T) {
	e := newEnv(t, demoClass)
	var out bytes.Buffer
	if err := mountCommand(t.Context(), e.mountArgs(), &out, &out); err != nil {
		t.Fatalf("mount: %v", err)
	}
	writeFile(t, filepath.Join(e.root, "api-token"), "test-token-rotated\n")
	if err := mountCommand(t.Context(), e.mountArgs(), &out, &out); err != nil {
		t.Fatalf("second mount: %v", err)
	}
	checkFiles(t, e.target, map[string]string{"api-token": "test-token-rotated\n"})

	// Read-only is always on (it replaces the former check that a refresh
	// keeps the first mount's --read-only): a writable mount is refused.
	var uerr *usageError
	if err := mountCommand(t.Context(), e.mountArgs("--read-only=false"), &out, &out); !errors.As(err, &uerr) ||
		!strings.Contains(err.Error(), "--read-only=false is not supported") {
		t.Errorf("refresh with --read-only=false: err = %v, want a usage error", err)
	}
	// The pod UID of a mounted volume does not change on a refresh.
	if err := mountCommand(t.Context(), e.mountArgs("--pod-uid", "another"), &out, &out); err == nil || !strings.Contains(err.Error(), "unmount it first") {
		t.Errorf("refresh with another --pod-uid: err = %v, want a refusal", err)
	}
	checkFiles(t, e.target, map[string]string{"api-token": "test-token-rotated\n"})

	// A target unmounted by hand is bound again by the next refresh.
	if err := unix.Unmount(e.target, 0); err != nil {
		t.Fatal(err)
	}
	if err := mountCommand(t.Context(), e.mountArgs(), &out, &out); err != nil {
		t.Fatalf("refresh of an unmounted target: %v", err)
	}
	checkFiles(t, e.target, map[string]string{"api-token": "test-token-rotated\n"})

	// A refresh that fails keeps the files and says so.
	if err := os.Remove(filepath.Join(e.root, "api-token")); err != nil {
		t.Fatal(err)
	}
	err := mountCommand(t.Context(), e.mountArgs(), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "refresh failed") || !strings.Contains(err.Error(), `"api-token"`) {
		t.Errorf("refresh with a missing object: err = %v, want a refresh failure naming api-token", err)
	}
	checkFiles(t, e.target, map[string]string{"api-token": "test-token-rotated\n"})
}

func TestMountErrors(t *testing.T) {
	twoClasses := demoClass + "---\n" + strings.Replace(demoClass, "name: demo", "name: other", 1)
	missingObject := strings.Replace(demoClass, "objectName: api-token", "objectName: no-such-token", 1)
	namespaced := strings.Replace(demoClass, "name: demo", "name: demo\n  namespace: team", 1)
	tests := []struct {
		name      string
		class     string
		args      func(e *env) []string
		code      codes.Code // of a failed CSI call; OK for other errors
		usage     bool
		wantInErr []string
	}{{
		name:      "missing class file",
		class:     demoClass,
		args:      func(e *env) []string { return e.mountArgs("-f", filepath.Join(e.dir, "nope.yaml")) },
		wantInErr: []string{"read class file", "nope.yaml", "no such file or directory"},
	}, {
		name:      "missing object",
		class:     missingObject,
		args:      func(e *env) []string { return e.mountArgs() },
		code:      codes.NotFound,
		wantInErr: []string{"mount failed (NotFound)", `"no-such-token"`},
	}, {
		name:      "several classes and no --class",
		class:     twoClasses,
		args:      func(e *env) []string { return e.mountArgs() },
		usage:     true,
		wantInErr: []string{"several classes (demo, other)", "--class"},
	}, {
		name:      "unknown --class",
		class:     twoClasses,
		args:      func(e *env) []string { return e.mountArgs("--class", "third") },
		wantInErr: []string{`no class "third"`},
	}, {
		name:      "class in another namespace",
		class:     namespaced,
		args:      func(e *env) []string { return e.mountArgs("--pod-namespace", "default") },
		code:      codes.FailedPrecondition,
		wantInErr: []string{"mount failed (FailedPrecondition)", `"demo"`, `"default"`},
	}, {
		name:  "provider not found",
		class: strings.Replace(demoClass, "provider: local", "provider: vault", 1),
		args: func(e *env) []string {
			return []string{"-f", e.classFile, "--target", e.target, "--state-dir", e.stateDir, "--provider-dir", e.dir}
		},
		code:      codes.FailedPrecondition,
		wantInErr: []string{`provider "vault" not found`},
	}, {
		name:      "--local-root with another provider",
		class:     strings.Replace(demoClass, "provider: local", "provider: vault", 1),
		args:      func(e *env) []string { return e.mountArgs() },
		usage:     true,
		wantInErr: []string{`--local-root serves provider "local"`, `"vault"`},
	}, {
		name:      "-f and --kubeconfig",
		class:     demoClass,
		args:      func(e *env) []string { return e.mountArgs("--kubeconfig", filepath.Join(e.dir, "kubeconfig")) },
		usage:     true,
		wantInErr: []string{"-f and --kubeconfig exclude each other"},
	}, {
		name:      "neither -f nor --kubeconfig",
		class:     demoClass,
		args:      func(e *env) []string { return []string{"--target", e.target, "--class", "demo"} },
		usage:     true,
		wantInErr: []string{"-f or --kubeconfig is required"},
	}, {
		name:  "--kubeconfig without --class",
		class: demoClass,
		args: func(e *env) []string {
			return []string{"--kubeconfig", filepath.Join(e.dir, "kubeconfig"), "--target", e.target}
		},
		usage:     true,
		wantInErr: []string{"--class is required with --kubeconfig"},
	}, {
		name:      "--context without --kubeconfig",
		class:     demoClass,
		args:      func(e *env) []string { return e.mountArgs("--context", "prod") },
		usage:     true,
		wantInErr: []string{"--context needs --kubeconfig"},
	}, {
		name:  "missing kubeconfig",
		class: demoClass,
		args: func(e *env) []string {
			return []string{"--kubeconfig", filepath.Join(e.dir, "nope"), "--class", "demo", "--target", e.target}
		},
		wantInErr: []string{"--kubeconfig", "nope", "no such file or directory"},
	}, {
		name:      "--read-only=false",
		class:     demoClass,
		args:      func(e *env) []string { return e.mountArgs("--read-only=false") },
		usage:     true,
		wantInErr: []string{"--read-only=false is not supported", "read-only"},
	}, {
		name:      "no --target",
		class:     demoClass,
		args:      func(e *env) []string { return []string{"-f", e.classFile} },
		usage:     true,
		wantInErr: []string{"--target is required"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.class)
			var out bytes.Buffer
			err := mountCommand(t.Context(), tt.args(e), &out, &out)
			if err == nil {
				t.Fatalf("mount succeeded:\n%s", out.String())
			}
			for _, want := range tt.wantInErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			var uerr *usageError
			if errors.As(err, &uerr) != tt.usage {
				t.Errorf("usage error = %v, want %v (%v)", !tt.usage, tt.usage, err)
			}
			if tt.code != codes.OK && status.Code(err) != tt.code {
				t.Errorf("code = %v, want %v", status.Code(err), tt.code)
			}
			checkNothingMounted(t, e)
		})
	}
}

func TestMountRefusesTarget(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, target string)
		wantErr string
	}{{
		name:    "non-empty directory",
		prepare: func(t *testing.T, target string) { writeFile(t, filepath.Join(target, "keep-me"), "data") },
		wantErr: "is not empty",
	}, {
		name:    "a file",
		prepare: func(t *testing.T, target string) { writeFile(t, target, "data") },
		wantErr: "is not a directory",
	}, {
		name: "another mount",
		prepare: func(t *testing.T, target string) {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mount("tmpfs", target, "tmpfs", 0, "size=1m"); err != nil {
				t.Fatal(err)
			}
		},
		wantErr: "is a mount point already",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, demoClass)
			tt.prepare(t, e.target)
			before := mountsUnder(t, e.dir)
			var out bytes.Buffer
			err := mountCommand(t.Context(), e.mountArgs(), &out, &out)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("mount: err = %v, want one containing %q", err, tt.wantErr)
			}
			if after := mountsUnder(t, e.dir); !slices.Equal(before, after) {
				t.Errorf("mounts = %q, want them unchanged: %q", after, before)
			}
		})
	}
}

// checkNothingMounted: no mount under the test's dir, no target, no volume
// left in the state dir.
func checkNothingMounted(t *testing.T, e *env) {
	t.Helper()
	if m := mountsUnder(t, e.dir); len(m) > 0 {
		t.Errorf("left mounted: %q", m)
	}
	if _, err := os.Lstat(e.target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("target: %v, want it absent", err)
	}
	vols, _ := os.ReadDir(filepath.Join(e.stateDir, "volumes")) // absent when the run stopped early
	if len(vols) > 0 {
		t.Errorf("volumes left in the state dir: %v", vols)
	}
	if left := privateDirs(t, e); len(left) > 0 {
		t.Errorf("private kubelet dirs left in the state dir: %q", left)
	}
}

// privateTargets lists the kubelet-style targets in e's state dir.
func privateTargets(t *testing.T, e *env) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(e.stateDir, "kubelet", "pods", "*", "volumes", "kubernetes.io~csi", "*", "mount"))
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// privateDirs lists what is left below the private kubelet root's pods dir.
func privateDirs(t *testing.T, e *env) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(e.stateDir, "kubelet", "pods", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// sameInode reports whether a and b are the same directory.
func sameInode(t *testing.T, a, b string) bool {
	t.Helper()
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

func checkFiles(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("read %s: %v", name, err)
			continue
		}
		if string(got) != data {
			t.Errorf("%s = %q, want %q", name, got, data)
		}
	}
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != want {
		t.Errorf("%s mode = %v, want %v", path, info.Mode().Perm(), want)
	}
}
