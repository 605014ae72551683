package local

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// TestOverSocket runs the provider the way the binary does, behind the server
// kit on a real unix socket, and checks what the driver would see.
func TestOverSocket(t *testing.T) {
	p, err := New(newRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := sockettest.Dir(t)
	srv, err := server.New(server.Config{Name: "local", Version: "test", SocketDir: dir}, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	conn, err := grpc.NewClient("unix://"+srv.SocketPath(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := v1alpha1.NewCSIDriverProviderClient(conn)

	// WaitForReady: the socket may not be listening yet.
	got, err := client.Mount(t.Context(), &v1alpha1.MountRequest{
		Attributes: `{"objects":"- objectName: db/password\n  objectAlias: password\n  filePermission: \"0400\""}`,
		Secrets:    `{}`,
		TargetPath: "/target",
		Permission: "420",
	}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}
	want := &v1alpha1.MountResponse{
		ObjectVersion: []*v1alpha1.ObjectVersion{{Id: "db/password", Version: hash(password)}},
		Files:         []*v1alpha1.File{{Path: "password", Mode: 0o400, Contents: []byte(password)}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Mount (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		attrs string
		want  codes.Code
	}{
		{`{"objects":"- objectName: db/nope"}`, codes.NotFound},
		{`{"objects":"- objectName: link-escape"}`, codes.PermissionDenied},
		{`{"objects":"- objectName: /etc/hostname"}`, codes.InvalidArgument},
		{`{}`, codes.InvalidArgument},
	} {
		_, err := client.Mount(t.Context(), &v1alpha1.MountRequest{Attributes: tc.attrs, Permission: "420"})
		if got := status.Code(err); got != tc.want {
			t.Errorf("Mount(%s) = %v, want %v", tc.attrs, err, tc.want)
		}
	}
}
