package driver

import (
	"context"
	"fmt"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/status"
)

type nodeServer struct {
	csi.UnimplementedNodeServer
	d *Driver
	// providers remembers the provider of each published volume (volume
	// ID to name) for the publish metrics: a republish that is not due
	// calls no provider and reads no class.
	providers sync.Map
}

var _ csi.NodeServer = (*nodeServer)(nil)

func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: s.d.cfg.NodeID}, nil
}

// NodeGetCapabilities advertises volume stats and VOLUME_MOUNT_GROUP. With
// VOLUME_MOUNT_GROUP kubelet leaves the pod's fsGroup to the driver and sends
// it in every NodePublishVolume (deploy/csidriver.yaml sets fsGroupPolicy:
// File); without it kubelet applies no fsGroup at all to a read-only volume,
// which every secrets volume is.
func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{
		rpcCapability(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS),
		rpcCapability(csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP),
	}}, nil
}

func rpcCapability(t csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
	return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}}
}

func (s *nodeServer) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	start := s.d.deps.Clock.Now()
	ctx, slot := withProviderSlot(ctx)
	perr := s.d.publish(ctx, req)
	err := toStatus(perr)
	provider, took := s.provider(req.GetVolumeId(), slot, err), s.d.deps.Clock.Since(start)
	if err != nil {
		s.d.deps.Metrics.NodePublishFailed(provider, publishErrorType(perr), status.Code(err), took)
		return nil, err
	}
	s.d.deps.Metrics.NodePublish(provider, took)
	return &csi.NodePublishVolumeResponse{}, nil
}

func (s *nodeServer) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	start := s.d.deps.Clock.Now()
	err := toStatus(s.d.unpublish(ctx, req))
	if err == nil {
		s.providers.Delete(req.GetVolumeId())
	}
	s.d.deps.Metrics.NodeUnpublish(err, s.d.deps.Clock.Since(start))
	if err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// provider names the provider of a publish for its metrics: the one it
// called (MeteredProviders tells), else the one the volume had, read once
// from its record after a driver restart; "" when not known (a request
// refused before any provider was called).
func (s *nodeServer) provider(volumeID string, slot *providerSlot, err error) string {
	if _, off := s.d.deps.Metrics.(noMetrics); off {
		return ""
	}
	if p := slot.called(); p != "" {
		if err == nil {
			s.providers.Store(volumeID, p)
		}
		return p
	}
	if v, ok := s.providers.Load(volumeID); ok {
		p, _ := v.(string)
		return p
	}
	if err != nil || volumeID == "" {
		return ""
	}
	rec, rerr := s.d.deps.Volumes.Lookup(volumeID).LoadRecord()
	if rerr != nil || rec == nil || rec.Provider == "" {
		return ""
	}
	s.providers.Store(volumeID, rec.Provider)
	return rec.Provider
}

// NodeGetVolumeStats reports the tmpfs usage of a published volume.
func (s *nodeServer) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	resp, err := s.d.volumeStats(req.GetVolumeId(), req.GetVolumePath())
	return resp, toStatus(err)
}

func (d *Driver) volumeStats(volumeID, path string) (*csi.NodeGetVolumeStatsResponse, error) {
	if volumeID == "" {
		return nil, invalidf("volume ID is empty")
	}
	if path == "" {
		return nil, invalidf("volume path is empty")
	}
	v, err := d.deps.Volumes.Get(volumeID, path)
	if err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(v.Dir, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", v.Dir, err)
	}
	bsize := st.Bsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{
			Unit:      csi.VolumeUsage_BYTES,
			Total:     int64(st.Blocks) * bsize,          //nolint:gosec // G115: block counts of a tmpfs fit in int64.
			Available: int64(st.Bavail) * bsize,          //nolint:gosec // G115: as above.
			Used:      int64(st.Blocks-st.Bfree) * bsize, //nolint:gosec // G115: as above.
		},
		{
			Unit:      csi.VolumeUsage_INODES,
			Total:     int64(st.Files),            //nolint:gosec // G115: inode counts fit in int64.
			Available: int64(st.Ffree),            //nolint:gosec // G115: as above.
			Used:      int64(st.Files - st.Ffree), //nolint:gosec // G115: as above.
		},
	}}, nil
}
