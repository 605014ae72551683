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
	"golang.org/x/mod/modfile"

	"github.com/keymount/keymount/internal/ociimage"
	"github.com/keymount/keymount/internal/ociimage/ocitest"
)

// TestDockerfile builds every final stage of the root Dockerfile with
// buildah (vfs storage, chroot isolation, nothing pulled: the Go build
// stage, whose base image cannot be pulled offline, is replaced by one that
// copies binaries this test built, and checked on its own) and checks each
// image against the one `make image` packs from the same binaries: the same
// files (path, mode, content), entrypoint, cmd, user, environment and
// labels. buildah leaves no mount, no process and no state outside the
// test's directory behind.
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
	checkBuildStage(t, string(df))
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

// checkBuildStage checks the Dockerfile's Go build stage, which the build
// below replaces: it starts from the Go image of go.mod's Go version and
// builds every program of make image's images as ociimage.Binaries does
// (static, -trimpath, the same linker flags), and nothing else.
func checkBuildStage(t *testing.T, df string) {
	t.Helper()
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.ParseLax("go.mod", gomod, nil)
	if err != nil || mf.Go == nil {
		t.Fatalf("go.mod: %v", err)
	}
	goVersion := mf.Go.Version
	if mf.Toolchain != nil {
		goVersion = strings.TrimPrefix(mf.Toolchain.Name, "go")
	}
	if want := "ARG GO_IMAGE=golang:" + goVersion + "-"; !strings.Contains(df, "\n"+want) {
		t.Errorf("the Dockerfile has no line %q...: its Go image must be go.mod's Go %s", want, goVersion)
	}
	stage := strings.ReplaceAll(buildStage.FindString(df), "\\\n", " ")
	var build string
	for _, line := range strings.Split(stage, "\n") {
		if strings.HasPrefix(line, "RUN ") && strings.Contains(line, " go build ") {
			build = line
		}
	}
	if build == "" {
		t.Fatalf("the Dockerfile's build stage has no `RUN ... go build ...`:\n%s", stage)
	}
	for _, want := range []string{"CGO_ENABLED=0 ", " -trimpath ", ` -ldflags "` + ociimage.LDFlags("${VERSION}") + `" `} {
		if !strings.Contains(build, want) {
			t.Errorf("the Dockerfile's go build lacks %q (make image builds so): %s", want, build)
		}
	}
	var got, want []string
	for _, f := range strings.Fields(build) {
		if strings.HasPrefix(f, "./cmd/") {
			got = append(got, strings.TrimPrefix(f, "./cmd/"))
		}
	}
	for _, p := range ociimage.Programs {
		want = append(want, p.Bins...)
	}
	if !slices.Equal(sortedCopy(got), sortedCopy(want)) {
		t.Errorf("the Dockerfile builds %v, make image's images carry %v", got, want)
	}
}

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
	files := map[string]string{}
	ocitest.Walk(t, img, func(h *tar.Header, r io.Reader) {
		entry := fmt.Sprintf("%c %v %d:%d", h.Typeflag, h.FileInfo().Mode(), h.Uid, h.Gid)
		if h.Typeflag == tar.TypeReg {
			s := sha256.New()
			if _, err := io.Copy(s, r); err != nil {
				t.Fatal(err)
			}
			entry += " " + hex.EncodeToString(s.Sum(nil))
		}
		files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = entry
	})
	return files
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
