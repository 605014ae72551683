//go:build release

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/keymount/keymount/internal/ociimage"
)

// TestArtifacts writes what a release writes beside the images, for
// images of made-up digests whose binaries are this test binary (its build
// information is a real Go binary's), and checks every file: the fast
// half of TestRelease.
func TestArtifacts(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	binDirs := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		binDirs[arch] = filepath.Join(tmp, "bin", arch)
		if err := os.MkdirAll(binDirs[arch], 0o750); err != nil {
			t.Fatal(err)
		}
		for _, p := range ociimage.Programs {
			for _, b := range p.Bins {
				if err := os.Symlink(exe, filepath.Join(binDirs[arch], b)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	hash := func(s string) v1.Hash {
		sum := sha256.Sum256([]byte(s))
		return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
	}
	var images []image
	digests := map[string]v1.Hash{}
	for _, p := range ociimage.Programs {
		digests[p.Name] = hash(p.Name)
		images = append(images, image{name: p.Name, ref: testRegistry + "/" + p.Name + ":" + testVersion, digest: digests[p.Name],
			platforms: map[string]v1.Hash{"amd64": hash(p.Name + "amd64"), "arm64": hash(p.Name + "arm64")}})
	}
	c := config{repo: "../..", version: testVersion, registry: testRegistry, platforms: []string{"linux/amd64", "linux/arm64"}}
	dist := filepath.Join(tmp, "dist")
	if err := writeArtifacts(c, dist, images, binDirs, "### Added\n\n- The release test's own entry.", "2026-11-28T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	checkArtifacts(t, dist, digests, []string{"stdlib", "sigs.k8s.io/kustomize/api", "github.com/CycloneDX/cyclonedx-go", "helm.sh/helm/v3"})
}
