package sanity_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// kubeletPaths stands in for what kubelet, not csi-sanity, puts into the
// node requests of a secrets volume. csi-sanity publishes every volume
// read-write at <TargetPath>/target; kubelet publishes a secrets volume
// readOnly: true (the driver refuses anything else) at
// <kubelet root>/pods/<pod UID>/volumes/kubernetes.io~csi/<volume>/mount
// (the driver refuses any other shape). Its interceptor rewrites the
// requests csi-sanity sends to the driver accordingly:
//   - NodePublishVolume: Readonly true; target path sanity -> kubelet;
//   - NodeUnpublishVolume: target path sanity -> kubelet;
//   - NodeGetVolumeStats: volume path sanity -> kubelet.
//
// Only the exact sanity target is mapped; every other path (the ones the
// specs make up to provoke errors) reaches the driver unchanged. checkPath
// maps the same way, so that csi-sanity's "the target exists after publish"
// and "the target is gone after unpublish" checks look at the directory the
// driver really created and removed.
type kubeletPaths struct {
	sanityTarget  string // <TargetPath>/target, as csi-sanity sends it
	kubeletTarget string // <TargetPath>/mount, as kubelet would send it

	published, unpublished atomic.Int64 // requests whose target was mapped
}

// newKubeletPaths maps csi-sanity's target below parent (its TargetPath,
// which must be a kubelet volume directory
// <root>/pods/<uid>/volumes/kubernetes.io~csi/<volume>).
func newKubeletPaths(parent string) *kubeletPaths {
	return &kubeletPaths{
		sanityTarget:  filepath.Join(parent, "target"),
		kubeletTarget: filepath.Join(parent, "mount"),
	}
}

func (k *kubeletPaths) path(p string) string {
	if p == k.sanityTarget {
		return k.kubeletTarget
	}
	return p
}

// intercept is a grpc.UnaryClientInterceptor. It changes copies, never
// csi-sanity's own request objects.
func (k *kubeletPaths) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
) error {
	switch r := req.(type) {
	case *csi.NodePublishVolumeRequest:
		c := proto.CloneOf(r)
		c.Readonly = true
		c.TargetPath = k.path(c.GetTargetPath())
		if c.GetTargetPath() == k.kubeletTarget {
			k.published.Add(1)
		}
		req = c
	case *csi.NodeUnpublishVolumeRequest:
		c := proto.CloneOf(r)
		c.TargetPath = k.path(c.GetTargetPath())
		if c.GetTargetPath() == k.kubeletTarget {
			k.unpublished.Add(1)
		}
		req = c
	case *csi.NodeGetVolumeStatsRequest:
		c := proto.CloneOf(r)
		c.VolumePath = k.path(c.GetVolumePath())
		req = c
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// checkPath is csi-sanity's default check (os.Stat) of the mapped path.
func (k *kubeletPaths) checkPath(p string) (sanity.PathKind, error) {
	fi, err := os.Stat(k.path(p))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return sanity.PathIsNotFound, nil
	case err != nil:
		return "", err
	case fi.Mode().IsRegular():
		return sanity.PathIsFile, nil
	case fi.IsDir():
		return sanity.PathIsDir, nil
	}
	return sanity.PathIsOther, nil
}
