package hostile_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/tests/harness"
)

// childProvider is the provider name and class of the provider child.
const childProvider = "child"

// TestProviderDiesMidCall runs the provider as a child process that exits
// after reading the driver's Mount request, before answering. A first
// publish fails with a code kubelet retries and leaves no mount; once a
// provider serves on the socket again, publishing works (kubelet retries
// only Unavailable meanwhile). A republish whose provider dies keeps the
// files and succeeds.
func TestProviderDiesMidCall(t *testing.T) {
	h := harness.Start(t, harness.Options{})
	h.WriteClassFor(childProvider, childProvider, nil)
	sock := filepath.Join(h.ProviderDir, childProvider+".sock")
	v := h.NewVolume("secrets")

	dying := startChild(t, sock, childDies)
	err := h.Publish(t.Context(), v, childProvider, true)
	assertDied(t, dying)
	if err == nil {
		t.Fatal("publish whose provider died mid-call succeeded")
	}
	if c := status.Code(err); c != codes.Unavailable && c != codes.Internal {
		t.Errorf("publish whose provider died mid-call: %v, want Unavailable (or Internal)", err)
	}
	assertNotPublished(t, h, v)
	assertStateEmpty(t, h)

	serving := startChild(t, sock, childServes)
	publishUntilServed(t, h, v)
	assertShows(t, v.Target, map[string]string{childFile: childAlive})

	serving.kill(t)
	dying = startChild(t, sock, childDies)
	if err := h.Publish(t.Context(), v, childProvider, true); err != nil {
		t.Errorf("republish whose provider died mid-call: %v, want OK with the files kept", err)
	}
	assertDied(t, dying)
	assertShows(t, v.Target, map[string]string{childFile: childAlive})
	rec, err := h.Record(v.ID)
	if err != nil || rec == nil || rec.LastError == "" {
		t.Errorf("record after the provider died in a refresh: %+v (%v), want lastError", rec, err)
	}

	if err := h.Unpublish(t.Context(), v); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	assertNoMounts(t, h.Dir)
}

// assertDied checks that the child exited with childDiedCode: it died in
// the call, as planned, not of something else.
func assertDied(t *testing.T, p *proc) {
	t.Helper()
	p.wait(t)
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() != childDiedCode {
		t.Fatalf("provider child ended with %v, want exit code %d\n%s", p.err, childDiedCode, p.out)
	}
}

// publishUntilServed publishes v the way kubelet does after a failure:
// again while the answer is Unavailable (the driver's connection to the
// provider is still backing off), until waitLimit.
func publishUntilServed(t *testing.T, h *harness.Harness, v harness.Volume) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := h.Publish(ctx, v, childProvider, true)
		switch {
		case err == nil:
			if attempt > 1 {
				t.Logf("publish succeeded at attempt %d after the provider restarted", attempt)
			}
			return
		case status.Code(err) != codes.Unavailable || ctx.Err() != nil:
			t.Fatalf("publish after the provider restarted, attempt %d: %v", attempt, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond): // kubelet's retry backoff, shortened
		}
	}
}
