package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/volume"
)

// csiPluginDir is kubelet's directory name for CSI volumes of a pod.
const csiPluginDir = "kubernetes.io~csi"

// Pod is the pod a volume is published for, as kubelet describes it in the
// volume context.
type Pod struct {
	Name           string
	Namespace      string
	UID            string
	ServiceAccount string
}

// Volume is one publish: which class, where. A volume is always read-only,
// as every secrets volume of a pod.
type Volume struct {
	// Class is the SecretProviderClass the pod volume names.
	Class string
	// Target is the user's absolute, clean target path.
	Target string
}

// VolumeID derives the CLI's volume ID from the absolute target path, so
// that unpublish finds the volume from the path alone. It is also the
// volume's name in the private kubelet layout.
func VolumeID(target string) string {
	sum := sha256.Sum256([]byte(target))
	return "cli-" + hex.EncodeToString(sum[:])[:32]
}

// PodUID derives the pod UID of the volume at target when none is given:
// a UUID (version 5 shaped) of the target path, so that mounting the same
// target again refreshes the same volume.
func PodUID(target string) string {
	sum := sha256.Sum256([]byte("keymount-cli-pod\x00" + target))
	var b [16]byte
	copy(b[:], sum[:])
	return uuid(b, 0x50)
}

func uuid(b [16]byte, version byte) string {
	b[6] = b[6]&0x0f | version
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// KubeletTarget is the target path kubelet would give the volume at the
// user's target for a pod with podUID, in the session's private kubelet
// layout: <state dir>/kubelet/pods/<pod UID>/volumes/kubernetes.io~csi/<volume ID>/mount.
func (s *Session) KubeletTarget(podUID, target string) string {
	return filepath.Join(s.kubeletRoot, "pods", podUID, "volumes", csiPluginDir, VolumeID(target), "mount")
}

// publishRequest is the NodePublishVolume call kubelet makes for an inline
// secrets volume of pod at kubeletTarget: read-only, a mount capability, the
// pod volume's attributes and the pod information the CSIDriver's
// podInfoOnMount asks for.
func publishRequest(pod Pod, v Volume, kubeletTarget string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId:   VolumeID(v.Target),
		TargetPath: kubeletTarget,
		Readonly:   true,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		VolumeContext: map[string]string{
			driver.AttrClass:          v.Class,
			driver.AttrPodName:        pod.Name,
			driver.AttrPodNamespace:   pod.Namespace,
			driver.AttrPodUID:         pod.UID,
			driver.AttrServiceAccount: pod.ServiceAccount,
			driver.AttrEphemeral:      "true",
		},
	}
}

// Publish calls NodePublishVolume as kubelet does, at the volume's target
// in the private kubelet layout; Bind then shows it at the user's target.
// The error is the driver's gRPC status error.
func (s *Session) Publish(ctx context.Context, pod Pod, v Volume) error {
	if err := os.MkdirAll(s.kubeletRoot, 0o700); err != nil {
		return fmt.Errorf("create private kubelet root: %w", err)
	}
	kt := s.KubeletTarget(pod.UID, v.Target)
	_, err := s.node.NodePublishVolume(ctx, publishRequest(pod, v, kt))
	if err != nil {
		// As kubelet does after a failed first mount: its (empty)
		// directories go; the driver removed the target's own.
		s.removeKubeletDirs(kt)
	}
	return err
}

// Unpublish calls NodeUnpublishVolume for the volume at the user's target,
// at its target in the private kubelet layout, then removes the directories
// kubelet would remove. Call Unbind first. The error of the call is the
// driver's gRPC status error.
func (s *Session) Unpublish(ctx context.Context, target string) error {
	kt, err := s.kubeletTargetOf(target)
	if err != nil {
		return err
	}
	if _, err := s.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{
		VolumeId:   VolumeID(target),
		TargetPath: kt,
	}); err != nil {
		return err
	}
	s.removeKubeletDirs(kt)
	return nil
}

// kubeletTargetOf finds the private kubelet target of the volume at the
// user's target: the one its record names, else the one of any pod on
// disk, else the one of the pod UID derived from target.
func (s *Session) kubeletTargetOf(target string) (string, error) {
	rec, err := s.Record(target)
	if err != nil {
		return "", err
	}
	if rec != nil {
		return rec.TargetPath, nil
	}
	found, err := filepath.Glob(s.KubeletTarget("*", target))
	if err != nil {
		return "", err
	}
	if len(found) == 1 {
		return found[0], nil
	}
	return s.KubeletTarget(PodUID(target), target), nil
}

// removeKubeletDirs removes what kubelet removes after an unpublish: the
// volume's directory, and the pod's directories once empty. Failures are
// left for the next unpublish: the directories are private and empty.
func (s *Session) removeKubeletDirs(kubeletTarget string) {
	dir := filepath.Dir(kubeletTarget)
	for dir != s.kubeletRoot && strings.HasPrefix(dir, s.kubeletRoot+"/") {
		if err := os.Remove(dir); err != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// Record returns what the driver recorded about the volume at target, or
// nil when it holds no volume for it in this state directory.
func (s *Session) Record(target string) (*volume.Record, error) {
	return s.volumes.Lookup(VolumeID(target)).LoadRecord()
}
