package hostile_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// randomKillsPerPhase is how many times the driver is SIGKILLed at a
	// random instant of each phase, spread over randomKillWorkers nodes
	// that run in parallel.
	randomKillsPerPhase = 200
	randomKillWorkers   = 4
)

// killTally counts what the random kills of one phase hit.
type killTally struct {
	answered atomic.Int64 // the call was answered before the kill
	lost     atomic.Int64 // the kill came first: kubelet saw Unavailable
	// What the target showed after the restart: nothing, the old set, the new set.
	none, old, new atomic.Int64
}

func (k *killTally) shown(v, old int) {
	switch v {
	case 0:
		k.none.Add(1)
	case old:
		k.old.Add(1)
	default:
		k.new.Add(1)
	}
}

func (k *killTally) String() string {
	return fmt.Sprintf("%d kills: %d answered first, %d lost (Unavailable); target after restart: %d nothing, %d old set, %d new set",
		k.answered.Load()+k.lost.Load(), k.answered.Load(), k.lost.Load(), k.none.Load(), k.old.Load(), k.new.Load())
}

// randomKill sends SIGKILL to the driver after a random delay of up to 1.5
// times usual while call runs, and restarts the driver once it is dead. The
// call must answer OK or Unavailable.
func (k *killNode) randomKill(t *testing.T, rng *rand.Rand, usual *time.Duration, tally *killTally, call func() error) {
	t.Helper()
	p := k.drv
	delay := time.Duration(rng.Int64N(int64(*usual)*3/2 + 1))
	timer := time.AfterFunc(delay, func() { _ = p.cmd.Process.Signal(syscall.SIGKILL) })
	err := call()
	p.wait(t)
	timer.Stop()
	// The range follows how long calls take on this machine now: it grows
	// while kills land first and shrinks once calls are answered first, so
	// that about a third are answered and the kills cover the whole call.
	switch {
	case err == nil:
		tally.answered.Add(1)
		*usual = *usual * 9 / 10
	case status.Code(err) == codes.Unavailable:
		tally.lost.Add(1)
		*usual = *usual * 21 / 20
	default:
		t.Fatalf("call killed after %s: %v, want OK or Unavailable", delay, err)
	}
	k.restart(t, "")
}

// TestDriverKilledAtRandom SIGKILLs the real driver binary at random
// instants of first publishes, refreshes and unpublishes,
// randomKillsPerPhase times each, and checks after every restart what
// TestDriverKilledAtEveryStep checks after each step. The tallies are in
// the log (and in BENCHMARKS.md).
func TestDriverKilledAtRandom(t *testing.T) {
	driverBinary(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill delays seeded with %d", seed)
	phases := []struct {
		name  string
		trial func(t *testing.T, k *killNode, rng *rand.Rand, usual *time.Duration, tally *killTally, i int)
	}{
		{"first-publish", firstPublishTrial},
		{"refresh", refreshTrial},
		{"unpublish", unpublishTrial},
	}
	for pi, ph := range phases {
		tally := &killTally{}
		t.Run(ph.name, func(t *testing.T) {
			t.Parallel()
			t.Run("workers", func(t *testing.T) {
				for w := range randomKillWorkers {
					t.Run(fmt.Sprint(w), func(t *testing.T) {
						t.Parallel()
						rng := rand.New(rand.NewPCG(seed, uint64(pi*randomKillWorkers+w)))
						k := &killNode{binNode: startBinNode(t)}
						k.version.Store(1)
						k.prov.set(answerVersion(&k.version))
						usual := 2 * time.Millisecond
						for i := range randomKillsPerPhase / randomKillWorkers {
							ph.trial(t, k, rng, &usual, tally, w*1000+i)
						}
					})
				}
			})
			t.Logf("%s: %v", ph.name, tally)
		})
	}
}

// trialRequest is the publish request of a fresh volume of trial i.
func trialRequest(k *killNode, i int) *csi.NodePublishVolumeRequest {
	return k.publishRequest(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), "secrets")
}

func firstPublishTrial(t *testing.T, k *killNode, rng *rand.Rand, usual *time.Duration, tally *killTally, i int) {
	req := trialRequest(k, i)
	k.version.Store(1)
	k.randomKill(t, rng, usual, tally, func() error { return k.publishOnce(t, req) })
	tally.shown(shownVersion(t, req.GetTargetPath(), 1), 0)
	if rng.IntN(2) == 0 {
		if err := k.publishOnce(t, req); err != nil {
			t.Fatalf("trial %d: kubelet's retry of the publish: %v", i, err)
		}
		assertShows(t, req.GetTargetPath(), crashFiles(1))
	}
	if err := k.unpublishOnce(t, req); err != nil {
		t.Fatalf("trial %d: unpublish: %v", i, err)
	}
	k.assertGoneFrom(t, req.GetTargetPath())
}

func refreshTrial(t *testing.T, k *killNode, rng *rand.Rand, usual *time.Duration, tally *killTally, i int) {
	req := trialRequest(k, 0)
	cur := int(k.version.Load())
	if cur == 1 && i%1000 == 0 {
		if err := k.publishOnce(t, req); err != nil {
			t.Fatal(err)
		}
	}
	k.version.Store(int64(cur + 1))
	k.randomKill(t, rng, usual, tally, func() error { return k.publishOnce(t, req) })
	tally.shown(shownVersion(t, req.GetTargetPath(), cur, cur+1), cur)
	if err := k.publishOnce(t, req); err != nil {
		t.Fatalf("trial %d: the next republish: %v", i, err)
	}
	assertShows(t, req.GetTargetPath(), crashFiles(cur+1))
	if t.Failed() {
		t.FailNow()
	}
}

func unpublishTrial(t *testing.T, k *killNode, rng *rand.Rand, usual *time.Duration, tally *killTally, i int) {
	req := trialRequest(k, i)
	k.version.Store(1)
	if err := k.publishOnce(t, req); err != nil {
		t.Fatal(err)
	}
	k.randomKill(t, rng, usual, tally, func() error { return k.unpublishOnce(t, req) })
	tally.shown(shownVersion(t, req.GetTargetPath(), 1), 1)
	if err := k.unpublishOnce(t, req); err != nil {
		t.Fatalf("trial %d: kubelet's retry of the unpublish: %v", i, err)
	}
	k.assertGoneFrom(t, req.GetTargetPath())
}
