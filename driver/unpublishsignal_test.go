package driver

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// TestUnpublishTellsProvider: after the unmount, NodeUnpublishVolume tells
// the volume's provider through keymount's extension, naming the pod, the
// volume and the target; whatever the provider does (answers OK, has no
// extension, fails, never answers) the unpublish succeeds, and the outcome
// is counted by the provider's gRPC code. A provider that never answers is
// cut off by Config.ProviderUnpublishTimeout, not by kubelet's deadline.
func TestUnpublishTellsProvider(t *testing.T) {
	for _, tc := range []struct {
		name      string
		unpublish func(ctx context.Context, req *keymountv1.UnpublishRequest) error
		want      codes.Code
	}{
		{"served", func(context.Context, *keymountv1.UnpublishRequest) error { return nil }, codes.OK},
		{"no extension (upstream and AWS providers)", nil, codes.Unimplemented},
		{"fails", func(context.Context, *keymountv1.UnpublishRequest) error {
			return status.Error(codes.Unavailable, "vault is sealed")
		}, codes.Unavailable},
		{"hangs", func(ctx context.Context, _ *keymountv1.UnpublishRequest) error {
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		}, codes.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t)
			m := &recordingMetrics{}
			n.srv.d.deps.Metrics = m
			n.srv.d.cfg.ProviderUnpublishTimeout = 50 * time.Millisecond
			var got []*keymountv1.UnpublishRequest
			n.provider.unpublish = func(ctx context.Context, req *keymountv1.UnpublishRequest) error {
				got = append(got, req)
				if tc.unpublish == nil {
					return errNoExtension()
				}
				return tc.unpublish(ctx, req)
			}
			n.provider.files = []*v1alpha1.File{{Path: "f", Mode: 0o644, Contents: []byte("v1")}}
			target := n.target("secrets")
			if err := n.publish(t, target); err != nil {
				t.Fatal(err)
			}
			if len(got) != 0 {
				t.Fatalf("the provider was told of an unpublish at publish: %v", got)
			}
			// Kubelet's own deadline is far away: only the driver's cuts
			// a hanging provider off.
			ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
			defer cancel()
			if _, err := n.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-secrets", TargetPath: target}); err != nil {
				t.Fatalf("NodeUnpublishVolume: %v, want OK whatever the provider answers", err)
			}
			if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("target %s still there after the unpublish: %v", target, err)
			}
			want := []*keymountv1.UnpublishRequest{{PodUid: "uid", VolumeName: "secrets", TargetPath: target}}
			if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
				t.Errorf("the provider was told (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]string{"scripted " + tc.want.String()}, m.take(&m.unpublishTo)); d != "" {
				t.Errorf("ProviderUnpublish (-want +got):\n%s", d)
			}
			// Unpublishing a volume already gone names no provider: no call.
			if _, err := n.srv.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-secrets", TargetPath: target}); err != nil || len(got) != 1 {
				t.Errorf("second unpublish: %v, %d calls to the provider; want OK and no new call", err, len(got))
			}
		})
	}
}
