package driver

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
)

type nodeServer struct {
	csi.UnimplementedNodeServer
	d *Driver
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
	if err := s.d.publish(ctx, req); err != nil {
		return nil, toStatus(err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (s *nodeServer) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := s.d.unpublish(ctx, req); err != nil {
		return nil, toStatus(err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
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
