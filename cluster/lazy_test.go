package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/volume"
)

// waitAttempts waits until the start was tried n times; the deadline only
// fails a stuck test.
func waitAttempts(t *testing.T, tried <-chan struct{}, n int) {
	t.Helper()
	deadline := time.After(time.Minute)
	for i := range n {
		select {
		case <-tried:
		case <-deadline:
			t.Fatalf("%d attempts to connect after a minute, want %d", i, n)
		}
	}
}

// newTried is the channel a start signals each attempt on; it never blocks
// the start.
func newTried() chan struct{} { return make(chan struct{}, 64) }

func signal(tried chan<- struct{}) {
	select {
	case tried <- struct{}{}:
	default:
	}
}

// neverConnects is a start that fails until ctx ends, signalling attempts.
func neverConnects(tried chan<- struct{}) func(context.Context) (*Cluster, error) {
	return func(context.Context) (*Cluster, error) {
		signal(tried)
		return nil, errors.New("connection refused")
	}
}

// TestLazyBeforeConnected: until the API server answers, what needs it
// fails with an error the reporter retries (driver.ErrAPIUnavailable), what
// must not block does not, and the node's defaults apply (no annotations).
func TestLazyBeforeConnected(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tried := newTried()
	l := connectWith(ctx, neverConnects(tried), nil)

	o := &driver.Outcome{VolumeID: "v", First: true}
	if err := l.AfterPublish(ctx, o); !errors.Is(err, driver.ErrAPIUnavailable) {
		t.Errorf("AfterPublish before connected: %v, want ErrAPIUnavailable", err)
	}
	if err := l.AfterUnpublish(ctx, &volume.Record{VolumeID: "v"}); !errors.Is(err, driver.ErrAPIUnavailable) {
		t.Errorf("AfterUnpublish before connected: %v, want ErrAPIUnavailable", err)
	}
	if l.Synced() {
		t.Error("Synced before connected")
	}
	l.SyncMissing(ctx, o) // returns at once: AfterPublish writes it later
	l.Notify(o)           // queued until connected
	if a := l.ClassAnnotations("ns", "c"); a != nil {
		t.Errorf("class annotations before connected: %v", a)
	}
	if a := l.PodAnnotations("ns", "p"); a != nil {
		t.Errorf("pod annotations before connected: %v", a)
	}
	rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer rcancel()
	if _, err := l.Resolve(rctx, "ns", "c"); !errors.Is(err, driver.ErrAPIUnavailable) {
		t.Errorf("Resolve before connected: %v, want ErrAPIUnavailable", err)
	}
	if _, err := l.UpstreamMounted(rctx, "ns", "p", "c", "/t"); !errors.Is(err, driver.ErrAPIUnavailable) {
		t.Errorf("UpstreamMounted before connected: %v, want ErrAPIUnavailable", err)
	}
	// It keeps trying, with backoff.
	waitAttempts(t, tried, 2)
}

// TestLazyStopsWithItsContext: when the driver stops before it connected,
// the attempts end and whoever waits for the connection is released.
func TestLazyStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tried := newTried()
	l := connectWith(ctx, neverConnects(tried), nil)
	waitAttempts(t, tried, 1)

	awaited := make(chan error, 1)
	go func() { _, err := l.await(); awaited <- err }()
	cancel()
	if err := <-awaited; !errors.Is(err, driver.ErrAPIUnavailable) {
		t.Errorf("await after the driver stopped: %v, want ErrAPIUnavailable", err)
	}
	// A caller with no deadline of its own is released too.
	if _, err := l.connected(context.Background()); !errors.Is(err, driver.ErrAPIUnavailable) {
		t.Errorf("connected after the driver stopped: %v", err)
	}
}

// TestLazyConnects: a caller waiting for the connection gets the cluster as soon as the start succeeds, and
// from then on the lazy cluster answers with the real one's state.
func TestLazyConnects(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	started := &Cluster{}
	var attempts atomic.Int32
	tried := newTried()
	l := connectWith(ctx, func(ctx context.Context) (*Cluster, error) {
		defer signal(tried)
		if attempts.Add(1) == 1 {
			return nil, errors.New("API server not up yet")
		}
		select {
		case <-release:
			return started, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}, nil)

	got := make(chan *Cluster, 1)
	waitAttempts(t, tried, 1) // the first, failed attempt has returned
	go func() {
		cl, err := l.await()
		if err != nil {
			t.Errorf("await: %v", err)
		}
		got <- cl
	}()
	close(release)
	if cl := <-got; cl != started {
		t.Fatalf("connected returned %p, want the started cluster %p", cl, started)
	}
	if cl, err := l.connected(context.Background()); err != nil || cl != started {
		t.Fatalf("connected after the start: %p, %v", cl, err)
	}
	if l.Synced() {
		t.Error("Synced while the started cluster's caches are not")
	}
	started.synced.Store(true)
	if !l.Synced() {
		t.Error("not Synced once the started cluster's caches are")
	}
}
