package server

import (
	"context"
	"fmt"
	"path"
	"regexp"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/keymount/keymount/provider/keymountv1"
)

// Unpublisher is what a provider implements to hear that keymount's driver
// unmounted a volume (keymount.provider.v1.VolumeLifecycle). Optional: a
// server without one does not serve the service, and the driver takes the
// Unimplemented answer as nothing to do.
type Unpublisher interface {
	// Unpublish lets go of what the provider holds for the volume. It must
	// be idempotent and return nil for a volume it does not know; an error
	// is logged by the driver and never fails the unpublish.
	Unpublish(ctx context.Context, req *UnpublishRequest) error
}

// UnpublishRequest is a validated wire UnpublishRequest.
type UnpublishRequest struct {
	// PodUID is the UID of the pod the volume belonged to.
	PodUID string
	// VolumeName is the volume's name in the pod spec.
	VolumeName string
	// TargetPath is the absolute target path the volume was published at:
	// <kubelet root>/pods/<PodUID>/volumes/kubernetes.io~csi/<VolumeName>/mount.
	TargetPath string
}

// podUIDRE: a pod UID is a UUID (the API server's) or 32 hex digits (a
// static pod's, a hash of its manifest).
var podUIDRE = regexp.MustCompile(`^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[0-9a-fA-F]{32})$`)

// parseUnpublish validates a wire request. Errors name the field and what
// it must be.
func parseUnpublish(req *keymountv1.UnpublishRequest) (*UnpublishRequest, error) {
	r := &UnpublishRequest{PodUID: req.GetPodUid(), VolumeName: req.GetVolumeName(), TargetPath: req.GetTargetPath()}
	if !podUIDRE.MatchString(r.PodUID) {
		return nil, fmt.Errorf("pod_uid %q is not a pod UID: want a UUID or 32 hex digits", r.PodUID)
	}
	if errs := validation.IsDNS1123Label(r.VolumeName); len(errs) > 0 {
		return nil, fmt.Errorf("volume_name %q is not a pod volume name: %s", r.VolumeName, errs[0])
	}
	suffix := path.Join("/pods", r.PodUID, "volumes", "kubernetes.io~csi", r.VolumeName, "mount")
	if !path.IsAbs(r.TargetPath) || path.Clean(r.TargetPath) != r.TargetPath ||
		len(r.TargetPath) < len(suffix) || r.TargetPath[len(r.TargetPath)-len(suffix):] != suffix {
		return nil, fmt.Errorf("target_path %q is not the volume's kubelet target path: want an absolute, clean path ending in %s",
			r.TargetPath, suffix)
	}
	return r, nil
}

// lifecycle adapts an Unpublisher to the keymount.provider.v1 gRPC service.
type lifecycle struct {
	keymountv1.UnimplementedVolumeLifecycleServer

	u Unpublisher
}

var _ keymountv1.VolumeLifecycleServer = (*lifecycle)(nil)

func (l *lifecycle) Unpublish(ctx context.Context, wire *keymountv1.UnpublishRequest) (*keymountv1.UnpublishResponse, error) {
	req, err := parseUnpublish(wire)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := l.u.Unpublish(ctx, req); err != nil {
		return nil, statusOf(err).Err()
	}
	return &keymountv1.UnpublishResponse{}, nil
}
