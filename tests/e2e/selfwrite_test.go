package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/harness"
)

const (
	// selfWriteRefreshes is how many refreshes the self-writing provider
	// gets, each with a random mix of changed and unchanged objects.
	selfWriteRefreshes = 50
	// stagePrefix starts the name of the driver's stage for a provider
	// that writes its own files (volume.StagePrefix).
	stagePrefix = "keymount-stage-"
)

// selfWriteObjects are the objects of the test's class, nested paths
// included, as the AWS provider's aliases may be.
var selfWriteObjects = []string{"db/password", "db/user", "api-key", "tls/cert", "token", "config"}

// awsLikeProvider behaves as the existing AWS provider does in its default
// mode: it returns no files; an object whose version the request lists as
// mounted is read back from target_path (the call fails if it cannot be,
// or reads something else), every other object is "fetched"; then every
// file is written into target_path as a temporary file renamed over its
// name, with the request's permission. During each call it starts a
// container (probe) at the target: a container starting then must see the
// volume.
type awsLikeProvider struct {
	mu      sync.Mutex
	current harness.Generation
	target  string // the pod's target: only the test's probes look at it
	probe   func(target string, first bool) error
	reads   atomic.Int64
	written atomic.Int64
}

func (p *awsLikeProvider) set(g harness.Generation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.current = g
}

func (p *awsLikeProvider) Mount(_ context.Context, req *server.MountRequest) (*server.MountResult, error) {
	p.mu.Lock()
	g := p.current
	p.mu.Unlock()
	if req.TargetPath == p.target || filepath.Dir(req.TargetPath) != filepath.Dir(p.target) ||
		!strings.HasPrefix(filepath.Base(req.TargetPath), stagePrefix) {
		return nil, fmt.Errorf("target_path %s is not the driver's stage beside the target %s", req.TargetPath, p.target)
	}
	first := len(req.CurrentVersions) == 0
	if err := p.probe(p.target, first); err != nil {
		return nil, fmt.Errorf("a container starting before the provider wrote: %w", err)
	}
	values := map[string]string{}
	for _, name := range selfWriteObjects {
		if req.CurrentVersions[name] != g.Versions[name] {
			values[name] = g.Contents[name] // fetched from the store
			continue
		}
		b, err := os.ReadFile(filepath.Join(req.TargetPath, name))
		if err != nil {
			return nil, fmt.Errorf("failed to reload %s from the mount: %w", name, err)
		}
		if string(b) != g.Contents[name] {
			return nil, fmt.Errorf("reloaded %s from the mount: not the mounted version's value", name)
		}
		p.reads.Add(1)
		values[name] = string(b)
	}
	res := &server.MountResult{}
	for i, name := range selfWriteObjects {
		if err := renameInto(req.TargetPath, name, values[name], req.Permission); err != nil {
			return nil, err
		}
		p.written.Add(1)
		if i == len(selfWriteObjects)/2 {
			if err := p.probe(p.target, first); err != nil {
				return nil, fmt.Errorf("a container starting while the provider wrote: %w", err)
			}
		}
		res.Versions = append(res.Versions, server.ObjectVersion{ID: name, Version: g.Versions[name]})
	}
	return res, nil
}

func renameInto(dir, name, value string, mode os.FileMode) error {
	dst := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(name))
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(value)
	if err := errors.Join(err, tmp.Chmod(mode), tmp.Close()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// nothingMounted fails unless target is not a mount point (a first
// publish's target before the volume is bound): never a scratch area.
func nothingMounted(target string) error {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, target, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE, &stx)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return errors.New("something is mounted at the target before the volume is published")
	}
	return nil
}

// newContent is the content of version v of object name: random, so that
// the node's logs are checked never to show it.
func newContent(n *node) func(name string, v int) string {
	return func(name string, v int) string {
		c := name + "@" + strconv.Itoa(v) + "-" + randomHex(6)
		n.forbid(c, "a value the self-writing provider wrote")
		return c
	}
}

// TestSelfWritingProviderRefreshes: a provider that behaves as the existing
// AWS provider does by default (returns no files, reads unchanged objects
// back from target_path, writes with a temporary file and a rename) is
// refreshed 50 times with a random mix of changed and unchanged objects.
// Every refresh succeeds as with the upstream driver: the pod sees the new
// files, the status lists the new versions with Current=True. Meanwhile
// containers start at random instants (a copy of the mount table taken
// back to back in the background, and at two points of every provider
// call): each sees the volume, read-only, one complete generation, never a
// scratch area; during the first publish nothing is mounted at the target.
func TestSelfWritingProviderRefreshes(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	hist := harness.NewGenerations(selfWriteObjects...)
	createObject(t, n.s.ctrl, &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws-like"},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: "awslike"},
	})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "aws-like"})
	target := n.targetPath(pod, "secrets")
	var inCall atomic.Int64
	p := &awsLikeProvider{target: target, probe: func(target string, first bool) error {
		inCall.Add(1)
		if first {
			return harness.InContainer(target, nothingMounted)
		}
		return harness.InContainer(target, hist.SeenFrom(hist.Len()))
	}}
	serveProvider(t, n, "awslike", p)

	g := hist.Next(nil, newContent(n))
	p.set(g)
	n.mustPublish(t, pod, "secrets")
	checkGeneration(t, target, g)

	stop := make(chan struct{})
	probes := make(chan error, 1)
	var started atomic.Int64
	go func() { probes <- hist.StartContainers(target, stop, &started) }()
	stopContainers := sync.OnceValue(func() error { close(stop); return <-probes })
	t.Cleanup(func() { _ = stopContainers() })
	for i := range selfWriteRefreshes {
		var change func(string) bool
		switch i % 10 {
		case 0:
			change = func(string) bool { return false } // nothing changed
		case 1:
			change = func(string) bool { return true } // everything changed
		default:
			change = func(string) bool { return rng.IntN(3) == 0 }
		}
		g = hist.Next(change, newContent(n))
		p.set(g)
		if err := n.publish(t, pod, "secrets"); err != nil {
			t.Fatalf("refresh %d: %v", i, err)
		}
		checkGeneration(t, target, g)
		n.s.waitForStatus(t, pod, "aws-like", objectVersions(g.Versions),
			conditionIs(secretsstorev1.ConditionCurrent, metav1.ConditionTrue))
	}
	if err := stopContainers(); err != nil {
		t.Errorf("a container started during the refreshes: %v", err)
	}
	t.Logf("%d containers started back to back, %d during provider calls; %d objects read back, %d files written",
		started.Load(), inCall.Load(), p.reads.Load(), p.written.Load())
	if started.Load() < selfWriteRefreshes || inCall.Load() != 2*(selfWriteRefreshes+1) || p.reads.Load() == 0 {
		t.Errorf("started %d containers in the background and %d in calls, %d objects read back: the test proved too little",
			started.Load(), inCall.Load(), p.reads.Load())
	}
	entries, err := os.ReadDir(filepath.Dir(target))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), stagePrefix) {
			t.Errorf("stage %s left beside the target", e.Name())
		}
	}
	n.mustUnpublish(t, pod, "secrets")
}

// checkGeneration fails the test unless target shows exactly g's files.
func checkGeneration(t *testing.T, target string, g harness.Generation) {
	t.Helper()
	if err := harness.Sees(target, selfWriteObjects, func() []harness.Generation { return []harness.Generation{g} }); err != nil {
		t.Fatalf("after the publish: %v", err)
	}
	for name, want := range g.Contents {
		if got := readFile(t, target, name); got != want {
			t.Fatalf("%s = %q, want %q", name, got, want)
		}
	}
}
