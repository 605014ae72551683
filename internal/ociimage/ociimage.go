// Package ociimage builds container images without a container engine: a
// single layer of static files on an empty base, with the config a runtime
// needs, written as an image archive that `ctr images import` (or `docker
// load`) reads. Nothing is pulled from a registry.
package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one regular file of the image's layer.
type File struct {
	// Path is absolute inside the image ("/probe"); its parent directories
	// are created with mode 0755.
	Path string
	// Mode is the file's permission bits (0755 for a program).
	Mode os.FileMode
	// Data is the file's content.
	Data []byte
}

// Spec describes an image.
type Spec struct {
	// OS and Architecture of the binaries in Files (GOOS/GOARCH names).
	OS, Architecture string
	Files            []File
	// Entrypoint and Cmd as in an image config.
	Entrypoint, Cmd []string
	// User is "uid[:gid]"; empty runs as the runtime's default (root).
	User string
	// Env is extra environment, "KEY=value"; PATH is "/" unless it sets
	// one.
	Env []string
	// Labels of the image config.
	Labels map[string]string
}

// epoch is every file's and the image's time: the same Spec gives the same
// image digest.
var epoch = time.Unix(0, 0).UTC()

// Build returns the image Spec describes.
func Build(spec Spec) (v1.Image, error) {
	if spec.OS == "" || spec.Architecture == "" {
		return nil, errors.New("ociimage: OS and Architecture must be set")
	}
	layerTar, err := layer(spec.Files)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("ociimage: layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "keymount ociimage", Created: v1.Time{Time: epoch}}})
	if err != nil {
		return nil, fmt.Errorf("ociimage: append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("ociimage: config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS = spec.OS
	cfg.Architecture = spec.Architecture
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = slices.Clone(spec.Entrypoint)
	cfg.Config.Cmd = slices.Clone(spec.Cmd)
	cfg.Config.User = spec.User
	cfg.Config.Env = slices.Clone(spec.Env)
	if !slices.ContainsFunc(spec.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		cfg.Config.Env = append([]string{"PATH=/"}, spec.Env...)
	}
	cfg.Config.Labels = spec.Labels
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("ociimage: set config: %w", err)
	}
	return img, nil
}

// layer is the tar of files and their parent directories, in a fixed order.
func layer(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range sorted {
		p := path.Clean(f.Path)
		if !path.IsAbs(f.Path) || p == "/" || p != f.Path {
			return nil, fmt.Errorf("ociimage: file path %q must be absolute and clean, e.g. /probe", f.Path)
		}
		var parents []string
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			parents = append(parents, d)
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: p[1:], Mode: int64(f.Mode.Perm()), Size: int64(len(f.Data)), ModTime: epoch,
		}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteArchive writes img to path as an image archive (the `docker save`
// layout: manifest.json, the config and the layers) tagged ref, which
// containerd's `ctr images import` and `docker load` both read.
func WriteArchive(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("ociimage: image reference %q: %w (want registry/repository:tag)", ref, err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return fmt.Errorf("ociimage: write %s: %w", path, err)
	}
	return nil
}
