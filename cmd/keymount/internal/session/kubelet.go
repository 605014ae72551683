package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/volume"
)

// Pod is the pod a volume is published for, as kubelet describes it in the
// volume context.
type Pod struct {
	Name           string
	Namespace      string
	UID            string
	ServiceAccount string
}

// Volume is one publish: which class, where, how.
type Volume struct {
	// Class is the SecretProviderClass the pod volume names.
	Class string
	// Target is the absolute, clean target path.
	Target string
	// ReadOnly is the pod volume's readOnly.
	ReadOnly bool
}

// VolumeID derives the CLI's volume ID from the absolute target path, so
// that unpublish finds the volume from the path alone.
func VolumeID(target string) string {
	sum := sha256.Sum256([]byte(target))
	return "cli-" + hex.EncodeToString(sum[:])[:32]
}

// NewPodUID returns a random UUID (version 4), like a pod UID.
func NewPodUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails.
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// publishRequest is the NodePublishVolume call kubelet makes for an inline
// secrets volume of pod: a mount capability, the pod volume's attributes and
// the pod information the CSIDriver's podInfoOnMount asks for.
func publishRequest(pod Pod, v Volume) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId:   VolumeID(v.Target),
		TargetPath: v.Target,
		Readonly:   v.ReadOnly,
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

// Publish calls NodePublishVolume as kubelet does. The error is the
// driver's gRPC status error.
func (s *Session) Publish(ctx context.Context, pod Pod, v Volume) error {
	_, err := s.node.NodePublishVolume(ctx, publishRequest(pod, v))
	return err
}

// Unpublish calls NodeUnpublishVolume for the volume at target.
func (s *Session) Unpublish(ctx context.Context, target string) error {
	_, err := s.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{
		VolumeId:   VolumeID(target),
		TargetPath: target,
	})
	return err
}

// Record returns what the driver recorded about the volume at target, or
// nil when it holds no volume for it in this state directory.
func (s *Session) Record(target string) (*volume.Record, error) {
	return s.volumes.Lookup(VolumeID(target)).LoadRecord()
}
