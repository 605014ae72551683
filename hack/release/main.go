// Command release cuts a keymount release without a container engine
// (`make release VERSION=vX.Y.Z`). From a clean work tree, for a semantic
// version whose section CHANGELOG.md carries, it writes under
// <out>/<version>/:
//
//   - images/<name>/: each image (amd64 and arm64) as an OCI image layout
//     holding one multi-platform index, named <registry>/<name>:<version>
//     (`crane push images/<name> REGISTRY/<name>:<version>` publishes it
//     under the same digest);
//   - sbom/<name>.cdx.json: a CycloneDX SBOM of each image: its binaries and
//     the Go modules their build information lists;
//   - keymount-<X.Y.Z>.tgz: the Helm chart, version and appVersion the
//     release's;
//   - manifests/*.yaml: the kustomize manifests of deploy/ rendered with the
//     images pinned by digest;
//   - RELEASE-NOTES.md: CHANGELOG.md's section of the version, the images
//     and their digests;
//   - SHA256SUMS: every file above (`sha256sum -c SHA256SUMS`).
//
// docs/releasing.md says how a team hosts a release in its own registry.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// config is what one release is cut from and into.
type config struct {
	// repo is the module's root: a git work tree.
	repo string
	// version is the release's, vX.Y.Z[-pre].
	version string
	// registry is the path the image names start with.
	registry string
	// out is the directory the release's directory is made in.
	out string
	// platforms are the os/arch pairs of the images.
	platforms []string
	// caBundle is the CA bundle the images that reach remote stores carry.
	caBundle string
	// goTool is the go command.
	goTool string
}

func main() {
	var c config
	var platforms string
	flag.StringVar(&c.repo, "repo", ".", "the repository's root (a clean git work tree)")
	flag.StringVar(&c.version, "version", "", "the release's version, vX.Y.Z (make release VERSION=vX.Y.Z)")
	flag.StringVar(&c.registry, "registry", "ghcr.io/keymount", "registry path of the image names")
	flag.StringVar(&c.out, "out", "dist", "directory the release's directory <out>/<version> is written in")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list of the images")
	flag.StringVar(&c.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates copied into the images that reach remote stores")
	flag.StringVar(&c.goTool, "go", "go", "the go command")
	flag.Parse()
	for _, p := range strings.Split(platforms, ",") {
		c.platforms = append(c.platforms, strings.TrimSpace(p))
	}
	dir, err := release(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	fmt.Printf("release: %s in %s\n", c.version, dir)
}
