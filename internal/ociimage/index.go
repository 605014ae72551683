package ociimage

import (
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// refNameAnnotation names an image in an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// Index returns the multi-platform image index of imgs, each under the
// platform its config names.
func Index(imgs ...v1.Image) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, img := range imgs {
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("ociimage: config: %w", err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture}},
		})
	}
	return idx, nil
}

// WriteLayout writes idx as an OCI image layout in dir (replacing what
// was there), its index named ref: what `skopeo copy oci:DIR:REF` or
// `crane push` publish, and `ctr images import --all-platforms` reads once
// tarred.
func WriteLayout(dir, ref string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("ociimage: layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: ref})); err != nil {
		return fmt.Errorf("ociimage: write %s: %w", dir, err)
	}
	return nil
}
