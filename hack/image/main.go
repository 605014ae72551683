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
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

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
	bins := ociimage.Binaries{Go: *goTool, Version: *version, Output: os.Stdout}
	arches, binDirs, err := bins.BuildPlatforms(strings.Split(*platforms, ","), filepath.Join(*out, "bin"))
	if err != nil {
		return err
	}
	built, err := ociimage.BuildAll("linux", arches, binDirs, *version, ca)
	if err != nil {
		return err
	}
	for _, im := range ociimage.Programs {
		ref := fmt.Sprintf("%s/%s:%s", *registry, im.Name, ociimage.Tag(*version))
		idx, err := ociimage.Index(built[im.Name]...)
		if err != nil {
			return err
		}
		if err := ociimage.WriteLayout(filepath.Join(*out, im.Name), ref, idx); err != nil {
			return err
		}
		for i, arch := range arches {
			if arch != runtime.GOARCH {
				continue
			}
			archive := filepath.Join(*out, im.Name+"-"+arch+".tar")
			if err := ociimage.WriteArchive(archive, ref, built[im.Name][i]); err != nil {
				return err
			}
		}
		fmt.Printf("image: %s (%d platforms) in %s\n", ref, len(arches), filepath.Join(*out, im.Name))
	}
	return nil
}
