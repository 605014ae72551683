//go:build release

package main

import (
	"bufio"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/keymount/keymount/internal/ociimage"
	"github.com/keymount/keymount/internal/ociimage/ocitest"
)

const (
	testVersion  = "v0.99.0-test.1"
	testRegistry = "registry.test/km"
)

// TestRelease cuts a release of a clean copy of this work tree (a new
// commit adds the test version's CHANGELOG section) and checks every
// artifact: the two-platform image layouts, one SBOM each, the chart, the
// manifests pinned by digest, the notes and SHA256SUMS; `crane push` of a
// layout to a registry keeps the index digest. The release builds the
// binaries for amd64 and arm64 (make test's `make image` has compiled both:
// the release links them again with its version).
func TestRelease(t *testing.T) {
	repo := cleanCopy(t)
	out := t.TempDir()
	dist, err := release(config{repo: repo, version: testVersion, registry: testRegistry, out: out,
		platforms: []string{"linux/amd64", "linux/arm64"}, caBundle: "/etc/ssl/certs/ca-certificates.crt", goTool: "go"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, repo, "git", "diff", "--exit-code") // the release leaves the tree as it was
	digests := map[string]v1.Hash{}
	for _, p := range ociimage.Programs {
		digests[p.Name] = checkLayout(t, filepath.Join(dist, "images", p.Name), p)
	}
	checkArtifacts(t, dist, digests, []string{"stdlib", "google.golang.org/grpc", "k8s.io/klog/v2", "github.com/go-logr/logr"})
	t.Run("CranePushKeepsDigest", func(t *testing.T) {
		cranePush(t, filepath.Join(dist, "images", "keymount-driver"), digests["keymount-driver"])
	})
}

// cleanCopy copies this work tree's files (tracked and untracked, not
// ignored) into a new repository, adds the test version's CHANGELOG
// section and commits.
func cleanCopy(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	files := run(t, "../..", "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	for _, f := range strings.Split(strings.TrimRight(files, "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join("../..", f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(repo, f)), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, f), data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	changelog, err := os.ReadFile(filepath.Join(repo, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := "## [Unreleased]\n\n## [0.99.0-test.1] - 2026-11-28\n\n### Added\n\n- The release test's own entry.\n"
	writeText(t, filepath.Join(repo, "CHANGELOG.md"), strings.Replace(string(changelog), "## [Unreleased]\n", section, 1))
	commitAll(t, repo)
	return repo
}

// checkLayout checks an image's OCI layout: one index named
// <registry>/<name>:<version> of a linux/amd64 and a linux/arm64 image with
// make image's user and version label. It returns the index digest.
func checkLayout(t *testing.T, dir string, p ociimage.Program) v1.Hash {
	t.Helper()
	idx, digest := ocitest.LayoutIndex(t, dir, testRegistry+"/"+p.Name+":"+testVersion)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var arches []string
	for _, m := range im.Manifests {
		arches = append(arches, m.Platform.OS+"/"+m.Platform.Architecture)
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != m.Platform.Architecture || cfg.Config.User != p.User ||
			cfg.Config.Labels["org.opencontainers.image.version"] != testVersion {
			t.Errorf("%s %s: arch %s, user %q, labels %v", p.Name, m.Platform.Architecture, cfg.Architecture, cfg.Config.User, cfg.Config.Labels)
		}
	}
	if slices.Sort(arches); !slices.Equal(arches, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("%s: platforms %v, want linux/amd64 and linux/arm64", p.Name, arches)
	}
	return digest
}

// checkArtifacts checks what the release writes beside the images.
func checkArtifacts(t *testing.T, dist string, digests map[string]v1.Hash, modules []string) {
	t.Helper()
	for _, p := range ociimage.Programs {
		checkSBOM(t, filepath.Join(dist, "sbom", p.Name+".cdx.json"), p, digests[p.Name], modules)
	}
	checkChart(t, filepath.Join(dist, "keymount-0.99.0-test.1.tgz"))
	checkManifests(t, filepath.Join(dist, "manifests"), digests)
	notes, err := os.ReadFile(filepath.Join(dist, "RELEASE-NOTES.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"The release test's own entry.", digests["keymount-driver"].String(), "crane push images/keymount-controller REGISTRY/keymount-controller:" + testVersion} {
		if !strings.Contains(string(notes), want) {
			t.Errorf("RELEASE-NOTES.md lacks %q:\n%s", want, notes)
		}
	}
	checkSums(t, dist)
}

// checkSBOM checks an image's CycloneDX SBOM: the image with its index
// digest, its binaries, and the modules (the Go toolchain is "stdlib").
func checkSBOM(t *testing.T, file string, p ociimage.Program, digest v1.Hash, modules []string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.SpecVersion != cdx.SpecVersion1_6 || bom.Metadata == nil || bom.Metadata.Component == nil || bom.Components == nil {
		t.Fatalf("%s: spec %v, metadata %+v", file, bom.SpecVersion, bom.Metadata)
	}
	c := bom.Metadata.Component
	if c.Type != cdx.ComponentTypeContainer || c.Name != p.Name || c.Version != testVersion ||
		c.Hashes == nil || (*c.Hashes)[0].Value != digest.Hex {
		t.Errorf("%s: image component %+v, want %s %s", file, c, p.Name, digest)
	}
	found := map[string]string{}
	for _, comp := range *bom.Components {
		found[comp.Name] = comp.PackageURL
	}
	for _, b := range p.Bins {
		if !strings.HasPrefix(found[b], "pkg:golang/github.com/keymount/keymount@"+testVersion+"#") {
			t.Errorf("%s: binary %s: purl %q", file, b, found[b])
		}
	}
	for _, m := range modules {
		want := "pkg:golang/" + m + "@v"
		if m == "stdlib" {
			want = "pkg:golang/stdlib@" + runtime.Version()
		}
		if !strings.HasPrefix(found[m], want) {
			t.Errorf("%s: module %s: purl %q, want %s...", file, m, found[m], want)
		}
	}
}

// checkChart checks the packaged chart's version, appVersion and that no
// test file was packaged.
func checkChart(t *testing.T, file string) {
	t.Helper()
	ch, err := loader.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Name != "keymount" || ch.Metadata.Version != "0.99.0-test.1" || ch.Metadata.AppVersion != testVersion {
		t.Errorf("chart %s %s appVersion %s", ch.Metadata.Name, ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	for _, f := range append(ch.Raw, ch.Files...) {
		if strings.HasSuffix(f.Name, "_test.go") || strings.HasPrefix(f.Name, "testdata/") {
			t.Errorf("the packaged chart holds %s", f.Name)
		}
	}
	if len(ch.Templates) == 0 {
		t.Error("the packaged chart has no templates")
	}
}

// checkManifests checks that every keymount image of the rendered
// manifests is the release's, pinned by digest, that each file names the
// images it deploys, and that every image of the release is deployed by
// one of them.
func checkManifests(t *testing.T, dir string, digests map[string]v1.Hash) {
	t.Helper()
	want := map[string][]string{
		"keymount.yaml":                 {"keymount-driver"},
		"keymount-with-controller.yaml": {"keymount-driver", "keymount-controller", "keymount-provider-local"},
		"keymount-provider-aws.yaml":    {"keymount-provider-aws"},
		"keymount-provider-vault.yaml":  {"keymount-provider-vault"},
	}
	deployed := map[string]bool{}
	for _, names := range want {
		for _, n := range names {
			deployed[n] = true
		}
	}
	for _, p := range ociimage.Programs {
		if !deployed[p.Name] {
			t.Errorf("no rendered manifest deploys the image %s: add a manifest set for it (hack/release manifestSets)", p.Name)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := want[e.Name()]; !ok {
			t.Errorf("manifests/%s is not checked: add it to checkManifests", e.Name())
		}
	}
	for file, names := range want {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if ref := testRegistry + "/" + n + "@" + digests[n].String(); !strings.Contains(string(data), "image: "+ref+"\n") {
				t.Errorf("%s does not run %s", file, ref)
			}
		}
		if strings.Contains(string(data), "ghcr.io/keymount") {
			t.Errorf("%s still names ghcr.io/keymount", file)
		}
	}
}

// checkSums checks that SHA256SUMS lists every other file of dist with its
// digest, as `sha256sum -c` does.
func checkSums(t *testing.T, dist string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		got, err := fileSHA256(filepath.Join(dist, file))
		if err != nil || got != sum {
			t.Errorf("%s: sha256 %s, %v; SHA256SUMS says %s", file, got, err, sum)
		}
		listed[file] = true
	}
	err = filepath.WalkDir(dist, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dist, p)
		if rel != "SHA256SUMS" && !listed[filepath.ToSlash(rel)] {
			t.Errorf("SHA256SUMS does not list %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !listed["RELEASE-NOTES.md"] || !listed["keymount-0.99.0-test.1.tgz"] {
		t.Errorf("SHA256SUMS misses artifacts: %v", listed)
	}
}

// cranePush pushes the layout with the crane CLI (go.mod's tool) as
// docs/releasing.md says, to a registry on 127.0.0.1, and checks the
// registry serves the index under the layout's digest with both platforms.
func cranePush(t *testing.T, dir string, digest v1.Hash) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	target := host + "/mirror/keymount/keymount-driver:" + testVersion
	cmd := exec.Command("go", "tool", "crane", "push", dir, target)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("crane push: %v\n%s", err, out)
	}
	ref, err := name.ParseReference(target)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got != digest {
		t.Errorf("the registry serves %s, the layout's index is %s", got, digest)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 2 {
		t.Errorf("pushed index: %+v, %v", m, err)
	}
}
