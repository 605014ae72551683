package driver

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/poll"
)

// recordingMetrics records what the driver reports, as "provider code";
// the error_type of failed publishes and refreshes apart.
type recordingMetrics struct {
	mu           sync.Mutex
	publishes    []string
	unpublishes  []string
	calls        []string
	publishTypes []string
	rotations    []string
	unpublishTo  []string
}

func (m *recordingMetrics) NodePublish(provider string, _ time.Duration) {
	m.add(&m.publishes, provider+" OK")
}

func (m *recordingMetrics) NodePublishFailed(provider, errorType string, code codes.Code, _ time.Duration) {
	m.add(&m.publishes, fmt.Sprintf("%s %s", provider, code))
	m.add(&m.publishTypes, errorType)
}

func (m *recordingMetrics) NodeUnpublish(err error, _ time.Duration) {
	m.add(&m.unpublishes, status.Code(err).String())
}

func (m *recordingMetrics) ProviderCall(provider string, code codes.Code, _ time.Duration) {
	m.add(&m.calls, fmt.Sprintf("%s %s", provider, code))
}

func (m *recordingMetrics) ProviderUnpublish(provider string, code codes.Code) {
	m.add(&m.unpublishTo, fmt.Sprintf("%s %s", provider, code))
}

func (m *recordingMetrics) RefreshDecision(string) {}

// RotationReconcile records a failed refresh's error_type, "" a success.
func (m *recordingMetrics) RotationReconcile(_ string, _ bool, errType string, _ time.Duration) {
	m.add(&m.rotations, errType)
}

func (m *recordingMetrics) add(to *[]string, s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	*to = append(*to, s)
}

// take returns what was recorded in to since the last take.
func (m *recordingMetrics) take(to *[]string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := *to
	*to = nil
	return out
}

func (m *recordingMetrics) check(t *testing.T, what string, to *[]string, want ...string) {
	t.Helper()
	if got := m.take(to); !slices.Equal(got, want) {
		t.Errorf("%s: %q, want %q", what, got, want)
	}
}

// TestPublishMetrics: every NodePublishVolume and NodeUnpublishVolume call
// is counted with the code kubelet got and, for a publish, the class's
// provider when it is known; every provider call with its code.
func TestPublishMetrics(t *testing.T) {
	n := newTestNode(t)
	m := &recordingMetrics{}
	d := n.srv.d
	d.deps.Metrics = m
	d.deps.Providers = MeteredProviders(n.provider, m)
	srv := &nodeServer{d: d}
	n.srv = srv
	n.provider.files = []*v1alpha1.File{{Path: "a", Mode: 0o644, Contents: []byte("x")}}
	target := n.target("secrets")

	if err := n.publish(t, target); err != nil {
		t.Fatal(err)
	}
	m.check(t, "first publish", &m.publishes, "scripted OK")
	m.check(t, "first publish's provider calls", &m.calls, "scripted OK")

	// A refresh whose provider fails keeps the files and answers OK.
	n.provider.writeOwn = func(string) error { return status.Error(codes.Unavailable, "store down") }
	if err := n.publish(t, target); err != nil {
		t.Fatal(err)
	}
	m.check(t, "failed refresh", &m.publishes, "scripted OK")
	m.check(t, "failed refresh's provider calls", &m.calls, "scripted Unavailable")

	// A first publish whose provider fails.
	if err := n.publish(t, n.target("other")); status.Code(err) != codes.Unavailable {
		t.Fatalf("first publish with the provider down: %v", err)
	}
	m.check(t, "failed first publish", &m.publishes, "scripted Unavailable")
	m.check(t, "failed first publish's provider calls", &m.calls, "scripted Unavailable")
	n.provider.writeOwn = nil

	// A class that does not exist: no provider is known or called.
	req := validRequest()
	req.TargetPath = n.target("missing")
	req.VolumeId = "csi-missing"
	if _, err := srv.NodePublishVolume(t.Context(), req); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("publish of a missing class: %v", err)
	}
	m.check(t, "missing class", &m.publishes, " FailedPrecondition")
	m.check(t, "missing class's provider calls", &m.calls)

	// After a restart (a new server, nothing remembered), a publish that
	// calls no provider names the provider the volume's record holds.
	restarted := &nodeServer{d: d}
	if got := restarted.provider("csi-secrets", &providerSlot{}, nil); got != "scripted" {
		t.Errorf("provider of a recorded volume after a restart = %q, want scripted", got)
	}
	if got := restarted.provider("csi-unknown", &providerSlot{}, nil); got != "" {
		t.Errorf("provider of a volume without a record = %q, want none", got)
	}

	if _, err := srv.NodeUnpublishVolume(t.Context(), &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-secrets", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.NodeUnpublishVolume(t.Context(), &csi.NodeUnpublishVolumeRequest{TargetPath: target}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("unpublish without a volume ID: %v", err)
	}
	m.check(t, "unpublishes", &m.unpublishes, "OK", "InvalidArgument")
	if _, ok := srv.providers.Load("csi-secrets"); ok {
		t.Error("the provider of an unpublished volume is still remembered")
	}
}

// TestWriteQueue: the queue reports the volumes waiting for the API server
// and how long the oldest has waited, through newer outcomes that replace
// unwritten ones, and nothing once written.
func TestWriteQueue(t *testing.T) {
	if n, age := newReporter(nil, time.Second).waiting(time.Now()); n != 0 || age != 0 {
		t.Errorf("without a cluster: %d waiting, oldest %s; want none", n, age)
	}
	cl := newStuckCluster()
	r := newReporter(cl, time.Second)
	if n, age := r.waiting(time.Now()); n != 0 || age != 0 {
		t.Errorf("nothing queued: %d waiting, oldest %s", n, age)
	}
	r.published(&Outcome{VolumeID: "a"})
	first := r.pending["a"].queued
	r.published(&Outcome{VolumeID: "a"}) // replaces the unwritten one
	r.published(&Outcome{VolumeID: "b"})
	if n, age := r.waiting(first.Add(time.Minute)); n != 2 || age != time.Minute {
		t.Errorf("%d waiting, oldest %s; want 2 and 1m0s (a waits since its first outcome)", n, age)
	}
	close(cl.release)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	poll.UntilTrue(t, "the queue written", r.idle)
	if n, age := r.waiting(time.Now()); n != 0 || age != 0 {
		t.Errorf("after the writes: %d waiting, oldest %s; want none", n, age)
	}
}

// TestMeteredProvidersWithoutSlot: a provider call outside a CSI call (a
// trigger's refresh) is timed too.
func TestMeteredProvidersWithoutSlot(t *testing.T) {
	m := &recordingMetrics{}
	p := MeteredProviders(funcProvider(func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		return okResponse(), nil
	}), m)
	if _, err := p.Mount(t.Context(), "local", &v1alpha1.MountRequest{TargetPath: filepath.Join(t.TempDir(), "t")}); err != nil {
		t.Fatal(err)
	}
	m.check(t, "calls", &m.calls, "local OK")
}
