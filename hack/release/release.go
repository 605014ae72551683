package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/keymount/keymount/internal/ociimage"
)

// image is one published image of the release.
type image struct {
	// name is the image's (ociimage.Program.Name).
	name string
	// ref is <registry>/<name>:<version>.
	ref string
	// digest is the multi-platform index's.
	digest v1.Hash
	// platforms' image digests, by arch.
	platforms map[string]v1.Hash
}

// release cuts c's release and returns the directory it wrote.
func release(c config) (string, error) {
	if err := checkVersion(c.version); err != nil {
		return "", err
	}
	if err := checkClean(c.repo); err != nil {
		return "", err
	}
	notes, err := changelogSection(c.repo, c.version)
	if err != nil {
		return "", err
	}
	created, err := commitTime(c.repo)
	if err != nil {
		return "", err
	}
	dist := filepath.Join(c.out, c.version)
	if _, err := os.Stat(dist); err == nil {
		return "", fmt.Errorf("%s exists: remove it to cut %s again", dist, c.version)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	bins, err := os.MkdirTemp("", "keymount-release-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(bins) }()
	images, binDirs, err := buildImages(c, bins, filepath.Join(dist, "images"))
	if err != nil {
		return "", err
	}
	if err := writeArtifacts(c, dist, images, binDirs, notes, created); err != nil {
		return "", err
	}
	return dist, nil
}

// writeArtifacts writes everything but the images into dist: the SBOMs,
// the chart, the manifests, the notes and, last, SHA256SUMS.
func writeArtifacts(c config, dist string, images []image, binDirs map[string]string, notes, created string) error {
	if err := writeSBOMs(filepath.Join(dist, "sbom"), images, binDirs, c.version, created); err != nil {
		return err
	}
	if err := packageChart(c.repo, dist, c.version); err != nil {
		return err
	}
	if err := renderManifests(c.repo, filepath.Join(dist, "manifests"), c.registry, images); err != nil {
		return err
	}
	if err := writeNotes(filepath.Join(dist, "RELEASE-NOTES.md"), c, notes, images); err != nil {
		return err
	}
	return writeSums(dist)
}

// buildImages builds the binaries for every platform under bins/<arch>,
// checks the host's report the version, and writes every image's index as
// an OCI layout in dir/<name>.
func buildImages(c config, bins, dir string) ([]image, map[string]string, error) {
	ca, err := os.ReadFile(c.caBundle)
	if err != nil {
		return nil, nil, fmt.Errorf("read the CA bundle -ca-bundle (install Debian's ca-certificates): %w", err)
	}
	b := ociimage.Binaries{Go: c.goTool, ModuleDir: c.repo, Version: c.version, Output: os.Stderr}
	arches, binDirs, err := b.BuildPlatforms(c.platforms, bins)
	if err != nil {
		return nil, nil, fmt.Errorf("-platforms: %w", err)
	}
	built, err := ociimage.BuildAll("linux", arches, binDirs, c.version, ca)
	if err != nil {
		return nil, nil, err
	}
	var images []image
	for _, p := range ociimage.Programs {
		im := image{name: p.Name, ref: c.registry + "/" + p.Name + ":" + c.version, platforms: map[string]v1.Hash{}}
		for i, img := range built[p.Name] {
			if im.platforms[arches[i]], err = img.Digest(); err != nil {
				return nil, nil, err
			}
		}
		idx, err := ociimage.Index(built[p.Name]...)
		if err != nil {
			return nil, nil, err
		}
		if im.digest, err = idx.Digest(); err != nil {
			return nil, nil, err
		}
		if err := ociimage.WriteLayout(filepath.Join(dir, p.Name), im.ref, idx); err != nil {
			return nil, nil, err
		}
		images = append(images, im)
	}
	return images, binDirs, nil
}
