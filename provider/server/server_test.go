package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/keymount/keymount/provider/v1alpha1"
)

// providerFunc adapts a function to Provider.
type providerFunc func(ctx context.Context, req *MountRequest) (*MountResult, error)

func (f providerFunc) Mount(ctx context.Context, req *MountRequest) (*MountResult, error) {
	return f(ctx, req)
}

// socketDir returns a directory short enough for a unix socket path.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "km")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

type running struct {
	srv    *Server
	client v1alpha1.CSIDriverProviderClient
	stop   func() error // cancels Serve and returns its result
}

// serve runs a Server for p on a real unix socket in dir and connects a real
// client to it the way the driver does.
func serve(t *testing.T, dir string, p Provider) *running {
	t.Helper()
	srv, err := New(Config{Name: "fake", Version: "1.2.3", SocketDir: dir}, p)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Serve did not return after cancel")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })

	waitForSocket(t, srv.SocketPath(), done)
	conn, err := grpc.NewClient("unix://"+srv.SocketPath(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &running{srv: srv, client: v1alpha1.NewCSIDriverProviderClient(conn), stop: stop}
}

// waitForSocket waits until something listens on path.
func waitForSocket(t *testing.T, path string, done <-chan error) {
	t.Helper()
	for range 500 {
		select {
		case err := <-done:
			t.Fatalf("Serve returned early: %v", err)
		default:
		}
		if c, err := net.Dial("unix", path); err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s", path)
}

func TestVersion(t *testing.T) {
	r := serve(t, socketDir(t), providerFunc(func(context.Context, *MountRequest) (*MountResult, error) {
		return nil, errors.New("not called")
	}))
	got, err := r.client.Version(t.Context(), &v1alpha1.VersionRequest{Version: "v1alpha1"})
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	want := &v1alpha1.VersionResponse{Version: "v1alpha1", RuntimeName: "fake", RuntimeVersion: "1.2.3"}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Version (-want +got):\n%s", diff)
	}
}

func TestMount(t *testing.T) {
	var gotReq *MountRequest
	r := serve(t, socketDir(t), providerFunc(func(_ context.Context, req *MountRequest) (*MountResult, error) {
		gotReq = req
		return &MountResult{
			Files: []File{
				{Path: "password", Mode: 0o600, Contents: []byte("hunter2")},
				{Path: "tls/tls.crt", Mode: 0o644, Contents: []byte("cert")},
			},
			Versions: []ObjectVersion{{ID: "db/password", Version: "v7"}},
		}, nil
	}))

	got, err := r.client.Mount(t.Context(), &v1alpha1.MountRequest{
		Attributes:           `{"objects":"- objectName: a","csi.storage.k8s.io/pod.name":"web-0"}`,
		Secrets:              `{"token":"s3cr3t"}`,
		TargetPath:           "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/v/mount",
		Permission:           "420",
		CurrentObjectVersion: []*v1alpha1.ObjectVersion{{Id: "db/password", Version: "v6"}},
	})
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}

	wantReq := &MountRequest{
		Attributes:      map[string]string{"objects": "- objectName: a", "csi.storage.k8s.io/pod.name": "web-0"},
		Secrets:         map[string]string{"token": "s3cr3t"},
		TargetPath:      "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/v/mount",
		Permission:      0o644,
		CurrentVersions: map[string]string{"db/password": "v6"},
	}
	if diff := cmp.Diff(wantReq, gotReq); diff != "" {
		t.Errorf("request the provider saw (-want +got):\n%s", diff)
	}
	want := &v1alpha1.MountResponse{
		ObjectVersion: []*v1alpha1.ObjectVersion{{Id: "db/password", Version: "v7"}},
		Files: []*v1alpha1.File{
			{Path: "password", Mode: 0o600, Contents: []byte("hunter2")},
			{Path: "tls/tls.crt", Mode: 0o644, Contents: []byte("cert")},
		},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Mount (-want +got):\n%s", diff)
	}
}

func TestMountBadRequest(t *testing.T) {
	called := false
	r := serve(t, socketDir(t), providerFunc(func(context.Context, *MountRequest) (*MountResult, error) {
		called = true
		return &MountResult{}, nil
	}))
	ok := &v1alpha1.MountRequest{Attributes: `{}`, Secrets: `{}`, Permission: "420"}

	tests := []struct {
		name  string
		edit  func(*v1alpha1.MountRequest)
		field string
	}{
		{"attributes not JSON", func(r *v1alpha1.MountRequest) { r.Attributes = `{"a":` }, "attributes"},
		{"attributes empty", func(r *v1alpha1.MountRequest) { r.Attributes = `` }, "attributes"},
		{"attributes not strings", func(r *v1alpha1.MountRequest) { r.Attributes = `{"a":1}` }, "attributes"},
		{"secrets not JSON", func(r *v1alpha1.MountRequest) { r.Secrets = `{"token":"s3cr` }, "secrets"},
		{"permission not a number", func(r *v1alpha1.MountRequest) { r.Permission = `"0644"` }, "permission"},
		{"permission too large", func(r *v1alpha1.MountRequest) { r.Permission = `512` }, "permission"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := &v1alpha1.MountRequest{Attributes: ok.Attributes, Secrets: ok.Secrets, Permission: ok.Permission}
			tc.edit(req)
			_, err := r.client.Mount(t.Context(), req)
			if got := status.Code(err); got != codes.InvalidArgument {
				t.Fatalf("code = %v, want InvalidArgument (err %v)", got, err)
			}
			if msg := status.Convert(err).Message(); !containsWord(msg, tc.field) {
				t.Errorf("message %q does not name %q", msg, tc.field)
			}
			if called {
				t.Error("provider was called for a bad request")
			}
		})
	}
}

func containsWord(s, w string) bool {
	return len(w) > 0 && len(s) >= len(w) && (s[:len(w)] == w || fmt.Sprint(s) != "" && contains(s, w))
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
