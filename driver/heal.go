package driver

import (
	"fmt"

	"k8s.io/klog/v2"

	"github.com/keymount/keymount/driver/volume"
)

// loadRecord returns the record of a published volume, nil for a volume that
// is new. A missing, truncated or corrupt record never wedges a volume: when
// its tmpfs is mounted and the target shows it, the record is rebuilt from the
// request (the refresh that follows fills in objects and provider); a tmpfs
// that no target shows is the leftover of a first publish that did not
// finish, and is removed so the volume starts afresh.
func (d *Driver) loadRecord(v *volume.Volume, p *publishRequest) (*volume.Record, error) {
	rec, err := d.deps.Volumes.LoadRecord(v)
	if err == nil && rec != nil {
		return rec, nil
	}
	mounted, mErr := d.deps.Volumes.Mounted(v)
	if mErr != nil {
		return nil, mErr
	}
	if !mounted {
		return nil, nil
	}
	bound, bErr := d.deps.Volumes.BoundTo(v, p.target)
	if bErr != nil {
		return nil, bErr
	}
	if !bound {
		klog.InfoS("removing a volume tmpfs no target shows before publishing afresh", "volumeID", p.volumeID, "err", err)
		return nil, d.deps.Volumes.RemoveTmpfs(v)
	}
	klog.InfoS("rebuilding the volume record from what is mounted", "volumeID", p.volumeID,
		"targetPath", p.targetPath, "err", err)
	return &volume.Record{
		VolumeID: p.volumeID, TargetPath: p.targetPath, ReadOnly: p.readOnly,
		PodName: p.podName, PodNamespace: p.podNamespace, PodUID: p.podUID, ServiceAccount: p.serviceAccount,
		Class: p.className, Generation: 1,
	}, nil
}

// sameVolume refuses a republish that would change what the volume is: its
// target, class or read-only flag. CSI says AlreadyExists; the mounted
// volume is left as it is.
//
// A new volume_mount_group is not refused: the refresh writes the files in
// the new group as a change like any other (atomicwrite.WriteGroup counts
// a generation in another group as different). Kubelet sends the same
// fsGroup for a pod's volume every time (the pod's securityContext cannot
// change), except across a change of the driver: after an upgrade to a
// driver with VOLUME_MOUNT_GROUP (or a CSIDriver switched to fsGroupPolicy
// File) the republishes of running pods bring a group their volumes were
// not written with, and a volume adopted from the upstream driver has none
// recorded. Refusing those would fail the republish, and kubelet removes
// the mount directory of a volume whose republish fails, taking the files
// from a running pod; rewriting gives them the group the pod asked for.
func sameVolume(prev *volume.Record, p *publishRequest) error {
	switch {
	case prev == nil:
		return nil
	case prev.TargetPath != p.targetPath:
		return fmt.Errorf("%w: volume %s is published at %s, not at %s", errConflict, p.volumeID, prev.TargetPath, p.targetPath)
	case prev.Class != p.className:
		return fmt.Errorf("%w: volume %s was mounted from SecretProviderClass %q, not %q: delete and recreate the pod to change its class",
			errConflict, p.volumeID, prev.Class, p.className)
	case prev.ReadOnly != p.readOnly:
		return fmt.Errorf("%w: volume %s was mounted with readOnly=%t, not %t", errConflict, p.volumeID, prev.ReadOnly, p.readOnly)
	}
	return nil
}
