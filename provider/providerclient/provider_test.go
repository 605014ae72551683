package providerclient

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// fakeProvider is a provider plugin whose behaviour each test sets, so that
// faults a real provider cannot be made to produce on demand can be injected.
type fakeProvider struct {
	v1alpha1.UnimplementedCSIDriverProviderServer

	// mount answers Mount; nil answers okResponse().
	mount func(ctx context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error)
	// runtime is VersionResponse.runtime_name.
	runtime string

	mu          sync.Mutex
	authorities []string
	versionReqs []*v1alpha1.VersionRequest
	mountReqs   []*v1alpha1.MountRequest
}

func (p *fakeProvider) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.authorities = append(p.authorities, md.Get(":authority")...)
}

func (p *fakeProvider) Version(ctx context.Context, req *v1alpha1.VersionRequest) (*v1alpha1.VersionResponse, error) {
	p.record(ctx)
	p.mu.Lock()
	p.versionReqs = append(p.versionReqs, req)
	p.mu.Unlock()
	return &v1alpha1.VersionResponse{Version: "v1alpha1", RuntimeName: p.runtime, RuntimeVersion: "0.0.1"}, nil
}

func (p *fakeProvider) Mount(ctx context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	p.record(ctx)
	p.mu.Lock()
	p.mountReqs = append(p.mountReqs, req)
	p.mu.Unlock()
	if p.mount != nil {
		return p.mount(ctx, req)
	}
	return okResponse(), nil
}

func (p *fakeProvider) seenAuthorities() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.authorities...)
}

func (p *fakeProvider) seenMountRequests() []*v1alpha1.MountRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*v1alpha1.MountRequest(nil), p.mountReqs...)
}

func (p *fakeProvider) seenVersionRequests() []*v1alpha1.VersionRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*v1alpha1.VersionRequest(nil), p.versionReqs...)
}

func okResponse() *v1alpha1.MountResponse {
	return &v1alpha1.MountResponse{
		ObjectVersion: []*v1alpha1.ObjectVersion{{Id: "secret/db", Version: "3"}},
		Files:         []*v1alpha1.File{{Path: "db/password", Mode: 0o644, Contents: []byte("s3cr3t")}},
	}
}

// countingListener counts the connections the server accepts and how many of
// them are still open.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
	open     atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	l.open.Add(1)
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// runningProvider is a fakeProvider served on a real unix socket.
type runningProvider struct {
	*fakeProvider
	path   string
	lis    *countingListener
	server *grpc.Server
}

// serve serves p on <dir>/<name>.sock until the test ends or stop is called.
func serve(t *testing.T, dir, name string, p *fakeProvider) *runningProvider {
	t.Helper()
	path := filepath.Join(dir, name+".sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen on %s: %v", path, err)
	}
	lis := &countingListener{Listener: l}
	s := grpc.NewServer()
	v1alpha1.RegisterCSIDriverProviderServer(s, p)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return &runningProvider{fakeProvider: p, path: path, lis: lis, server: s}
}

// tempDir returns a short temporary directory: socket paths must fit in
// about 108 bytes, which t.TempDir's long names can exceed.
func tempDir(t *testing.T) string {
	t.Helper()
	return sockettest.Dir(t)
}

// tempDirPattern returns a new directory named by pattern inside a short
// one (os.MkdirTemp's pattern).
func tempDirPattern(t *testing.T, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp(sockettest.Dir(t), pattern)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// newClient returns a Client for cfg that is closed when the test ends.
func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
