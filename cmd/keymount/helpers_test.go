package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

// demoClass is a class for the local provider: three objects, one aliased
// into a sub-directory, one with its own mode.
const demoClass = `apiVersion: secrets-store.csi.x-k8s.io/v1
kind: SecretProviderClass
metadata:
  name: demo
spec:
  provider: local
  parameters:
    objects: |
      - objectName: db-password
        objectAlias: db/password
      - objectName: api-token
        filePermission: "0600"
      - objectName: config/app.properties
`

// demoFiles are the files under the local provider's root.
var demoFiles = map[string]string{
	"db-password":           "test-password-not-a-secret\n",
	"api-token":             "test-token-not-a-secret\n",
	"config/app.properties": "app.name=test\n",
}

// env is one test's directories: the local provider root, the class file,
// the state dir and a target that does not exist yet.
type env struct {
	dir, root, classFile, stateDir, target string
}

// newEnv writes the demo root and class under a temp dir. Whatever a failed
// test leaves mounted there is unmounted before the temp dir goes.
func newEnv(t *testing.T, classYAML string) *env {
	t.Helper()
	requireRoot(t)
	dir := t.TempDir()
	t.Cleanup(func() { unmountAll(t, dir) })
	e := &env{
		dir:       dir,
		root:      filepath.Join(dir, "root"),
		classFile: filepath.Join(dir, "class.yaml"),
		stateDir:  filepath.Join(dir, "state"),
		target:    filepath.Join(dir, "pod", "mnt"),
	}
	for name, data := range demoFiles {
		writeFile(t, filepath.Join(e.root, name), data)
	}
	writeFile(t, e.classFile, classYAML)
	return e
}

// mountArgs are the arguments of "keymount mount" for e, plus extra.
func (e *env) mountArgs(extra ...string) []string {
	return append([]string{"-f", e.classFile, "--local-root", e.root, "--target", e.target, "--state-dir", e.stateDir}, extra...)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("these tests mount tmpfs and bind mounts: run them as root")
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mountsUnder lists the mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	mps, err := mount.New("").List()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mp := range mps {
		if strings.HasPrefix(mp.Path, dir+"/") {
			out = append(out, mp.Path)
		}
	}
	return out
}

// unmountAll detaches every mount under dir, deepest first.
func unmountAll(t *testing.T, dir string) {
	mps := mountsUnder(t, dir)
	slices.SortFunc(mps, func(a, b string) int { return len(b) - len(a) })
	for _, mp := range mps {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			t.Errorf("cleanup: unmount %s: %v", mp, err)
		}
	}
}

// cli runs keymount in-process and returns its exit code and output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}
