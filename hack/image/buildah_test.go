//go:build release

package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// systemStateDirs are where the containers libraries keep state as root
// whatever --root says: buildah 1.28 (Debian bookworm) writes its blob info
// cache to /var/lib/containers/cache/blob-info-cache-v1.boltdb on every
// build and push. Each buildah of the test runs in a private mount
// namespace with the first of them bound to a directory of the test, and
// the test fails if any of them changed.
var systemStateDirs = []string{"/var/lib/containers", "/var/cache/containers", "/run/containers", "/etc/containers"}

// buildahRun runs buildah with its own storage (vfs) and state under one
// directory.
type buildahRun struct {
	bin, unshare, root string
	env                []string
}

func newBuildah(t *testing.T, bin, root string) *buildahRun {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) runs buildah in its own mount namespace; install util-linux: %v", err)
	}
	for _, d := range []string{"storage", "run", "tmp", "out", "var-lib-containers"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	before := stateOf(t, systemStateDirs)
	t.Cleanup(func() {
		if d := cmp.Diff(before, stateOf(t, systemStateDirs)); d != "" {
			t.Errorf("buildah changed state outside the test's directory (-before +after):\n%s", d)
		}
	})
	// The mount point of the private /var/lib/containers is the machine's
	// own, made once by `make buildah` (make test runs it): a test that
	// made and removed it raced another test run on the machine, which
	// then found it gone or changed.
	if fi, err := os.Stat(systemStateDirs[0]); err != nil || !fi.IsDir() {
		t.Fatalf("%s, the mount point of buildah's private state, is not a directory (%v): run `make buildah` (make test does), which makes it", systemStateDirs[0], err)
	}
	// No registry is asked anything: no search registries, a policy that
	// needs no keys, and nothing to pull (the base is scratch).
	writeFile(t, filepath.Join(root, "registries.conf"), []byte("unqualified-search-registries = []\n"), 0o600)
	writeFile(t, filepath.Join(root, "policy.json"), []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`), 0o600)
	b := &buildahRun{bin: bin, unshare: unshare, root: root, env: append(os.Environ(),
		"TMPDIR="+filepath.Join(root, "tmp"), "BUILDAH_ISOLATION=chroot",
		"CONTAINERS_REGISTRIES_CONF="+filepath.Join(root, "registries.conf"))}
	t.Cleanup(func() { b.cleanup(t) })
	return b
}

// run runs buildah with args in a private mount namespace whose
// /var/lib/containers is the test's (the namespace, and the bind mount
// with it, ends when buildah exits).
func (b *buildahRun) run(t *testing.T, args ...string) {
	t.Helper()
	all := append([]string{"--mount", "--propagation", "private", "--",
		"sh", "-ec", `mount --bind "$0" ` + systemStateDirs[0] + `; exec "$@"`, filepath.Join(b.root, "var-lib-containers"),
		b.bin, "--root", filepath.Join(b.root, "storage"), "--runroot", filepath.Join(b.root, "run"), "--storage-driver", "vfs"}, args...)
	cmd := exec.Command(b.unshare, all...)
	cmd.Env = b.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// build builds target and returns its image, read back from an OCI layout.
func (b *buildahRun) build(t *testing.T, ctx, target, version string) v1.Image {
	t.Helper()
	tag := "localhost/keymount-test/" + target + ":test"
	b.run(t, "build", "--isolation", "chroot", "--pull=never", "--identity-label=false", "--timestamp", "0",
		"--signature-policy", filepath.Join(b.root, "policy.json"), "--build-arg", "VERSION="+version,
		"--target", target, "-t", tag, "-f", filepath.Join(ctx, "Dockerfile"), ctx)
	dir := filepath.Join(b.root, "out", target)
	b.run(t, "push", "--signature-policy", filepath.Join(b.root, "policy.json"), tag, "oci:"+dir+":test")
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("buildah's layout of %s: %+v, %v", target, m, err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// cleanup removes buildah's containers and images and checks that nothing
// of it is mounted or running.
func (b *buildahRun) cleanup(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(b.root, "storage")); err != nil {
		return // cleaned up already
	}
	b.run(t, "rm", "--all")
	b.run(t, "rmi", "--all", "--force")
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, b.root) {
			t.Errorf("buildah left a mount behind: %s", line)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(cmdline), b.root) {
			t.Errorf("a process is left behind: %s: %q", p, cmdline)
		}
	}
	if err := os.RemoveAll(b.root); err != nil {
		t.Errorf("remove buildah's storage: %v", err)
	}
}

// stateOf lists every file and directory under dirs (those that exist)
// with its mode, size and modification time.
func stateOf(t *testing.T, dirs []string) map[string]string {
	t.Helper()
	state := map[string]string{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if os.IsNotExist(err) && p == dir {
				return nil
			}
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			state[p] = fmt.Sprintf("%v %d %s", info.Mode(), info.Size(), info.ModTime().UTC().Format("2006-01-02T15:04:05.000000000"))
			return nil
		})
		if err != nil {
			t.Fatalf("list %s: %v", dir, err)
		}
	}
	return state
}
