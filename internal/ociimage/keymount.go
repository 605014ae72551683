package ociimage

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Program is one of keymount's images and the cmd/ programs it carries.
type Program struct {
	// Name is the image's name (and its repository's last element).
	Name string
	// Bins are the cmd/ programs in /usr/local/bin; the first is the
	// entrypoint.
	Bins []string
	// User is "" for root: the driver mounts tmpfs volumes.
	User string
	// CA: the image carries the CA certificates, to reach remote stores.
	CA bool
}

// The images a release publishes (`make image`), which the chart and the
// kustomize manifests run: the node driver (with the CLI, for debugging in
// the pod) runs as root because it mounts; the providers need no
// privilege, nor does keymount-controller (it reaches providers over
// their sockets and the API server with its in-cluster CA).
var (
	Driver        = Program{Name: "keymount-driver", Bins: []string{"keymount-driver", "keymount"}}
	ProviderLocal = Program{Name: "keymount-provider-local", Bins: []string{"keymount-provider-local"}, User: "65532:65532"}
	ProviderAWS   = Program{Name: "keymount-provider-aws", Bins: []string{"keymount-provider-aws"}, User: "65532:65532", CA: true}
	ProviderVault = Program{Name: "keymount-provider-vault", Bins: []string{"keymount-provider-vault"}, User: "65532:65532", CA: true}
	Controller    = Program{Name: "keymount-controller", Bins: []string{"keymount-controller"}, User: "65532:65532"}
	Programs      = []Program{Driver, ProviderLocal, ProviderAWS, ProviderVault, Controller}
)

// Build packs p for goos/arch from the static binaries in binDir, labelled
// with version; ca is the CA bundle an image with CA carries.
func (p Program) Build(goos, arch, version, binDir string, ca []byte) (v1.Image, error) {
	var files []File
	for _, b := range p.Bins {
		data, err := os.ReadFile(filepath.Join(binDir, b))
		if err != nil {
			return nil, err
		}
		files = append(files, File{Path: "/usr/local/bin/" + b, Mode: 0o755, Data: data})
	}
	if p.CA {
		if len(ca) == 0 {
			return nil, fmt.Errorf("ociimage: image %s needs CA certificates", p.Name)
		}
		files = append(files, File{Path: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: ca})
	}
	img, err := Build(Spec{
		OS: goos, Architecture: arch, Files: files,
		Entrypoint: []string{"/usr/local/bin/" + p.Bins[0]},
		User:       p.User,
		Env:        []string{"PATH=/usr/local/bin"},
		Labels: map[string]string{
			"org.opencontainers.image.title":    p.Name,
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.source":   "https://github.com/keymount/keymount",
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image %s for %s: %w", p.Name, arch, err)
	}
	return img, nil
}
