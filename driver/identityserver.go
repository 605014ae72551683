package driver

import (
	"context"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type identityServer struct {
	csi.UnimplementedIdentityServer
	d *Driver
}

var _ csi.IdentityServer = (*identityServer)(nil)

func (s *identityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: s.d.cfg.DriverName, VendorVersion: s.d.cfg.Version}, nil
}

// GetPluginCapabilities reports no controller service: keymount is a
// node-only driver of ephemeral volumes.
func (s *identityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

// Probe is ready once the server serves, the provider directory can be
// read and the cluster side's caches have synced. The socket serves before
// that: unpublish and republish of recorded volumes work while the driver
// waits for the API server.
func (s *identityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(s.d.Ready())}, nil
}

// Ready reports what Probe reports.
func (d *Driver) Ready() bool {
	if !d.serving.Load() {
		return false
	}
	if _, err := os.Stat(d.cfg.ProviderDir); err != nil {
		return false
	}
	return d.deps.Cluster == nil || d.deps.Cluster.Synced()
}
