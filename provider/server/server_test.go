package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/keymountv1"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/poll"
)

// providerFunc adapts a function to Provider.
type providerFunc func(ctx context.Context, req *MountRequest) (*MountResult, error)

func (f providerFunc) Mount(ctx context.Context, req *MountRequest) (*MountResult, error) {
	return f(ctx, req)
}

// socketDir returns a directory short enough for a unix socket path.
func socketDir(t *testing.T) string {
	t.Helper()
	return sockettest.Dir(t)
}

type running struct {
	srv       *Server
	client    v1alpha1.CSIDriverProviderClient
	lifecycle keymountv1.VolumeLifecycleClient
	stop      func() error // cancels Serve and returns its result
}

// serve runs a Server for p on a real unix socket in dir and connects a real
// client to it the way the driver does.
func serve(t *testing.T, dir string, p Provider) *running {
	t.Helper()
	return serveConfig(t, Config{Name: "fake", Version: "1.2.3", SocketDir: dir}, p)
}

// serveConfig is serve with a Config of the test's.
func serveConfig(t *testing.T, cfg Config, p Provider) *running {
	t.Helper()
	srv, err := New(cfg, p)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	stop := sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("serve did not return within 30s of cancel")
		}
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	waitForSocket(t, srv.SocketPath(), done)
	conn, err := grpc.NewClient("unix://"+srv.SocketPath(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &running{srv: srv, client: v1alpha1.NewCSIDriverProviderClient(conn), lifecycle: keymountv1.NewVolumeLifecycleClient(conn), stop: stop}
}

// waitForSocket waits until something listens on path.
func waitForSocket(t *testing.T, path string, done <-chan error) {
	t.Helper()
	poll.Until(t, "something to listen on "+path, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("the server stopped serving early: %w", err)
		default:
		}
		c, err := net.Dial("unix", path)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet: poll again
		}
		_ = c.Close()
		return true, nil
	})
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
	reqs := make(chan *MountRequest, 1)
	r := serve(t, socketDir(t), providerFunc(func(_ context.Context, req *MountRequest) (*MountResult, error) {
		reqs <- req
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
	if diff := cmp.Diff(wantReq, <-reqs); diff != "" {
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
	var called atomic.Bool
	r := serve(t, socketDir(t), providerFunc(func(context.Context, *MountRequest) (*MountResult, error) {
		called.Store(true)
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
			if msg := status.Convert(err).Message(); !strings.Contains(msg, tc.field) {
				t.Errorf("message %q does not name %q", msg, tc.field)
			}
			if called.Load() {
				t.Error("provider was called for a bad request")
			}
		})
	}
}

func TestMountProviderErrors(t *testing.T) {
	errs := map[string]error{
		"not found":         fmt.Errorf("object %q not found under root: %w", "db/password", ErrNotFound),
		"permission denied": fmt.Errorf("reading %q: %w", "x", ErrPermissionDenied),
		"invalid":           fmt.Errorf("objects[1].filePermission: %w", ErrInvalidParameters),
		"precondition":      fmt.Errorf("node n1 has no region label: %w", ErrFailedPrecondition),
		"unavailable":       fmt.Errorf("calling STS: %w", ErrUnavailable),
		"status kept":       status.Error(codes.Unavailable, "store unreachable"),
		"wrapped status":    fmt.Errorf("fetch: %w", status.Error(codes.ResourceExhausted, "throttled")),
		"status unknown":    status.Error(codes.Unknown, "who knows"),
		"deadline":          fmt.Errorf("fetch: %w", context.DeadlineExceeded),
		"plain":             errors.New("boom"),
	}
	r := serve(t, socketDir(t), providerFunc(func(_ context.Context, req *MountRequest) (*MountResult, error) {
		return nil, errs[req.Attributes["case"]]
	}))

	tests := []struct {
		name string
		want codes.Code
		msg  string
	}{
		{"not found", codes.NotFound, `object "db/password" not found under root: not found`},
		{"permission denied", codes.PermissionDenied, `reading "x": permission denied`},
		{"invalid", codes.InvalidArgument, `objects[1].filePermission: invalid parameters`},
		{"precondition", codes.FailedPrecondition, "node n1 has no region label: failed precondition"},
		{"unavailable", codes.Unavailable, "calling STS: unavailable"},
		{"status kept", codes.Unavailable, "store unreachable"},
		{"wrapped status", codes.ResourceExhausted, "fetch: rpc error: code = ResourceExhausted desc = throttled"},
		{"status unknown", codes.Internal, "who knows"},
		{"deadline", codes.DeadlineExceeded, "fetch: context deadline exceeded"},
		{"plain", codes.Internal, "boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.client.Mount(t.Context(), &v1alpha1.MountRequest{
				Attributes: fmt.Sprintf(`{"case":%q}`, tc.name), Secrets: `{}`, Permission: "420",
			})
			st := status.Convert(err)
			if st.Code() != tc.want || st.Message() != tc.msg {
				t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), tc.want, tc.msg)
			}
		})
	}
}

func TestMountBadResult(t *testing.T) {
	results := map[string]*MountResult{
		"nil result":    nil,
		"absolute path": {Files: []File{{Path: "/etc/passwd", Mode: 0o644}}},
		"dotdot path":   {Files: []File{{Path: "../x", Mode: 0o644}}},
		"duplicate":     {Files: []File{{Path: "a", Mode: 0o644}, {Path: "a", Mode: 0o600}}},
		"mode type bit": {Files: []File{{Path: "a", Mode: os.ModeDir | 0o755}}},
	}
	r := serve(t, socketDir(t), providerFunc(func(_ context.Context, req *MountRequest) (*MountResult, error) {
		return results[req.Attributes["case"]], nil
	}))
	for name := range results {
		t.Run(name, func(t *testing.T) {
			_, err := r.client.Mount(t.Context(), &v1alpha1.MountRequest{
				Attributes: fmt.Sprintf(`{"case":%q}`, name), Secrets: `{}`,
			})
			if got := status.Code(err); got != codes.Internal {
				t.Errorf("code = %v, want Internal (err %v)", got, err)
			}
		})
	}
}

func TestServeReplacesStaleSocket(t *testing.T) {
	dir := socketDir(t)
	path := filepath.Join(dir, "fake.sock")
	// A socket file left behind by a process that died without cleaning up.
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		t.Fatalf("listener is a %T", l)
	}
	ul.SetUnlinkOnClose(false)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}

	r := serve(t, dir, providerFunc(func(context.Context, *MountRequest) (*MountResult, error) { return &MountResult{}, nil }))
	if _, err := r.client.Version(t.Context(), &v1alpha1.VersionRequest{}); err != nil {
		t.Fatalf("Version over the replaced socket: %v", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != socketMode {
		t.Errorf("socket mode = %v, want %v", got, socketMode)
	}
}

func TestServeRefusesNonSocket(t *testing.T) {
	dir := socketDir(t)
	path := filepath.Join(dir, "fake.sock")
	if err := os.WriteFile(path, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Name: "fake", SocketDir: dir}, providerFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(t.Context()); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Serve = %v, want an error saying it is not a socket", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "not a socket" {
		t.Errorf("the file was touched: %q, %v", b, err)
	}
}

func TestServeRemovesSocketOnCancel(t *testing.T) {
	r := serve(t, socketDir(t), providerFunc(func(context.Context, *MountRequest) (*MountResult, error) { return &MountResult{}, nil }))
	if _, err := r.client.Version(t.Context(), &v1alpha1.VersionRequest{}); err != nil {
		t.Fatalf("Version: %v", err)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Serve returned %v after cancel, want nil", err)
	}
	if _, err := os.Lstat(r.srv.SocketPath()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket still there after cancel: %v", err)
	}
}

func TestServeFinishesInFlightCall(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	r := serve(t, socketDir(t), providerFunc(func(context.Context, *MountRequest) (*MountResult, error) {
		close(entered)
		<-release
		return &MountResult{Versions: []ObjectVersion{{ID: "a", Version: "1"}}}, nil
	}))
	mounted := make(chan error, 1)
	go func() {
		_, err := r.client.Mount(context.Background(), &v1alpha1.MountRequest{Attributes: `{}`})
		mounted <- err
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- r.stop() }()
	close(release)
	if err := <-mounted; err != nil {
		t.Errorf("in-flight Mount failed during shutdown: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve = %v", err)
	}
}

func TestNew(t *testing.T) {
	p := providerFunc(nil)
	tests := []struct {
		name    string
		cfg     Config
		p       Provider
		wantErr string
	}{
		{"ok", Config{Name: "local", SocketDir: "/var/run/secrets-store-csi-providers"}, p, ""},
		{"ok without socket dir", Config{Name: "a_b-C9"}, p, ""},
		{"empty name", Config{}, p, "name is empty"},
		{"bad character", Config{Name: "my.provider"}, p, "must match"},
		{"path in name", Config{Name: "../x"}, p, "must match"},
		{"too long", Config{Name: strings.Repeat("a", 31)}, p, "must match"},
		{"nil provider", Config{Name: "local"}, nil, "provider is nil"},
		{"socket path too long", Config{Name: "local", SocketDir: "/" + strings.Repeat("d", 100)}, p, "more than a unix socket allows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, tc.p)
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestSocketPath(t *testing.T) {
	srv, err := New(Config{Name: "local", SocketDir: "/var/run/secrets-store-csi-providers"}, providerFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := srv.SocketPath(), "/var/run/secrets-store-csi-providers/local.sock"; got != want {
		t.Errorf("SocketPath = %q, want %q", got, want)
	}
}

func TestServeWithoutSocketDir(t *testing.T) {
	srv, err := New(Config{Name: "local"}, providerFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(t.Context()); err == nil {
		t.Error("Serve without a socket directory succeeded")
	}
}
