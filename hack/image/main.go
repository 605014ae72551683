// Command image builds keymount's container images without a container
// engine (`make image`): static binaries on an empty base, plus the CA
// certificates the providers need to reach their stores, for every
// platform asked, stamped with the version. Nothing is pulled from a
// registry.
//
// For each image it writes, under -out:
//   - <name>/: an OCI image layout holding one multi-platform index named
//     <registry>/<name>:<version>, which `skopeo copy oci:<dir>:<ref>` or
//     `crane push` publish;
//   - <name>-<arch>.tar: the host platform's image as an image archive,
//     which `ctr images import` and `docker load` read.
//
// It checks what it built: the host platform's binaries must report the
// version (--version, `keymount version`).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/keymount/keymount/internal/ociimage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "bin/images", "directory the images are written to")
	version := flag.String("version", "", "version stamped into the binaries and the tags (git describe)")
	registry := flag.String("registry", "ghcr.io/keymount", "registry path of the image names")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	caBundle := flag.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates copied into the images that reach remote stores")
	goTool := flag.String("go", "go", "the go command")
	flag.Parse()
	if *version == "" {
		return errors.New("-version is empty: pass the output of git describe")
	}
	ca, err := os.ReadFile(*caBundle)
	if err != nil {
		return fmt.Errorf("read the CA bundle (install Debian's ca-certificates): %w", err)
	}
	built := map[string]map[string]v1.Image{} // image name → arch → image
	for _, plat := range strings.Split(*platforms, ",") {
		goos, arch, ok := strings.Cut(strings.TrimSpace(plat), "/")
		if !ok || goos != "linux" {
			return fmt.Errorf("platform %q: want linux/<arch>", plat)
		}
		binDir := filepath.Join(*out, "bin", arch)
		if err := buildBinaries(*goTool, goos, arch, *version, binDir); err != nil {
			return err
		}
		if arch == runtime.GOARCH {
			if err := checkVersion(binDir, *version); err != nil {
				return err
			}
		}
		for _, im := range ociimage.Programs {
			img, err := im.Build(goos, arch, *version, binDir, ca)
			if err != nil {
				return err
			}
			if built[im.Name] == nil {
				built[im.Name] = map[string]v1.Image{}
			}
			built[im.Name][arch] = img
		}
	}
	for _, im := range ociimage.Programs {
		ref := fmt.Sprintf("%s/%s:%s", *registry, im.Name, tag(*version))
		var all []v1.Image
		for _, img := range built[im.Name] {
			all = append(all, img)
		}
		idx, err := ociimage.Index(all...)
		if err != nil {
			return err
		}
		if err := ociimage.WriteLayout(filepath.Join(*out, im.Name), ref, idx); err != nil {
			return err
		}
		if img, ok := built[im.Name][runtime.GOARCH]; ok {
			archive := filepath.Join(*out, im.Name+"-"+runtime.GOARCH+".tar")
			if err := ociimage.WriteArchive(archive, ref, img); err != nil {
				return err
			}
		}
		fmt.Printf("image: %s (%d platforms) in %s\n", ref, len(all), filepath.Join(*out, im.Name))
	}
	return nil
}

// tag turns a version into an image tag: git describe's output is one,
// but a tag may not hold '+'.
func tag(version string) string {
	return strings.ReplaceAll(version, "+", "-")
}

func buildBinaries(goTool, goos, arch, version, dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-ldflags", "-s -w -X main.version=" + version, "-o", dir + "/"}
	for _, im := range ociimage.Programs {
		for _, b := range im.Bins {
			args = append(args, "./cmd/"+b)
		}
	}
	cmd := exec.Command(goTool, args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build the binaries for %s/%s: %w", goos, arch, err)
	}
	return nil
}

// checkVersion runs the host's binaries and checks they report version.
func checkVersion(dir, version string) error {
	for _, c := range [][]string{
		{"keymount-driver", "--version"}, {"keymount-provider-local", "--version"},
		{"keymount-provider-aws", "--version"}, {"keymount-provider-vault", "--version"}, {"keymount", "version"},
		{"keymount-controller", "--version"},
	} {
		out, err := exec.Command(filepath.Join(dir, c[0]), c[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %w (it printed %q)", c[0], c[1], err, out)
		}
		if !bytes.Contains(out, []byte(version)) {
			return fmt.Errorf("%s %s printed %q, want the version %s", c[0], c[1], out, version)
		}
	}
	return nil
}
