package providerclient

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// lifecycleProvider serves keymount's extension beside v1alpha1.
type lifecycleProvider struct {
	keymountv1.UnimplementedVolumeLifecycleServer
	got chan *keymountv1.UnpublishRequest
}

func (p *lifecycleProvider) Unpublish(_ context.Context, req *keymountv1.UnpublishRequest) (*keymountv1.UnpublishResponse, error) {
	p.got <- req
	return &keymountv1.UnpublishResponse{}, nil
}

// TestUnpublish: the request reaches a provider serving the extension on
// its socket; one that serves v1alpha1 only answers Unimplemented, which
// status.Code reads through the returned error.
func TestUnpublish(t *testing.T) {
	dir := tempDir(t)
	serve(t, dir, "upstream", &fakeProvider{})
	lp := &lifecycleProvider{got: make(chan *keymountv1.UnpublishRequest, 1)}
	l, err := net.Listen("unix", filepath.Join(dir, "vault.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	v1alpha1.RegisterCSIDriverProviderServer(s, &fakeProvider{})
	keymountv1.RegisterVolumeLifecycleServer(s, lp)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	c := newClient(t, Config{Dirs: []string{dir}})

	req := &keymountv1.UnpublishRequest{PodUid: "uid", VolumeName: "secrets", TargetPath: "/k/pods/uid/volumes/kubernetes.io~csi/secrets/mount"}
	if err := c.Unpublish(t.Context(), "vault", req); err != nil {
		t.Fatalf("Unpublish to a provider with the extension: %v", err)
	}
	if d := cmp.Diff(req, <-lp.got, protocmp.Transform()); d != "" {
		t.Errorf("the provider got (-want +got):\n%s", d)
	}
	if err := c.Unpublish(t.Context(), "upstream", req); status.Code(err) != codes.Unimplemented {
		t.Errorf("Unpublish to a provider without the extension: %v, want Unimplemented", err)
	}
}
