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

// Probe is ready once the server serves and the provider directory can be
// read, so the liveness probe notices a node without its providers mounted.
func (s *identityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	ready := s.d.serving.Load()
	if ready {
		if _, err := os.ReadDir(s.d.cfg.ProviderDir); err != nil {
			ready = false
		}
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(ready)}, nil
}
