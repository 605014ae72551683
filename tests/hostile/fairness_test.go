package hostile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/poll"
)

// Provider calls the driver binary runs at once with its default bounds
// (--provider-concurrency 16, --provider-inflight-bytes 32Mi of 4 MiB
// responses: 8), and how many of them one provider may hold (all but a
// quarter, kept for the others).
const (
	defaultCallSlots = 8
	oneProviderShare = defaultCallSlots - defaultCallSlots/4
)

// TestHungProviderStallsNoOtherBinary is the issue as found, on the real
// driver binary with its default flags: 32 publishes of a provider whose
// calls hang (until --provider-timeout, 60 s), then publishes of another
// provider, 16 at once and 8 one after another, through the CSI socket.
// Every one of the others completes while the hung calls still hang: none
// of the hung publishes has returned when the last of the others does, and
// the hung provider never got more than its share of calls. Once the hung
// provider answers, its publishes complete too.
func TestHungProviderStallsNoOtherBinary(t *testing.T) {
	b := startBinNode(t)
	gate := make(chan struct{})
	var inFlight atomic.Int64
	b.prov.set(func(ctx context.Context, _ *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		select {
		case <-gate:
			return respond(fileOf("hung", "answered at last")), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	other := &scriptProvider{}
	other.set(answer(fileOf("other", "quick")))
	serveProvider(t, b.providerDir, "other", other)
	otherClass := "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: other\nspec:\n  provider: other\n"
	if err := os.WriteFile(filepath.Join(b.classDir, "other.yaml"), []byte(otherClass), 0o600); err != nil {
		t.Fatal(err)
	}

	const hungCalls = 32
	var hungReturned atomic.Int64
	hungErrs := make(chan error, hungCalls)
	for i := range hungCalls {
		req := b.publishRequest(fmt.Sprintf("a%07d-0000-4000-8000-000000000000", i), "secrets")
		go func() {
			_, err := b.node.NodePublishVolume(t.Context(), req)
			hungReturned.Add(1)
			hungErrs <- err
		}()
	}
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	})
	poll.UntilTrue(t, "the hung provider's share of calls in flight", func() bool { return inFlight.Load() == oneProviderShare })

	publish := func(i int, name string) {
		req := b.publishRequest(fmt.Sprintf("b%07d-0000-4000-8000-000000000000", i), name)
		req.VolumeContext[driver.AttrClass] = "other"
		if _, err := b.node.NodePublishVolume(t.Context(), req); err != nil {
			t.Errorf("publish %d of the healthy provider: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { publish(i, "concurrent") })
	}
	wg.Wait()
	for i := range 8 {
		publish(i, "sequential")
	}
	if got := hungReturned.Load(); got != 0 {
		t.Fatalf("%d of the hung provider's publishes returned before the healthy provider's were done: the test proves nothing", got)
	}
	if got := inFlight.Load(); got != oneProviderShare {
		t.Fatalf("the hung provider has %d calls in flight, want its share %d", got, oneProviderShare)
	}
	if got := other.calls.Load(); got != 24 {
		t.Errorf("the healthy provider got %d calls, want 24", got)
	}

	close(gate)
	for range hungCalls {
		if err := <-hungErrs; err != nil {
			t.Errorf("publish of the hung provider once it answers: %v", err)
		}
	}
}
