package vault

import (
	"strings"

	"github.com/keymount/keymount/provider/vault/spec"
)

// volumeID names the volume a mount is for, the same on every call of its
// life. keymount's driver sends a staging directory beside the target on a
// first publish (<kubelet root>/pods/<pod UID>/volumes/kubernetes.io~csi/
// <volume>/keymount-stage-…) and the target itself (…/<volume>/mount) on
// refreshes, so a kubelet path is named by the pod UID it holds (the one
// the mount's token proved) and the volume name. Any other path (a
// SecretSync's, always /mnt/secrets-store) is named by the path, the
// namespace and the class, so that SecretSyncs of different classes or
// namespaces are different volumes.
func volumeID(target string, s *spec.Spec) string {
	if s.PodUID != "" {
		parts := strings.Split(target, "/")
		for i := 0; i+4 < len(parts); i++ {
			if parts[i] == "pods" && parts[i+1] == s.PodUID && parts[i+2] == "volumes" &&
				parts[i+3] == "kubernetes.io~csi" && parts[i+4] != "" {
				return podVolumeID(s.PodUID, parts[i+4])
			}
		}
	}
	return "path " + target + " of " + s.Namespace + "/" + s.Class
}

// podVolumeID is volumeID of a pod's volume.
func podVolumeID(podUID, volumeName string) string {
	return "pod " + podUID + "/" + volumeName
}
