package hostile_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/provider/v1alpha1"
)

const (
	// crashRepublishes is how many changing republishes the driver gets.
	crashRepublishes = 200
	// crashKillEvery: every n-th republish, the driver is killed.
	crashKillEvery = 4
	// crashRepeatEvery: the republish after every n-th one asks for the
	// same version again, so that repairing a volume with unchanged
	// content is exercised too.
	crashRepeatEvery = 8
	// crashMaxDelay bounds the random delay, counted from the moment the
	// provider receives the driver's call, after which the kill is sent.
	crashMaxDelay = 4 * time.Millisecond
)

// crashFiles is version v of the volume: every file carries the version,
// and top-level names come and go between versions, so that a kill between
// the swap of ..data and the update of the top-level links leaves links
// missing or dangling.
func crashFiles(v int) map[string]string {
	s := "v" + strconv.Itoa(v)
	m := map[string]string{
		"common":                   s,
		"nested/deep/file":         s,
		"rot-" + strconv.Itoa(v%3): s,
	}
	for j := range v % 4 {
		m["extra-"+strconv.Itoa(j)] = s
	}
	for j := range 24 {
		m["bulk/f"+strconv.Itoa(j)] = s + strings.Repeat(".", j*97)
	}
	return m
}

// crashVersion is the version of the content asked for at republish i.
func crashVersion(i int) int {
	if i%crashRepeatEvery == 1 {
		return i - 1
	}
	return i
}

// TestDriverSIGKILLedDuringRepublishes runs the driver binary and SIGKILLs
// it at pseudo-random points of 50 of 200 changing republishes: after the
// provider received the call, after a random delay of up to a few
// milliseconds, so the kill lands while the answer travels, while the
// generation is written, between the swap of ..data and the link updates,
// while the record is saved, or just after the call. After every restart
// ..data must name one complete generation (every file of one version, the
// last one acknowledged or the one being written); after the next
// successful republish the volume must show exactly its content with no
// dangling and no temporary link. At the end, unpublish leaves nothing.
func TestDriverSIGKILLedDuringRepublishes(t *testing.T) {
	b := startBinNode(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill delays seeded with %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))

	var version atomic.Int64
	var armed atomic.Pointer[proc]
	var delay atomic.Int64
	b.prov.set(func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		if p := armed.Swap(nil); p != nil {
			// The delay chooses the kill point; nothing waits on it.
			time.AfterFunc(time.Duration(delay.Load()), func() { _ = p.cmd.Process.Signal(syscall.SIGKILL) })
		}
		return respond(filesOf(crashFiles(int(version.Load())))...), nil
	})

	const uid = "0c7a5b1e-1d2f-4a6b-9c8d-7e6f5a4b3c2d"
	req := b.publishRequest(uid, "secrets")
	target := req.GetTargetPath()
	version.Store(1)
	if err := b.publishOnce(t, req); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	assertShows(t, target, crashFiles(1))

	acked, kills, lost, swapped, broken := 1, 0, 0, 0, 0
	for i := 2; i <= crashRepublishes+1; i++ {
		want := crashVersion(i)
		version.Store(int64(want))
		kill := i%crashKillEvery == 0
		if kill {
			delay.Store(rng.Int64N(int64(crashMaxDelay)))
			armed.Store(b.drv)
		}
		err := b.publishOnce(t, req)
		if !kill {
			if err != nil {
				t.Fatalf("republish %d (version %d) after the last restart: %v", i, want, err)
			}
			acked = want
			assertShows(t, target, crashFiles(want))
			if t.Failed() {
				t.Fatalf("republish %d (version %d): volume not repaired", i, want)
			}
			continue
		}
		b.drv.wait(t)
		kills++
		switch {
		case err == nil:
			acked = want
		case status.Code(err) == codes.Unavailable:
			lost++
		default:
			t.Fatalf("republish %d killed mid-call: %v, want OK or Unavailable", i, err)
		}
		if v := assertOneGeneration(t, target, acked, want); err != nil && v == want {
			swapped++ // killed after the swap of ..data, before the answer
		}
		if brokenLinks(target) {
			broken++
		}
		if t.Failed() {
			t.Fatalf("after the kill during republish %d", i)
		}
		b.startDriver(t)
	}
	t.Logf("%d kills: %d before the call was answered, %d of those after the swap of ..data; %d left top-level links to repair",
		kills, lost, swapped, broken)

	if _, err := b.node.NodeUnpublishVolume(t.Context(), &csi.NodeUnpublishVolumeRequest{
		VolumeId: req.GetVolumeId(), TargetPath: target,
	}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	assertNoMounts(t, b.dir)
	des, err := os.ReadDir(filepath.Join(b.stateDir, "volumes"))
	if err != nil || len(des) != 0 {
		t.Errorf("state dir after unpublish: %d entries (%v), want none", len(des), err)
	}
}

// publishOnce sends one NodePublishVolume with kubelet's deadline.
func (b *binNode) publishOnce(t *testing.T, req *csi.NodePublishVolumeRequest) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := b.node.NodePublishVolume(ctx, req)
	return err
}

// assertOneGeneration checks that ..data in target names a generation
// holding exactly the files of version acked or version attempted, and
// returns that version.
func assertOneGeneration(t *testing.T, target string, acked, attempted int) int {
	t.Helper()
	gen, got := generationOf(t, target)
	v, err := strconv.Atoi(strings.TrimPrefix(got["common"], "v"))
	if err != nil || (v != acked && v != attempted) {
		t.Fatalf("..data -> %s holds version %q, want v%d or v%d", gen, got["common"], acked, attempted)
	}
	if diff := cmp.Diff(crashFiles(v), got); diff != "" {
		t.Errorf("..data -> %s is not one complete generation of version %d (-want +got):\n%s", gen, v, diff)
	}
	return v
}

// brokenLinks reports whether a top-level link of target dangles, a
// temporary link is left, or a name of the current generation has no link:
// what a kill between the swap and the link updates leaves.
func brokenLinks(target string) bool {
	des, err := os.ReadDir(target)
	if err != nil {
		return true
	}
	have := map[string]bool{}
	for _, de := range des {
		name := de.Name()
		if name == dataTmpLink || name == nameTmpLink {
			return true
		}
		if _, err := os.Stat(filepath.Join(target, name)); err != nil {
			return true
		}
		have[name] = true
	}
	gen, err := os.ReadDir(filepath.Join(target, dataLink))
	if err != nil {
		return true
	}
	for _, de := range gen {
		if !have[de.Name()] {
			return true
		}
	}
	return false
}
