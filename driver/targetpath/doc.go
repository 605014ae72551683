// Package targetpath validates and opens the target paths kubelet gives a
// CSI driver, so that the driver only ever acts on directories it can vouch
// for.
//
// A target path must have kubelet's shape for a CSI volume of a pod:
//
//	<kubelet root>/pods/<pod UID>/volumes/kubernetes.io~csi/<volume name>/mount
//
// with the pod UID of the request's volume context. Below the kubelet root no
// path element is followed if it is a symlink: Open resolves the path with
// openat2(2) and RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH and returns a file
// descriptor, and callers mount and unmount through /proc/self/fd/<fd>, so a
// pod that swaps a directory for a symlink between the check and the use
// cannot redirect the mount.
package targetpath
