package driver

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/klog/v2"
)

// NotReadyHeader is the gRPC response header in which a Probe that answers
// ready=false says why (the ProbeResponse has no field for it).
const NotReadyHeader = "keymount-not-ready"

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
// read, the cluster side's caches have synced and every provider a mounted
// volume uses answered its last health check. The socket serves before
// that: unpublish and republish of recorded volumes work while the driver
// waits for the API server.
//
// Not ready is ready=false, with the reason in the NotReadyHeader header,
// not an error: in CSI an error says the plugin is unhealthy and may need a
// restart, which fixes neither a provider that does not answer nor an API
// server that is away.
func (s *identityServer) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	err := s.d.NotReady()
	if err != nil {
		if herr := grpc.SetHeader(ctx, metadata.Pairs(NotReadyHeader, err.Error())); herr != nil {
			klog.V(4).InfoS("could not attach the reason to a not-ready Probe", "err", herr)
		}
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(err == nil)}, nil
}

// NotReady returns why Probe and /readyz report not ready, nil when ready.
func (d *Driver) NotReady() error {
	if !d.serving.Load() {
		return errors.New("the CSI socket is not served yet")
	}
	if _, err := os.Stat(d.cfg.ProviderDir); err != nil {
		return fmt.Errorf("provider directory: %w", err)
	}
	if d.deps.Cluster != nil && !d.deps.Cluster.Synced() {
		return errors.New("the API server's caches have not synced yet")
	}
	return d.health.notReady()
}
