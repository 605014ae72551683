// Package volume manages the tmpfs behind each secrets volume and the record
// of what was mounted into it.
//
// Every volume gets a private tmpfs at <state dir>/volumes/<name>, mounted
// with a size cap and mode 0700. Inside it:
//
//	data/         the files the pod sees (written by package atomicwrite)
//	record.json   what the driver mounted: pod, class, provider, object versions
//
// data/ is bind-mounted onto the CSI target path, read-only when kubelet asks
// for a read-only volume. The driver therefore writes new generations while
// the pod's view stays read-only, and the record is never visible to the pod.
// The state directory must be a host path with bidirectional mount
// propagation, so that mounts and records survive a driver restart: unpublish
// and republish work from the volume ID and target path alone.
package volume
