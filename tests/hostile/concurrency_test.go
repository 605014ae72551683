package hostile_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/tests/harness"
)

// concurrentVolumes is how many volumes are published and unpublished at
// once; racedVolumes get a publish and an unpublish racing each other.
const (
	concurrentVolumes = 200
	racedVolumes      = 50
)

// TestConcurrentPublishUnpublishLeaksNoMount sends 200 publishes at once
// through the socket, each followed by a check of its own content and an
// unpublish, then races a publish against an unpublish on each of 50 more
// volumes (the loser may only be told Aborted, which kubelet retries) and
// unpublishes those once more. Afterwards no mount is left under the
// harness directory, and no volume directory in the state directory.
func TestConcurrentPublishUnpublishLeaksNoMount(t *testing.T) {
	n := startNode(t, harness.Options{})
	n.prov.set(answerPodUID())
	vols := make([]harness.Volume, concurrentVolumes+racedVolumes)
	for i := range vols {
		vols[i] = n.NewVolume("secrets")
	}

	var wg sync.WaitGroup
	for _, v := range vols[:concurrentVolumes] {
		wg.Go(func() {
			if err := n.Publish(t.Context(), v, className, true); err != nil {
				t.Errorf("publish %s: %v", v.Pod.UID, err)
				return
			}
			if got, err := os.ReadFile(filepath.Join(v.Target, "uid")); err != nil || string(got) != v.Pod.UID {
				t.Errorf("volume of pod %s shows %q (%v), want its own pod UID", v.Pod.UID, got, err)
			}
			if err := n.Unpublish(t.Context(), v); err != nil {
				t.Errorf("unpublish %s: %v", v.Pod.UID, err)
			}
		})
	}
	for _, v := range vols[concurrentVolumes:] {
		wg.Go(func() { raced(t, "publish", n.Publish(t.Context(), v, className, true)) })
		wg.Go(func() { raced(t, "unpublish", n.Unpublish(t.Context(), v)) })
	}
	wg.Wait()
	for _, v := range vols[concurrentVolumes:] {
		n.mustUnpublish(t, v)
	}

	assertNoMounts(t, n.Dir)
	assertStateEmpty(t, n.Harness)
	for _, v := range vols {
		if _, err := os.Lstat(v.Target); err == nil {
			t.Errorf("target %s left behind", v.Target)
		}
	}
}

// raced checks the outcome of a call racing another on the same volume:
// OK, or Aborted for the one that found the volume busy.
func raced(t *testing.T, op string, err error) {
	if err != nil && status.Code(err) != codes.Aborted {
		t.Errorf("%s racing another call on its volume: %v, want OK or Aborted", op, err)
	}
}
