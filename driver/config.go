package driver

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/keymount/keymount/driver/targetpath"
)

// DefaultDriverName is the CSI driver name existing pod volumes use.
const DefaultDriverName = "secrets-store.csi.k8s.io"

// Defaults of the provider call limits and of the cluster side.
const (
	// DefaultProviderConcurrency is how many provider calls run at once.
	DefaultProviderConcurrency = 16
	// DefaultProviderInflightBytes bounds the provider responses held at
	// once: each call reserves the largest response it may receive, so with
	// DefaultProviderMaxRecvBytes at most 8 calls run at once. A response
	// costs about three times its size while it is decoded (gRPC's frames,
	// their contiguous copy, the decoded message): 32 MiB keeps the
	// driver's peak RSS near 130 MiB under 100 concurrent publishes of
	// 3.5 MiB (BenchmarkPeakRSS, with the DaemonSet's GOMEMLIMIT).
	DefaultProviderInflightBytes = 32 << 20
	// DefaultProviderMaxRecvBytes is the largest provider response accepted
	// (gRPC's default receive limit, as upstream).
	DefaultProviderMaxRecvBytes = 4 << 20
	// DefaultReportTimeout is the deadline of one write of the cluster side
	// (pod status, Secret sync).
	DefaultReportTimeout = 10 * time.Second
	// DefaultMinRefreshInterval is the shortest time between two
	// triggered refreshes of one volume.
	DefaultMinRefreshInterval = 10 * time.Second
	// DefaultProviderUnpublishTimeout is the deadline of telling a
	// provider that a volume is unmounted: kubelet waits for it.
	DefaultProviderUnpublishTimeout = 5 * time.Second
)

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
	// KubeletRootDir is kubelet's --root-dir: every target path must lie
	// below it in kubelet's layout. targetpath.DefaultKubeletRoot when empty.
	KubeletRootDir string
	// ProviderConcurrency bounds the provider calls (and the writes of
	// their responses) running at once; DefaultProviderConcurrency when 0.
	ProviderConcurrency int
	// ProviderInflightBytes bounds the bytes of provider responses held at
	// once; each call reserves ProviderMaxRecvBytes of it.
	// DefaultProviderInflightBytes when 0.
	ProviderInflightBytes int64
	// ProviderMaxRecvBytes is the largest provider response the provider
	// client accepts; DefaultProviderMaxRecvBytes when 0.
	ProviderMaxRecvBytes int64
	// ReportTimeout is the deadline of one pod status or Secret sync write;
	// DefaultReportTimeout when 0.
	ReportTimeout time.Duration
	// ProviderHealthInterval is how often the providers of mounted volumes
	// are asked for their Version (Probe and /readyz are not ready while
	// one does not answer); DefaultProviderHealthInterval when 0.
	ProviderHealthInterval time.Duration
	// ProviderHealthCheckAll also checks, and logs every failed check of,
	// the providers called since start (upstream's --provider-health-check).
	ProviderHealthCheckAll bool
	// ReleaseMemoryAfter is how long the driver is idle (no CSI call)
	// after calls before it returns freed memory to the OS; negative turns
	// it off, 0 means DefaultReleaseMemoryAfter.
	ReleaseMemoryAfter time.Duration
	// MinRefreshInterval is the shortest time between the starts of two
	// triggered refreshes of one volume: the triggers of a burst are
	// coalesced into one refresh, a later one waits for the rest of the
	// interval. DefaultMinRefreshInterval when 0.
	MinRefreshInterval time.Duration
	// ProviderUnpublishTimeout is the deadline of the Unpublish call of
	// keymount's provider extension that NodeUnpublishVolume makes after
	// the unmount; DefaultProviderUnpublishTimeout when 0.
	ProviderUnpublishTimeout time.Duration
}

func (c *Config) validate() error {
	c.defaults()
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node ID is empty: set --node-id (usually the node name)"))
	}
	if c.ProviderDir == "" || !filepath.IsAbs(c.ProviderDir) {
		errs = append(errs, fmt.Errorf("provider dir %q must be an absolute path: set --provider-dir", c.ProviderDir))
	}
	if !filepath.IsAbs(c.KubeletRootDir) || filepath.Clean(c.KubeletRootDir) != c.KubeletRootDir {
		errs = append(errs, fmt.Errorf("kubelet root dir %q must be an absolute, clean path: set --kubelet-root-dir", c.KubeletRootDir))
	}
	if c.MinRefreshInterval < 0 {
		errs = append(errs, fmt.Errorf("minimum refresh interval %s must not be negative: set --min-refresh-interval to a duration such as 10s", c.MinRefreshInterval))
	}
	if c.ProviderConcurrency < 1 {
		errs = append(errs, fmt.Errorf("provider concurrency %d must be at least 1: set --provider-concurrency", c.ProviderConcurrency))
	}
	if c.ProviderInflightBytes < c.ProviderMaxRecvBytes {
		errs = append(errs, fmt.Errorf("provider in-flight bytes %d must be at least the receive limit %d: raise --provider-inflight-bytes",
			c.ProviderInflightBytes, c.ProviderMaxRecvBytes))
	}
	if c.ProviderHealthInterval < 0 {
		errs = append(errs, fmt.Errorf("provider health check interval %s must be positive: set --provider-health-check-interval", c.ProviderHealthInterval))
	}
	if _, err := socketPath(c.Endpoint); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c *Config) defaults() {
	if c.DriverName == "" {
		c.DriverName = DefaultDriverName
	}
	if c.KubeletRootDir == "" {
		c.KubeletRootDir = targetpath.DefaultKubeletRoot
	}
	if c.ProviderConcurrency == 0 {
		c.ProviderConcurrency = DefaultProviderConcurrency
	}
	if c.ProviderMaxRecvBytes == 0 {
		c.ProviderMaxRecvBytes = DefaultProviderMaxRecvBytes
	}
	if c.ProviderInflightBytes == 0 {
		c.ProviderInflightBytes = max(DefaultProviderInflightBytes, c.ProviderMaxRecvBytes)
	}
	if c.ProviderHealthInterval == 0 {
		c.ProviderHealthInterval = DefaultProviderHealthInterval
	}
	if c.ProviderUnpublishTimeout <= 0 {
		c.ProviderUnpublishTimeout = DefaultProviderUnpublishTimeout
	}
	if c.ReportTimeout <= 0 {
		c.ReportTimeout = DefaultReportTimeout
	}
	if c.ReleaseMemoryAfter == 0 {
		c.ReleaseMemoryAfter = DefaultReleaseMemoryAfter
	}
	if c.MinRefreshInterval == 0 {
		c.MinRefreshInterval = DefaultMinRefreshInterval
	}
}

// socketPath returns the filesystem path of a unix endpoint.
func socketPath(endpoint string) (string, error) {
	p := strings.TrimPrefix(endpoint, "unix://")
	if p == "" || !filepath.IsAbs(p) {
		return "", fmt.Errorf("endpoint %q must be unix:///absolute/path.sock: set --endpoint", endpoint)
	}
	return p, nil
}
