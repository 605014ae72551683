// Package ocitest reads back, in tests, the OCI layouts and images that
// ociimage writes: the one named index of a layout, and the files of an
// image's filesystem.
package ocitest

import (
	"archive/tar"
	"errors"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// refNameAnnotation names an image in an OCI layout's index.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// LayoutIndex opens the OCI layout in dir, fails the test unless its index
// holds exactly one image index, and marks it failed unless that one is
// named ref. It returns the image index and its digest.
func LayoutIndex(tb testing.TB, dir, ref string) (v1.ImageIndex, v1.Hash) {
	tb.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		tb.Fatal(err)
	}
	root, err := p.ImageIndex()
	if err != nil {
		tb.Fatal(err)
	}
	rm, err := root.IndexManifest()
	if err != nil || len(rm.Manifests) != 1 {
		tb.Fatalf("%s: layout index %+v, %v; want one image index", dir, rm, err)
	}
	if got := rm.Manifests[0].Annotations[refNameAnnotation]; got != ref {
		tb.Errorf("%s: named %q, want %q", dir, got, ref)
	}
	idx, err := root.ImageIndex(rm.Manifests[0].Digest)
	if err != nil {
		tb.Fatal(err)
	}
	return idx, rm.Manifests[0].Digest
}

// Walk calls fn with every entry of img's filesystem (its layers
// flattened), in order; fn may read the entry's content from r.
func Walk(tb testing.TB, img v1.Image, fn func(h *tar.Header, r io.Reader)) {
	tb.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			tb.Fatal(err)
		}
		fn(h, tr)
	}
}
