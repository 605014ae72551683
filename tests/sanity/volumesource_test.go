package sanity_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/tests/harness"
)

// inlineVolumes stands in for what kubelet does for an inline (ephemeral)
// CSI volume, which keymount's volumes always are: there is no controller,
// kubelet derives the volume ID from the pod and the volume name and builds
// the volume context itself. csi-sanity asks a Controller service for that
// (CreateVolume) in the Node specs that publish a volume, so this serves
// CreateVolume and DeleteVolume on a socket of its own and answers with the
// volume ID and volume context kubelet would send. Its Identity service
// forwards to the driver, so the Identity specs that csi-sanity runs against
// the controller endpoint test the driver too. The Controller specs
// themselves are skipped: they would test this stand-in, not keymount.
type inlineVolumes struct {
	csi.UnimplementedControllerServer
	csi.UnimplementedIdentityServer

	h      *harness.Harness
	target string // the kubelet target path the driver is asked to publish to
}

// startInlineVolumes serves an inlineVolumes on <h.Dir>/volumes.sock and
// returns its address.
func startInlineVolumes(t *testing.T, h *harness.Harness, target string) string {
	t.Helper()
	sock := filepath.Join(h.Dir, "volumes.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen for the inline volume source: %v", err)
	}
	srv := grpc.NewServer()
	iv := &inlineVolumes{h: h, target: target}
	csi.RegisterControllerServer(srv, iv)
	csi.RegisterIdentityServer(srv, iv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("inline volume source: %v", err)
		}
	})
	return "unix://" + sock
}

func (v *inlineVolumes) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{
			Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		}},
	}}}, nil
}

// CreateVolume returns the inline volume named req.Name of the pod owning
// the target path: kubelet's volume ID and kubelet's volume context for the
// class named in the volume parameters. The context's pod UID is the one in
// the target path, which the driver checks.
func (v *inlineVolumes) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume name is empty")
	}
	class := req.GetParameters()[driver.AttrClass]
	if class == "" {
		return nil, status.Errorf(codes.InvalidArgument, "parameter %s is missing", driver.AttrClass)
	}
	pod := v.h.PodOf(v.target)
	id := harness.VolumeID(pod.UID, req.GetName())
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:      id,
		VolumeContext: v.h.PublishRequest(id, v.target, class, true).GetVolumeContext(),
	}}, nil
}

// DeleteVolume has nothing to do: an inline volume ends with its unpublish.
func (v *inlineVolumes) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

func (v *inlineVolumes) GetPluginInfo(ctx context.Context, req *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return v.h.Identity.GetPluginInfo(ctx, req)
}

func (v *inlineVolumes) GetPluginCapabilities(ctx context.Context, req *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return v.h.Identity.GetPluginCapabilities(ctx, req)
}

func (v *inlineVolumes) Probe(ctx context.Context, req *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return v.h.Identity.Probe(ctx, req)
}
