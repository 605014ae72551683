package hostile_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/harness"
)

// containerRefreshes is how many refreshes the AWS-like provider gets.
const containerRefreshes = 50

// awsObjects are the objects of the AWS-like provider, nested ones too.
var awsObjects = []string{"db/password", "db/user", "api-key", "tls/cert", "token", "config"}

// awsLike answers as the existing AWS provider does in its default mode:
// no files returned; an object whose version current_object_version lists
// is read back from target_path (the call fails when it cannot be, or
// reads another value), the others are fetched; every file is written into
// target_path as a temporary file renamed over its name. Before it reads
// and halfway through its writes it starts a container at the pod's target.
type awsLike struct {
	mu      sync.Mutex
	gen     harness.Generation
	probe   func(first bool) error
	reads   atomic.Int64
	inCalls atomic.Int64
}

func (p *awsLike) mount(_ context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	p.mu.Lock()
	g := p.gen
	p.mu.Unlock()
	current := map[string]string{}
	for _, ov := range req.GetCurrentObjectVersion() {
		current[ov.GetId()] = ov.GetVersion()
	}
	first := len(current) == 0
	if err := p.probe(first); err != nil {
		return nil, status.Errorf(codes.Internal, "a container started during the call: %v", err)
	}
	resp := &v1alpha1.MountResponse{}
	for i, name := range awsObjects {
		value := g.Contents[name]
		if current[name] == g.Versions[name] {
			b, err := os.ReadFile(filepath.Join(req.GetTargetPath(), name))
			if err != nil || string(b) != value {
				return nil, status.Errorf(codes.Internal, "failed to reload %s from the mount: %v", name, err)
			}
			p.reads.Add(1)
		}
		if err := selfWriter(req.GetTargetPath(), map[string]string{name: value}); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if i == len(awsObjects)/2 {
			if err := p.probe(first); err != nil {
				return nil, status.Errorf(codes.Internal, "a container started during the call: %v", err)
			}
		}
		resp.ObjectVersion = append(resp.ObjectVersion, &v1alpha1.ObjectVersion{Id: name, Version: g.Versions[name]})
	}
	return resp, nil
}

// awsContent is the content of version v of object name.
func awsContent(name string, v int) string { return name + "@" + strconv.Itoa(v) }

// TestSelfWritingProviderWhileContainersStart: the driver binary refreshes
// a provider that behaves as the existing AWS provider does 50 times with
// random mixes of changed and unchanged objects (none, all, some); every
// refresh succeeds with the right files and versions. Containers start
// back to back in the background and at two points of every provider call
// (a copy of the mount table each): each sees the volume, read-only, one
// complete generation, never a scratch area; during the first publish the
// target has nothing mounted. The e2e suite repeats this against the API
// server, with the pod status (tests/e2e TestSelfWritingProviderRefreshes).
func TestSelfWritingProviderWhileContainersStart(t *testing.T) {
	b := startBinNode(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	const uid = "7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	req := b.publishRequest(uid, "secrets")
	target := req.GetTargetPath()
	hist := harness.NewGenerations(awsObjects...)
	p := &awsLike{}
	p.probe = func(first bool) error {
		p.inCalls.Add(1)
		if first {
			return harness.InContainer(target, func(target string) error {
				m, err := harness.MountAt(target)
				switch {
				case err != nil:
					return fmt.Errorf("read the mount table: %w", err)
				case m != nil:
					return fmt.Errorf("something is mounted at the target during the first publish: %+v", m)
				}
				return nil
			})
		}
		return harness.InContainer(target, hist.SeenFrom(hist.Len()))
	}
	b.prov.set(p.mount)
	g := hist.Next(nil, awsContent)
	p.gen = g
	if err := b.publishOnce(t, req); err != nil {
		t.Fatalf("first publish: %v", err)
	}

	stop := make(chan struct{})
	done := make(chan error, 1)
	var started atomic.Int64
	go func() { done <- hist.StartContainers(target, stop, &started) }()
	stopContainers := sync.OnceValue(func() error { close(stop); return <-done })
	t.Cleanup(func() { _ = stopContainers() })

	for i := range containerRefreshes {
		change := func(string) bool { return rng.IntN(3) == 0 }
		switch i % 10 {
		case 0:
			change = func(string) bool { return false }
		case 1:
			change = func(string) bool { return true }
		}
		g = hist.Next(change, awsContent)
		p.mu.Lock()
		p.gen = g
		p.mu.Unlock()
		if err := b.publishOnce(t, req); err != nil {
			t.Fatalf("refresh %d: %v", i, err)
		}
		if err := harness.Sees(target, awsObjects, func() []harness.Generation { return []harness.Generation{g} }); err != nil {
			t.Fatalf("after refresh %d: %v", i, err)
		}
		rec := readRecord(t, b, req.GetVolumeId())
		if diff := cmp.Diff(g.Versions, rec); diff != "" {
			t.Fatalf("recorded versions after refresh %d (-want +got):\n%s", i, diff)
		}
	}
	if err := stopContainers(); err != nil {
		t.Errorf("a container started during the refreshes: %v", err)
	}
	t.Logf("%d containers started back to back, %d during provider calls; %d objects read back",
		started.Load(), p.inCalls.Load(), p.reads.Load())
	if started.Load() == 0 || p.inCalls.Load() != 2*(containerRefreshes+1) || p.reads.Load() == 0 {
		t.Errorf("the test proved too little: %d containers, %d in calls, %d read back", started.Load(), p.inCalls.Load(), p.reads.Load())
	}
	if left := stagesBeside(t, target); len(left) != 0 {
		t.Errorf("stages left: %v", left)
	}
}

// readRecord returns the object versions of the volume's record.
func readRecord(t *testing.T, b *binNode, volumeID string) map[string]string {
	t.Helper()
	m, err := volume.NewManager(b.stateDir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := m.Lookup(volumeID).LoadRecord()
	if err != nil || rec == nil {
		t.Fatalf("record of %s: %+v (%v)", volumeID, rec, err)
	}
	out := map[string]string{}
	for _, o := range rec.Objects {
		out[o.ID] = o.Version
	}
	return out
}
