//go:build release

package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/keymount/keymount/internal/ociimage"
)

// TestDockerfile builds every final stage of the root Dockerfile with
// buildah (vfs storage, chroot isolation, nothing pulled: the Go build
// stage is replaced by one that copies binaries this test built) and checks
// each image against the one `make image` packs from the same binaries:
// the same files (path, mode, content), entrypoint, cmd, user, environment
// and labels. buildah leaves no mount and no process behind.
func TestDockerfile(t *testing.T) {
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		t.Fatalf("buildah is not installed: run `bash hack/install-deps.sh buildah=buildah` (make test does): %v", err)
	}
	const version = "v0.0.0-dockerfile"
	tmp := t.TempDir()
	ctx := filepath.Join(tmp, "context")
	binDir := filepath.Join(ctx, "bin")
	bins := ociimage.Binaries{Go: "go", ModuleDir: "../..", Version: version, Output: io.Discard}
	if err := bins.Build("linux", runtime.GOARCH, binDir); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatalf("the CA bundle (Debian's ca-certificates): %v", err)
	}
	// make image stores the bundle 0644; COPY keeps the context's mode.
	writeFile(t, filepath.Join(ctx, "ca-certificates.crt"), ca, 0o644)
	df, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	local, targets, err := localBuildStage(string(df))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, im := range ociimage.Programs {
		names = append(names, im.Name)
	}
	if !slices.Equal(sortedCopy(targets), sortedCopy(names)) {
		t.Errorf("the Dockerfile's final stages are %v, want one per image of make image: %v", targets, names)
	}
	writeFile(t, filepath.Join(ctx, "Dockerfile"), []byte(local), 0o600)

	b := newBuildah(t, buildah, filepath.Join(tmp, "buildah"))
	for _, im := range ociimage.Programs {
		t.Run(im.Name, func(t *testing.T) {
			got := b.build(t, ctx, im.Name, version)
			want, err := im.Build("linux", runtime.GOARCH, version, binDir, ca)
			if err != nil {
				t.Fatal(err)
			}
			compareImages(t, got, want)
		})
	}
	b.cleanup(t)
}

// buildStage is the Dockerfile's Go build stage: from its FROM line to the
// next FROM.
var (
	buildStage = regexp.MustCompile(`(?ims)^FROM\s[^\n]*\sAS\s+build\s*$.*?(^FROM\s)`)
	finalStage = regexp.MustCompile(`(?im)^FROM\s+(\S+)\s+AS\s+(\S+)\s*$`)
)

// localBuildStage returns the Dockerfile with its build stage replaced by
// one that copies the context's bin/ and CA bundle where the Go build
// leaves them, and the names of the other (final) stages. Every final stage
// must start from scratch.
func localBuildStage(df string) (string, []string, error) {
	loc := buildStage.FindStringSubmatchIndex(df)
	if loc == nil {
		return "", nil, errors.New("the Dockerfile has no stage `FROM ... AS build` followed by a final stage")
	}
	const local = "FROM scratch AS build\nCOPY bin/ /out/\nCOPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\n\n"
	out := df[:loc[0]] + local + df[loc[2]:]
	var targets []string
	for _, m := range finalStage.FindAllStringSubmatch(out, -1) {
		if strings.EqualFold(m[2], "build") {
			continue
		}
		if m[1] != "scratch" {
			return "", nil, fmt.Errorf("stage %s starts from %s, want scratch (the images of make image have no base)", m[2], m[1])
		}
		targets = append(targets, m[2])
	}
	return out, targets, nil
}

// buildahRun runs buildah with its own storage (vfs) under one directory.
type buildahRun struct {
	bin, root string
	env       []string
}

func newBuildah(t *testing.T, bin, root string) *buildahRun {
	t.Helper()
	for _, d := range []string{"storage", "run", "tmp", "out"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// No registry is asked anything: no search registries, a policy that
	// needs no keys, and nothing to pull (the base is scratch).
	writeFile(t, filepath.Join(root, "registries.conf"), []byte("unqualified-search-registries = []\n"), 0o600)
	writeFile(t, filepath.Join(root, "policy.json"), []byte(`{"default":[{"type":"insecureAcceptAnything"}]}`), 0o600)
	b := &buildahRun{bin: bin, root: root, env: append(os.Environ(),
		"TMPDIR="+filepath.Join(root, "tmp"), "BUILDAH_ISOLATION=chroot",
		"CONTAINERS_REGISTRIES_CONF="+filepath.Join(root, "registries.conf"))}
	t.Cleanup(func() { b.cleanup(t) })
	return b
}

func (b *buildahRun) run(t *testing.T, args ...string) {
	t.Helper()
	all := append([]string{"--root", filepath.Join(b.root, "storage"), "--runroot", filepath.Join(b.root, "run"), "--storage-driver", "vfs"}, args...)
	cmd := exec.Command(b.bin, all...)
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

// compareImages checks that got holds want's files and configuration.
func compareImages(t *testing.T, got, want v1.Image) {
	t.Helper()
	gc, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := want.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	type conf struct {
		OS, Arch, User   string
		Entrypoint, Cmd  []string
		Env              []string
		Labels           map[string]string
		WorkingDir       string
		ExposedPortCount int
	}
	pick := func(c *v1.ConfigFile) conf {
		return conf{c.OS, c.Architecture, c.Config.User, c.Config.Entrypoint, c.Config.Cmd, c.Config.Env,
			c.Config.Labels, c.Config.WorkingDir, len(c.Config.ExposedPorts)}
	}
	if d := cmp.Diff(pick(wc), pick(gc)); d != "" {
		t.Errorf("configuration differs from make image's (-make image +Dockerfile):\n%s", d)
	}
	if d := cmp.Diff(fileTree(t, want), fileTree(t, got)); d != "" {
		t.Errorf("files differ from make image's (-make image +Dockerfile):\n%s", d)
	}
}

// fileTree lists the image's filesystem: path → kind, mode, owner and,
// for a regular file, the SHA-256 of its content.
func fileTree(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		entry := fmt.Sprintf("%c %v %d:%d", h.Typeflag, h.FileInfo().Mode(), h.Uid, h.Gid)
		if h.Typeflag == tar.TypeReg {
			s := sha256.New()
			if _, err := io.Copy(s, tr); err != nil {
				t.Fatal(err)
			}
			entry += " " + hex.EncodeToString(s.Sum(nil))
		}
		files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = entry
	}
}

func writeFile(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
