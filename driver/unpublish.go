package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/driver/targetpath"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/killpoint"
	"github.com/keymount/keymount/provider/keymountv1"
)

// unpublish unmounts the target and removes the volume's tmpfs, but only
// what the driver itself published for this volume ID at this target: the
// volume's record names the target, or (without a readable record) the
// target shows the volume's tmpfs. Any other path is left untouched and the
// call succeeds, saying so in the log. It needs only the volume ID and the
// target path, so it works after a driver restart, and succeeds for a
// volume already gone.
func (d *Driver) unpublish(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) error {
	switch {
	case req.GetVolumeId() == "":
		return invalidf("volume ID is empty")
	case req.GetTargetPath() == "":
		return invalidf("target path is empty")
	}
	release, err := d.locks.acquire(req.GetVolumeId(), req.GetTargetPath())
	if err != nil {
		return err
	}
	rec, err := func() (*volume.Record, error) {
		defer release()
		return d.unpublishLocked(req.GetVolumeId(), req.GetTargetPath())
	}()
	if err == nil {
		d.held.drop(req.GetVolumeId())
		d.reporter.unpublished(rec)
		d.tellProvider(ctx, rec)
	}
	return err
}

// tellProvider tells the provider of an unmounted volume, through
// keymount's provider extension, that the volume is gone, so that it can
// let go of what it holds for it now (the Vault provider revokes the
// volume's leases) rather than when it notices the volume idle. It never
// fails the unpublish: a provider without the extension (every upstream
// provider) answers Unimplemented, and a failure or a provider that does
// not answer within Config.ProviderUnpublishTimeout is logged at a low
// verbosity and counted.
func (d *Driver) tellProvider(ctx context.Context, rec *volume.Record) {
	if rec == nil || rec.Provider == "" {
		return
	}
	t, err := targetpath.Parse(d.cfg.KubeletRootDir, rec.TargetPath, rec.PodUID)
	if err != nil {
		return
	}
	// Kubelet giving up on the call must not cut this one short.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.ProviderUnpublishTimeout)
	defer cancel()
	err = d.deps.Providers.Unpublish(ctx, rec.Provider, &keymountv1.UnpublishRequest{
		PodUid: t.PodUID, VolumeName: t.Volume, TargetPath: t.Path,
	})
	code := codes.OK
	if err != nil {
		code = codeOf(err)
	}
	d.deps.Metrics.ProviderUnpublish(rec.Provider, code)
	switch code {
	case codes.OK:
		klog.V(4).InfoS("provider told of the unpublish", "provider", rec.Provider, "volumeID", rec.VolumeID)
	case codes.Unimplemented:
		klog.V(5).InfoS("the provider does not serve keymount's unpublish extension", "provider", rec.Provider, "volumeID", rec.VolumeID)
	default:
		klog.V(2).InfoS("telling the provider of the unpublish failed; the volume is unpublished, the provider lets go of it when it notices it idle",
			"provider", rec.Provider, "volumeID", rec.VolumeID, "code", code, "err", err)
	}
}

func (d *Driver) unpublishLocked(volumeID, targetPath string) (*volume.Record, error) {
	v := d.deps.Volumes.Lookup(volumeID)
	rec, recErr := v.LoadRecord()
	if recErr != nil {
		klog.ErrorS(recErr, "volume record unreadable; unpublishing from what is mounted", "volumeID", volumeID)
		rec = nil
	}
	if rec != nil && rec.TargetPath != targetPath {
		klog.InfoS("not unpublishing: the volume is published at another target; nothing touched",
			"volumeID", volumeID, "targetPath", targetPath, "publishedAt", rec.TargetPath)
		return nil, nil
	}
	killpoint.Reached("unpublish.locked")
	t, err := targetpath.Parse(d.cfg.KubeletRootDir, targetPath, podUIDOf(rec, d.cfg.KubeletRootDir, targetPath))
	if err != nil {
		klog.InfoS("not unpublishing: the target path is not a kubelet target path; nothing touched",
			"volumeID", volumeID, "targetPath", targetPath, "err", err)
		return nil, nil
	}
	// A provider stage left beside the target by a driver killed during
	// a call: kubelet cannot remove the volume directory while it is there.
	if _, err := d.deps.Volumes.RemoveStages(t); err != nil {
		return nil, err
	}
	if rec != nil && rec.Adopted {
		return d.unpublishAdopted(v, t, rec)
	}
	unbound, err := d.deps.Volumes.Unbind(v, t)
	if err != nil {
		return nil, err
	}
	if !unbound && rec == nil {
		// Without a record and without the target showing the volume,
		// nothing says the target is ours: leave it. The volume's tmpfs
		// goes when no target shows it (a first publish killed before it
		// bound the target); one a target shows stays.
		removed, err := d.deps.Volumes.RemoveUnshown(v)
		if err != nil {
			return nil, err
		}
		klog.InfoS("the target does not show a volume of this driver; target not touched",
			"volumeID", volumeID, "targetPath", targetPath, "removedTmpfs", removed)
		return nil, nil
	}
	if err := d.deps.Volumes.RemoveTmpfs(v); err != nil {
		return nil, err
	}
	killpoint.Reached("unpublish.done")
	klog.InfoS("volume unpublished", "volumeID", volumeID, "targetPath", targetPath)
	return rec, nil
}

// podUIDOf is the pod UID the target path must carry: the recorded one, or
// the one in the path itself when there is no record (the shape is still
// checked).
func podUIDOf(rec *volume.Record, root, target string) string {
	if rec != nil && rec.PodUID != "" {
		return rec.PodUID
	}
	return targetpath.PodUIDOf(root, target)
}

// unpublishAdopted unmounts a volume adopted from the upstream driver: the
// tmpfs at the target, when it is still the recorded one, then its record.
func (d *Driver) unpublishAdopted(v *volume.Volume, t *targetpath.Target, rec *volume.Record) (*volume.Record, error) {
	unmounted, err := d.deps.Volumes.UnmountAdopted(t, rec.AdoptedDevice)
	if err != nil {
		return nil, err
	}
	if !unmounted {
		klog.InfoS("the target no longer shows the adopted volume; removing its record only",
			"volumeID", v.ID, "targetPath", t.Path)
	}
	if err := d.deps.Volumes.RemoveAdopted(v); err != nil {
		return nil, err
	}
	klog.InfoS("volume unpublished", "volumeID", v.ID, "targetPath", t.Path, "adopted", true)
	return rec, nil
}
