package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"
)

// unpublish unmounts the target and the volume's tmpfs and removes both
// directories. It needs only the volume ID and target path, so it works
// after a driver restart, and succeeds for a volume already gone.
func (d *Driver) unpublish(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) error {
	switch {
	case req.GetVolumeId() == "":
		return invalidf("volume ID is empty")
	case req.GetTargetPath() == "":
		return invalidf("target path is empty")
	}
	release, err := d.locks.acquire(req.GetVolumeId())
	if err != nil {
		return err
	}
	defer release()
	rec, err := d.deps.Volumes.Lookup(req.GetVolumeId(), req.GetTargetPath()).LoadRecord()
	if err != nil {
		klog.ErrorS(err, "reading volume record before unpublish", "volumeID", req.GetVolumeId())
	}
	if err := d.deps.Volumes.Remove(req.GetVolumeId(), req.GetTargetPath()); err != nil {
		return err
	}
	klog.InfoS("volume unpublished", "volumeID", req.GetVolumeId(), "targetPath", req.GetTargetPath())
	if rec != nil && d.deps.Cluster != nil {
		if err := d.deps.Cluster.AfterUnpublish(ctx, rec); err != nil {
			klog.ErrorS(err, "reporting unpublished volume to the cluster", "volumeID", rec.VolumeID,
				"pod", klog.KRef(rec.PodNamespace, rec.PodName))
		}
	}
	return nil
}
