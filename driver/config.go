package driver

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// DefaultDriverName is the CSI driver name existing pod volumes use.
const DefaultDriverName = "secrets-store.csi.k8s.io"

// Config is everything the node plugin is told by its flags.
type Config struct {
	// DriverName is reported by GetPluginInfo; pods name it in their volumes.
	DriverName string
	// Version is reported by GetPluginInfo.
	Version string
	// NodeID is reported by NodeGetInfo.
	NodeID string
	// Endpoint is the CSI socket, unix:///path/csi.sock or a plain path.
	Endpoint string
	// ProviderDir is the main provider socket directory; Probe is not ready
	// until it is readable.
	ProviderDir string
}

func (c *Config) validate() error {
	if c.DriverName == "" {
		c.DriverName = DefaultDriverName
	}
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node ID is empty: set --node-id (usually the node name)"))
	}
	if c.ProviderDir == "" || !filepath.IsAbs(c.ProviderDir) {
		errs = append(errs, fmt.Errorf("provider dir %q must be an absolute path: set --provider-dir", c.ProviderDir))
	}
	if _, err := socketPath(c.Endpoint); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// socketPath returns the filesystem path of a unix endpoint.
func socketPath(endpoint string) (string, error) {
	p := strings.TrimPrefix(endpoint, "unix://")
	if p == "" || !filepath.IsAbs(p) {
		return "", fmt.Errorf("endpoint %q must be unix:///absolute/path.sock: set --endpoint", endpoint)
	}
	return p, nil
}
