package harness

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/keymount/keymount/driver"
)

// Volume-context key kubelet adds for an inline volume.
const attrEphemeral = "csi.storage.k8s.io/ephemeral"

// csiPluginDir is kubelet's directory name for CSI volumes of a pod.
const csiPluginDir = "kubernetes.io~csi"

// Pod is the pod a volume belongs to, as kubelet describes it in the volume
// context.
type Pod struct {
	Name, Namespace, UID, ServiceAccount string
}

// Volume is an inline CSI volume of one pod, named the way kubelet names it.
type Volume struct {
	Pod Pod
	// Name is the volume's name in the pod spec.
	Name string
	// ID is kubelet's volume ID of the inline volume.
	ID string
	// Target is kubelet's target path of the volume.
	Target string
}

// VolumeID is the volume ID kubelet gives an inline volume: "csi-" followed
// by the hex SHA-256 of the pod UID and the volume name.
func VolumeID(podUID, volumeName string) string {
	sum := sha256.Sum256([]byte(podUID + volumeName))
	return "csi-" + hex.EncodeToString(sum[:])
}

// TargetPath is kubelet's target path of a pod's CSI volume:
// <TargetBase>/pods/<pod UID>/volumes/kubernetes.io~csi/<volume>/mount.
func (h *Harness) TargetPath(podUID, volumeName string) string {
	return filepath.Join(h.TargetBase, "pods", podUID, "volumes", csiPluginDir, volumeName, "mount")
}

// NewVolume makes up a new pod with a random UID and returns its volume
// named volumeName. Like kubelet, it creates the parent directory of the
// target path but not the target itself, which is the driver's to create.
func (h *Harness) NewVolume(volumeName string) Volume {
	h.tb.Helper()
	uid := newUID()
	v := Volume{Pod: h.PodOf(h.TargetPath(uid, volumeName)), Name: volumeName, ID: VolumeID(uid, volumeName), Target: h.TargetPath(uid, volumeName)}
	if err := os.MkdirAll(filepath.Dir(v.Target), 0o750); err != nil {
		h.tb.Fatalf("create volume parent dir: %v", err)
	}
	return v
}

// PodOf returns the pod owning a kubelet-style target path. The pod UID
// comes from the path; the name is derived from the UID. A target path not
// under TargetBase belongs to a fixed pod.
func (h *Harness) PodOf(target string) Pod {
	uid := "00000000-0000-4000-8000-000000000000"
	if rel, err := filepath.Rel(filepath.Join(h.TargetBase, "pods"), target); err == nil {
		if parts := strings.Split(rel, string(filepath.Separator)); len(parts) > 1 && parts[0] != ".." {
			uid = parts[0]
		}
	}
	return Pod{Name: "app-" + uid[:min(8, len(uid))], Namespace: h.opts.Namespace, UID: uid, ServiceAccount: "default"}
}

// PublishRequest is the NodePublishVolume request kubelet sends for an
// inline volume of the pod owning target, with the CSIDriver's
// podInfoOnMount: the volume attribute secretProviderClass, the pod's name,
// namespace, UID and service account, and ephemeral "true"; mount access,
// single-node writer, no fsType, no secrets, no staging path.
func (h *Harness) PublishRequest(volumeID, target, class string, readOnly bool) *csi.NodePublishVolumeRequest {
	pod := h.PodOf(target)
	return &csi.NodePublishVolumeRequest{
		VolumeId:   volumeID,
		TargetPath: target,
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		Readonly: readOnly,
		VolumeContext: map[string]string{
			driver.AttrClass:          class,
			driver.AttrPodName:        pod.Name,
			driver.AttrPodNamespace:   pod.Namespace,
			driver.AttrPodUID:         pod.UID,
			driver.AttrServiceAccount: pod.ServiceAccount,
			attrEphemeral:             "true",
		},
	}
}

// UnpublishRequest is the NodeUnpublishVolume request kubelet sends.
func UnpublishRequest(volumeID, target string) *csi.NodeUnpublishVolumeRequest {
	return &csi.NodeUnpublishVolumeRequest{VolumeId: volumeID, TargetPath: target}
}

// Publish calls NodePublishVolume for v with class.
func (h *Harness) Publish(ctx context.Context, v Volume, class string, readOnly bool) error {
	_, err := h.Node.NodePublishVolume(ctx, h.PublishRequest(v.ID, v.Target, class, readOnly))
	return err
}

// Unpublish calls NodeUnpublishVolume for v.
func (h *Harness) Unpublish(ctx context.Context, v Volume) error {
	_, err := h.Node.NodeUnpublishVolume(ctx, UnpublishRequest(v.ID, v.Target))
	return err
}

// newUID returns a random version 4 UUID, like a pod UID.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails.
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
