package hostile_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/unixsocket"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/harness"
)

// The scriptable provider is served as providerName; className is the
// SecretProviderClass naming it.
const (
	providerName = "hostile"
	className    = "hostile"
)

// script answers one Mount call.
type script func(ctx context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error)

// scriptProvider is a raw v1alpha1 provider, not the provider kit: the kit
// checks paths and modes before they leave the provider, and these tests
// need a provider that sends whatever a broken or malicious one would.
type scriptProvider struct {
	v1alpha1.UnimplementedCSIDriverProviderServer

	mu     sync.Mutex
	answer script
	calls  atomic.Int64
}

var _ v1alpha1.CSIDriverProviderServer = (*scriptProvider)(nil)

// set makes s the answer of every Mount call from now on.
func (p *scriptProvider) set(s script) {
	p.mu.Lock()
	p.answer = s
	p.mu.Unlock()
}

func (p *scriptProvider) Version(context.Context, *v1alpha1.VersionRequest) (*v1alpha1.VersionResponse, error) {
	return &v1alpha1.VersionResponse{Version: "v1alpha1", RuntimeName: providerName, RuntimeVersion: "test"}, nil
}

func (p *scriptProvider) Mount(ctx context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	p.calls.Add(1)
	p.mu.Lock()
	s := p.answer
	p.mu.Unlock()
	if s == nil {
		return nil, status.Error(codes.FailedPrecondition, "the test set no answer")
	}
	return s(ctx, req)
}

// serveProvider serves p on <dir>/<name>.sock until the test ends. The
// socket exists when it returns: calls wait in the backlog until Serve
// accepts them.
func serveProvider(t *testing.T, dir, name string, p *scriptProvider) {
	t.Helper()
	l, err := unixsocket.Listen(filepath.Join(dir, name+".sock"))
	if err != nil {
		t.Fatalf("listen for provider %s: %v", name, err)
	}
	gs := grpc.NewServer()
	v1alpha1.RegisterCSIDriverProviderServer(gs, p)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(l) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("provider %s: %v", name, err)
		}
	})
}

// respond is a well-formed response carrying files.
func respond(files ...*v1alpha1.File) *v1alpha1.MountResponse {
	return &v1alpha1.MountResponse{
		ObjectVersion: []*v1alpha1.ObjectVersion{{Id: "hostile-object", Version: "1"}},
		Files:         files,
	}
}

// fileOf is a provider file with mode 0644.
func fileOf(path, contents string) *v1alpha1.File {
	return &v1alpha1.File{Path: path, Mode: 0o644, Contents: []byte(contents)}
}

// answer is a script that always returns files.
func answer(files ...*v1alpha1.File) script {
	resp := respond(files...)
	return func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		return resp, nil
	}
}

// filesOf turns a path -> contents map into provider files.
func filesOf(m map[string]string) []*v1alpha1.File {
	out := make([]*v1alpha1.File, 0, len(m))
	for p, c := range m {
		out = append(out, fileOf(p, c))
	}
	return out
}

// answerPodUID is a script that returns one file, "uid", holding the pod
// UID the request's attributes carry: every volume gets content of its own.
func answerPodUID() script {
	return func(_ context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		var attrs map[string]string
		if err := json.Unmarshal([]byte(req.GetAttributes()), &attrs); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "attributes: %v", err)
		}
		return respond(fileOf("uid", attrs[driver.AttrPodUID])), nil
	}
}

// node is a harness node whose class className names the scripted provider.
type node struct {
	*harness.Harness
	prov *scriptProvider
}

// startNode starts a harness and serves a scripted provider beside it. Its
// answer is set by the test before the first publish.
func startNode(t *testing.T, opts harness.Options) *node {
	t.Helper()
	h := harness.Start(t, opts)
	p := &scriptProvider{}
	serveProvider(t, h.ProviderDir, providerName, p)
	h.WriteClassFor(className, providerName, map[string]string{"test": t.Name()})
	return &node{Harness: h, prov: p}
}

// publish sends kubelet's NodePublishVolume for v with className, read-only.
func (n *node) publish(t *testing.T, v harness.Volume) error {
	t.Helper()
	return n.Publish(t.Context(), v, className, true)
}

// mustPublish publishes v and fails the test on an error.
func (n *node) mustPublish(t *testing.T, v harness.Volume) {
	t.Helper()
	if err := n.publish(t, v); err != nil {
		t.Fatalf("NodePublishVolume(%s): %v", v.Name, err)
	}
}

// mustUnpublish unpublishes v and fails the test on an error.
func (n *node) mustUnpublish(t *testing.T, v harness.Volume) {
	t.Helper()
	if err := n.Unpublish(t.Context(), v); err != nil {
		t.Fatalf("NodeUnpublishVolume(%s): %v", v.Name, err)
	}
}
