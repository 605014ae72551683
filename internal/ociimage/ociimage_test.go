package ociimage_test

import (
	"archive/tar"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/keymount/keymount/internal/ociimage"
	"github.com/keymount/keymount/internal/ociimage/ocitest"
)

func TestBuildWriteReadBack(t *testing.T) {
	spec := ociimage.Spec{
		OS: "linux", Architecture: "arm64",
		Files: []ociimage.File{
			{Path: "/usr/bin/prog", Mode: 0o755, Data: []byte("#!prog")},
			{Path: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: []byte("certs")},
		},
		Entrypoint: []string{"/usr/bin/prog"},
		Cmd:        []string{"serve"},
		User:       "65532:65532",
		Labels:     map[string]string{"org.opencontainers.image.version": "v1"},
	}
	img, err := ociimage.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ociimage.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("the same spec built two digests: %s, %s", d1, d2)
	}

	path := filepath.Join(t.TempDir(), "img.tar")
	if err := ociimage.WriteArchive(path, "keymount.test/prog:v1", img); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("keymount.test/prog:v1")
	back, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "arm64" || !slices.Equal(cfg.Config.Entrypoint, spec.Entrypoint) ||
		!slices.Equal(cfg.Config.Cmd, spec.Cmd) || cfg.Config.User != "65532:65532" ||
		cfg.Config.Labels["org.opencontainers.image.version"] != "v1" {
		t.Errorf("config read back: %+v", cfg)
	}

	got := map[string]string{}
	ocitest.Walk(t, back, func(h *tar.Header, r io.Reader) {
		data, _ := io.ReadAll(r)
		got[strings.TrimSuffix(h.Name, "/")] = string(data) + "|" + h.FileInfo().Mode().String()
	})
	want := map[string]string{
		"usr":                               "|drwxr-xr-x",
		"usr/bin":                           "|drwxr-xr-x",
		"usr/bin/prog":                      "#!prog|-rwxr-xr-x",
		"etc":                               "|drwxr-xr-x",
		"etc/ssl":                           "|drwxr-xr-x",
		"etc/ssl/certs":                     "|drwxr-xr-x",
		"etc/ssl/certs/ca-certificates.crt": "certs|-rw-r--r--",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("layer entry %s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("layer has %d entries, want %d: %v", len(got), len(want), got)
	}
}

func TestBuildRejects(t *testing.T) {
	for _, p := range []string{"prog", "/a/../prog", "/"} {
		_, err := ociimage.Build(ociimage.Spec{OS: "linux", Architecture: "amd64", Files: []ociimage.File{{Path: p, Mode: 0o755}}})
		if err == nil {
			t.Errorf("path %q: no error", p)
		}
	}
	if _, err := ociimage.Build(ociimage.Spec{}); err == nil {
		t.Error("no OS/Architecture: no error")
	}
	if err := ociimage.WriteArchive(filepath.Join(t.TempDir(), "x.tar"), "Not A Ref", nil); err == nil {
		t.Error("bad reference: no error")
	}
}

// TestIndexLayout: two platforms' images become one index in an OCI
// layout, each findable by its platform, the index named by ref.
func TestIndexLayout(t *testing.T) {
	var imgs []v1.Image
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := ociimage.Build(ociimage.Spec{OS: "linux", Architecture: arch, Files: []ociimage.File{{Path: "/usr/local/bin/x", Mode: 0o755, Data: []byte(arch)}},
			Entrypoint: []string{"/usr/local/bin/x"}, Env: []string{"PATH=/usr/local/bin"}, User: "65532:65532"})
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	idx, err := ociimage.Index(imgs...)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ociimage.WriteLayout(dir, "ghcr.io/keymount/x:v1", idx); err != nil {
		t.Fatal(err)
	}
	inner, _ := ocitest.LayoutIndex(t, dir, "ghcr.io/keymount/x:v1")
	im, err := inner.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range im.Manifests {
		got[d.Platform.OS+"/"+d.Platform.Architecture] = true
		checkPlatformImage(t, inner, d)
	}
	if !got["linux/amd64"] || !got["linux/arm64"] || len(got) != 2 {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", got)
	}
}

// checkPlatformImage checks the image d names in idx is of d's platform,
// with the user and PATH TestIndexLayout built it with.
func checkPlatformImage(t *testing.T, idx v1.ImageIndex, d v1.Descriptor) {
	t.Helper()
	img, err := idx.Image(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != d.Platform.Architecture || cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Env, []string{"PATH=/usr/local/bin"}) {
		t.Errorf("%s image config: arch %s user %q env %q", d.Platform.Architecture, cfg.Architecture, cfg.Config.User, cfg.Config.Env)
	}
}
