package main

import (
	"archive/tar"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/keymount/keymount/internal/ociimage"
	"github.com/keymount/keymount/internal/ociimage/ocitest"
)

// TestImages builds the images for the host's platform into a temporary
// directory, as `make image` does, and reads them back: each is an index of
// that platform, named <registry>/<name>:<version>; the providers run as
// 65532, the driver as root; the binaries sit in /usr/local/bin and report
// the version (the build checks that); the AWS provider carries the CA
// certificates; the host's image archive loads.
func TestImages(t *testing.T) {
	out := t.TempDir()
	const version = "v0.0.0-test+abc"
	cmd := exec.Command("go", "run", "./hack/image", "-out", out, "-version", version, "-registry", "registry.example/km",
		"-platforms", "linux/"+runtime.GOARCH)
	cmd.Dir = "../.." // the module root, as make runs it
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the images: %v\n%s", err, b)
	}
	for _, im := range ociimage.Programs {
		checkImage(t, out, version, im)
	}
}

// checkImage reads one image back from out and checks it.
func checkImage(t *testing.T, out, version string, im ociimage.Program) {
	t.Helper()
	img := hostImage(t, filepath.Join(out, im.Name), "registry.example/km/"+im.Name+":v0.0.0-test-abc")
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != im.User || cfg.Config.Labels["org.opencontainers.image.version"] != version ||
		!slices.Equal(cfg.Config.Entrypoint, []string{"/usr/local/bin/" + im.Bins[0]}) {
		t.Errorf("%s: user %q, version label %q, entrypoint %q", im.Name, cfg.Config.User,
			cfg.Config.Labels["org.opencontainers.image.version"], cfg.Config.Entrypoint)
	}
	if strings.HasPrefix(im.Name, "keymount-provider") && (cfg.Config.User == "" || strings.HasPrefix(cfg.Config.User, "0")) {
		t.Errorf("%s runs as root", im.Name)
	}
	files := layerFiles(t, img)
	for _, b := range im.Bins {
		if !files["usr/local/bin/"+b] {
			t.Errorf("%s: no /usr/local/bin/%s in %v", im.Name, b, files)
		}
	}
	if im.CA != files["etc/ssl/certs/ca-certificates.crt"] {
		t.Errorf("%s: CA certificates present %v, want %v", im.Name, files["etc/ssl/certs/ca-certificates.crt"], im.CA)
	}
	if _, err := tarball.ImageFromPath(filepath.Join(out, im.Name+"-"+runtime.GOARCH+".tar"), nil); err != nil {
		t.Errorf("%s: the host's image archive: %v", im.Name, err)
	}
}

// hostImage opens the OCI layout in dir, checks its one index is named ref
// and holds the host's platform only, and returns that image.
func hostImage(t *testing.T, dir, ref string) v1.Image {
	t.Helper()
	idx, _ := ocitest.LayoutIndex(t, dir, ref)
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Platform.Architecture != runtime.GOARCH {
		t.Fatalf("%s: platforms %+v, %v", dir, im, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// layerFiles lists the regular files of the image's filesystem.
func layerFiles(t *testing.T, img v1.Image) map[string]bool {
	t.Helper()
	files := map[string]bool{}
	ocitest.Walk(t, img, func(h *tar.Header, _ io.Reader) {
		if h.Typeflag == tar.TypeReg {
			files[h.Name] = true
		}
	})
	return files
}
