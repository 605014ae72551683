package hostile_test

import (
	"context"
	"errors"
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
	"github.com/keymount/keymount/tests/harness"
)

const (
	// selfWriteKills is how many calls of a self-writing provider the
	// driver is killed in, per phase (first publish, refresh).
	selfWriteKills = 12
	// stagePrefix starts the name of the driver's stage for a provider
	// that writes its own files (volume.StagePrefix).
	stagePrefix = "keymount-stage-"
)

// selfWriteFiles is version v of a volume a self-writing provider writes:
// a fixed set of names (such a provider's stage starts with the volume's
// files, so names it stops writing would stay, as with the upstream
// driver), nested, every file carrying the version.
func selfWriteFiles(v int) map[string]string {
	s := "v" + strconv.Itoa(v)
	m := map[string]string{"common": s, "nested/deep/file": s}
	for j := range 12 {
		m["bulk/f"+strconv.Itoa(j)] = s + strings.Repeat(".", j*131)
	}
	return m
}

// selfWriter writes files into dir as the existing AWS provider does: a
// temporary file renamed over each name.
func selfWriter(dir string, files map[string]string) error {
	for name, content := range files {
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		tmp, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(name))
		if err != nil {
			return err
		}
		_, err = tmp.WriteString(content)
		if err := errors.Join(err, tmp.Chmod(0o644), tmp.Close(), os.Rename(tmp.Name(), dst)); err != nil {
			return err
		}
	}
	return nil
}

// selfWriteKiller is a self-writing provider that can kill the driver
// binary during its call: from inside the call (the stage is mounted then,
// for certain), or a random delay after the call arrived (while the
// answer travels, the stage is read, unmounted, the generation written).
type selfWriteKiller struct {
	version atomic.Int64
	inCall  atomic.Pointer[proc]
	armed   atomic.Pointer[proc]
	delay   atomic.Int64
	stages  atomic.Int64 // calls whose target_path was a stage beside the target
}

func (k *selfWriteKiller) mount(_ context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	v := int(k.version.Load())
	if strings.HasPrefix(filepath.Base(req.GetTargetPath()), stagePrefix) {
		k.stages.Add(1)
	}
	if err := selfWriter(req.GetTargetPath(), selfWriteFiles(v)); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if p := k.inCall.Swap(nil); p != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		return nil, status.Error(codes.Unavailable, "the driver was killed")
	}
	if p := k.armed.Swap(nil); p != nil {
		// The delay chooses the kill point; nothing waits on it.
		time.AfterFunc(time.Duration(k.delay.Load()), func() { _ = p.cmd.Process.Signal(syscall.SIGKILL) })
	}
	return &v1alpha1.MountResponse{ObjectVersion: []*v1alpha1.ObjectVersion{{Id: "obj", Version: strconv.Itoa(v)}}}, nil
}

// stagesBeside lists the stage directories beside target.
func stagesBeside(t *testing.T, target string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Dir(target))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), stagePrefix) {
			out = append(out, de.Name())
		}
	}
	return out
}

// assertVolumeOrNothing checks that target shows nothing (a first publish
// that never got to bind it) or the volume: read-only, one complete
// generation of a version in want; never the provider's stage.
func assertVolumeOrNothing(t *testing.T, target string, want ...int) {
	t.Helper()
	m, err := harness.MountAt(target)
	if err != nil {
		t.Fatal(err)
	}
	if m == nil {
		return
	}
	if !harness.HasOption(m, "ro") {
		t.Fatalf("the target's mount %q is writable", m.Options)
	}
	_, got := generationOf(t, target)
	for _, v := range want {
		if cmp.Equal(got, selfWriteFiles(v)) {
			return
		}
	}
	t.Fatalf("the target shows %d files that are no complete generation of versions %v", len(got), want)
}

// killSelfWriting runs one publish of version v during which the driver
// is killed, alternately from inside the provider's call and a random delay
// after it arrived, and restarts the driver. It checks what the kill left
// (nothing at the target, or one complete generation of the versions in
// ok) and that the restarted driver removed every stage.
func killSelfWriting(t *testing.T, b *binNode, k *selfWriteKiller, req *csi.NodePublishVolumeRequest, i, v int, rng *rand.Rand, ok ...int) (leftStage bool) {
	t.Helper()
	target := req.GetTargetPath()
	k.version.Store(int64(v))
	if i%2 == 0 {
		k.inCall.Store(b.drv)
	} else {
		k.delay.Store(rng.Int64N(int64(crashMaxDelay)))
		k.armed.Store(b.drv)
	}
	err := b.publishOnce(t, req)
	b.drv.wait(t)
	if err != nil && status.Code(err) != codes.Unavailable {
		t.Fatalf("publish %d killed mid-call: %v, want OK or Unavailable", i, err)
	}
	assertVolumeOrNothing(t, target, ok...)
	leftStage = len(stagesBeside(t, target)) > 0
	if i%2 == 0 && !leftStage {
		t.Fatalf("kill %d inside the call left no stage: the test proves nothing", i)
	}
	b.startDriver(t)
	if left := stagesBeside(t, target); len(left) != 0 {
		t.Fatalf("the restarted driver left the stages %v", left)
	}
	if ms, err := harness.Mounts(filepath.Dir(target)); err != nil || len(ms) > 1 {
		t.Fatalf("mounts in the volume directory after the restart: %d (%v), want at most the target", len(ms), err)
	}
	return leftStage
}

// TestDriverSIGKILLedDuringSelfWritingCalls kills the driver binary during
// the calls of a provider that writes its own files (the existing AWS
// provider's default): 12 times during a first publish and 12 times during
// refreshes, half of them from inside the provider's call, while the stage
// is certainly mounted, half a random delay after the call arrived. After
// every kill the target shows nothing (first publish) or the volume,
// read-only, one complete generation — never the stage; the restarted
// driver removes the stage; the retried publish succeeds with the right
// files; unpublish leaves nothing kubelet could not remove.
func TestDriverSIGKILLedDuringSelfWritingCalls(t *testing.T) {
	b := startBinNode(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill delays seeded with %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	k := &selfWriteKiller{}
	b.prov.set(k.mount)
	const uid = "5e1f0a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
	req := b.publishRequest(uid, "secrets")
	target := req.GetTargetPath()

	stagesLeft := 0
	for i := range selfWriteKills {
		if killSelfWriting(t, b, k, req, i, 1, rng, 1) {
			stagesLeft++
		}
	}
	k.version.Store(1)
	if err := b.publishOnce(t, req); err != nil {
		t.Fatalf("first publish after %d kills: %v", selfWriteKills, err)
	}
	assertShows(t, target, selfWriteFiles(1))

	acked := 1
	for i := range selfWriteKills {
		v := acked + 1
		if killSelfWriting(t, b, k, req, i, v, rng, acked, v) {
			stagesLeft++
		}
		// The next refresh after the restart succeeds with its files.
		k.version.Store(int64(v + 1))
		if err := b.publishOnce(t, req); err != nil {
			t.Fatalf("refresh after kill %d: %v", i, err)
		}
		acked = v + 1
		assertShows(t, target, selfWriteFiles(acked))
		if m, err := harness.MountAt(target); err != nil || m == nil || !harness.HasOption(m, "ro") {
			t.Fatalf("the target after refresh %d: %+v (%v), want a read-only mount", i, m, err)
		}
	}
	t.Logf("%d kills, %d left a stage the restarted driver removed; %d calls had a stage", 2*selfWriteKills, stagesLeft, k.stages.Load())

	if _, err := b.node.NodeUnpublishVolume(t.Context(), &csi.NodeUnpublishVolumeRequest{
		VolumeId: req.GetVolumeId(), TargetPath: target,
	}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	assertNoMounts(t, b.dir)
	// What kubelet does after a successful unpublish.
	if err := os.Remove(filepath.Dir(target)); err != nil {
		t.Errorf("kubelet cannot remove the volume directory: %v", err)
	}
	des, err := os.ReadDir(filepath.Join(b.stateDir, "volumes"))
	if err != nil || len(des) != 0 {
		t.Errorf("state dir after unpublish: %d entries (%v), want none", len(des), err)
	}
}
