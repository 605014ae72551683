package hostile_test

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/harness"
)

// providerCall is the kill point inside the provider call: the test's
// provider kills the driver while it waits for the answer (with a
// provider that may write its own files, while its stage is mounted beside
// the target).
const providerCall = "provider.call"

// The steps of each phase, in the order the driver runs them; each name
// but providerCall is a killpoint.Reached of the driver.
var (
	firstPublishPoints = []string{
		"publish.locked", "publish.checked-target", "volume.made-dir", "volume.mounted-tmpfs", "volume.made-data-dir",
		providerCall, "publish.provider-answered", "write.generation", "write.linked", "write.swapped", "write.cleaned",
		"record.written", "record.saved", "volume.bound", "publish.done",
	}
	refreshPoints = []string{
		"publish.locked", providerCall, "publish.provider-answered", "write.generation", "write.linked",
		"write.swapped", "write.cleaned", "record.written", "record.saved", "publish.done",
	}
	unpublishPoints = []string{"unpublish.locked", "volume.unbound", "volume.unmounted-tmpfs", "unpublish.done"}
)

// killNode is a node running the killpoints build of the driver, whose
// provider answers with crashFiles(version).
type killNode struct {
	*binNode
	version atomic.Int64
	// armed is killed from inside the next provider call.
	armed atomic.Pointer[proc]
}

func startKillNode(t *testing.T) *killNode {
	t.Helper()
	k := &killNode{binNode: startBinNodeWith(t, killpointBinary(t))}
	k.version.Store(1)
	answer := answerVersion(&k.version)
	k.prov.set(func(ctx context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		if p := k.armed.Swap(nil); p != nil {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.exited
			return nil, status.Error(codes.Unavailable, "the driver died in the call")
		}
		return answer(ctx, req)
	})
	return k
}

// answerVersion answers every call with crashFiles of the version now set.
func answerVersion(version *atomic.Int64) script {
	return func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		return respond(filesOf(crashFiles(int(version.Load())))...), nil
	}
}

// restart kills the running driver (if it still runs) and starts it again,
// dying at point ("" for none).
func (k *killNode) restart(t *testing.T, point string) {
	t.Helper()
	k.drv.kill(t)
	k.killpoint = point
	k.startDriver(t)
}

// killAt runs call with a driver that dies at point, checks that it died
// there, and starts a driver without kill point, as the DaemonSet does.
func (k *killNode) killAt(t *testing.T, point, target string, call func() error) {
	t.Helper()
	if point == providerCall {
		k.restart(t, "")
		k.armed.Store(k.drv)
	} else {
		k.restart(t, point)
	}
	err := call()
	k.drv.wait(t)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("call killed at %s: %v, want Unavailable", point, err)
	}
	var exit *exec.ExitError
	if !errors.As(k.drv.err, &exit) || !killedBySIGKILL(exit) {
		t.Fatalf("driver to be killed at %s exited with %v\n%s", point, k.drv.err, k.drv.out)
	}
	if point != providerCall && !strings.Contains(k.drv.out.String(), "killpoint "+point+"\n") {
		t.Fatalf("driver was not killed at %s:\n%s", point, k.drv.out)
	}
	assertCompleteAtCrash(t, target, filepath.Join(k.stateDir, "volumes", "stage"))
	k.restart(t, "")
}

// assertCompleteAtCrash checks what the pod sees right after the kill,
// before any restart: nothing, or a generation holding one complete
// version whose every name is linked and resolves. Only a name of the
// other version may dangle until the driver is back.
// A provider's stage is never mounted at the target (it is beside it), so
// a stage found there fails the check.
func assertCompleteAtCrash(t *testing.T, target, stageSource string) {
	t.Helper()
	m, err := harness.MountAt(target)
	if err != nil || m == nil {
		return
	}
	if m.Source == stageSource {
		t.Fatalf("the driver's provider stage is on the target at the crash")
	}
	if _, err := os.Lstat(filepath.Join(target, dataLink)); errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the target is mounted and has no %s", dataLink)
	}
	gen, files := generationOf(t, target)
	v, _ := strconv.Atoi(strings.TrimPrefix(files["common"], "v"))
	if !maps.Equal(files, crashFiles(v)) {
		t.Fatalf("%s -> %s is not one complete version: %v", dataLink, gen, slices.Sorted(maps.Keys(files)))
	}
	for p, contents := range files {
		if data, err := os.ReadFile(filepath.Join(target, p)); err != nil || string(data) != contents {
			t.Errorf("at the crash, %s through the target: %.40q (%v), want %.40q", p, data, err, contents)
		}
	}
}

func killedBySIGKILL(exit *exec.ExitError) bool {
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (k *killNode) unpublishOnce(t *testing.T, req *csi.NodePublishVolumeRequest) error {
	t.Helper()
	_, err := k.node.NodeUnpublishVolume(t.Context(), &csi.NodeUnpublishVolumeRequest{
		VolumeId: req.GetVolumeId(), TargetPath: req.GetTargetPath(),
	})
	return err
}

// shownVersion returns the version the target shows after a restart, 0 for
// none, checking that it is one complete set with no dangling or
// temporary link: nothing mounted and nothing visible, or exactly
// crashFiles of one of versions.
func shownVersion(t *testing.T, target string, versions ...int) int {
	t.Helper()
	if m, err := harness.MountAt(target); err != nil || m == nil {
		names, err := os.ReadDir(target)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("read target %s: %v", target, err)
		}
		if len(names) != 0 {
			t.Fatalf("target %s is no mount but shows %d entries", target, len(names))
		}
		return 0
	}
	data, err := os.ReadFile(filepath.Join(target, "common"))
	if err != nil {
		t.Fatalf("the target is mounted but shows no file: %v", err)
	}
	v, _ := strconv.Atoi(strings.TrimPrefix(string(data), "v"))
	for _, want := range versions {
		if v == want {
			assertShows(t, target, crashFiles(v))
			return v
		}
	}
	t.Fatalf("the target shows version %q, want one of %v", data, versions)
	return 0
}

// assertGoneFrom checks that nothing is mounted at or below the target or
// the state directory and that no volume directory is left.
func (k *killNode) assertGoneFrom(t *testing.T, target string) {
	t.Helper()
	assertNoMounts(t, target)
	assertNoMounts(t, k.stateDir)
	des, err := os.ReadDir(filepath.Join(k.stateDir, "volumes"))
	if err != nil || len(des) != 0 {
		t.Errorf("state dir after unpublish: %d entries (%v), want none", len(des), err)
	}
}

// TestDriverKilledAtEveryStep kills the driver binary at every step of a
// first publish, a refresh and an unpublish, and checks what kubelet and
// the pod find after the DaemonSet restarted it: the target shows nothing
// or one complete set of files (old or new, no dangling or temporary
// link), kubelet's next call (a publish retry, the next republish, an
// unpublish) succeeds, and an unpublish leaves no mount at the target or in
// the state directory.
func TestDriverKilledAtEveryStep(t *testing.T) {
	killpointBinary(t) // build once, before the parallel subtests
	for _, point := range firstPublishPoints {
		for _, next := range []string{"retry", "unpublish"} {
			t.Run("first-publish/"+point+"/"+next, func(t *testing.T) {
				t.Parallel()
				k := startKillNode(t)
				req := k.publishRequest("0c7a5b1e-1d2f-4a6b-9c8d-7e6f5a4b3c2d", "secrets")
				k.killAt(t, point, req.GetTargetPath(), func() error { return k.publishOnce(t, req) })
				shownVersion(t, req.GetTargetPath(), 1)
				if next == "retry" {
					if err := k.publishOnce(t, req); err != nil {
						t.Fatalf("kubelet's retry of the publish: %v", err)
					}
					assertShows(t, req.GetTargetPath(), crashFiles(1))
				}
				if err := k.unpublishOnce(t, req); err != nil {
					t.Fatalf("unpublish: %v", err)
				}
				k.assertGoneFrom(t, req.GetTargetPath())
			})
		}
	}
	for _, point := range refreshPoints {
		t.Run("refresh/"+point, func(t *testing.T) {
			t.Parallel()
			k := startKillNode(t)
			req := k.publishRequest("1d8b6c2f-2e3a-4b7c-8d9e-8f7a6b5c4d3e", "secrets")
			if err := k.publishOnce(t, req); err != nil {
				t.Fatal(err)
			}
			k.version.Store(2)
			k.killAt(t, point, req.GetTargetPath(), func() error { return k.publishOnce(t, req) })
			shownVersion(t, req.GetTargetPath(), 1, 2)
			if err := k.publishOnce(t, req); err != nil {
				t.Fatalf("the next republish: %v", err)
			}
			assertShows(t, req.GetTargetPath(), crashFiles(2))
			if err := k.unpublishOnce(t, req); err != nil {
				t.Fatalf("unpublish: %v", err)
			}
			k.assertGoneFrom(t, req.GetTargetPath())
		})
	}
	for _, point := range unpublishPoints {
		t.Run("unpublish/"+point, func(t *testing.T) {
			t.Parallel()
			k := startKillNode(t)
			req := k.publishRequest("2e9c7d3a-3f4b-4c8d-9e0f-9a8b7c6d5e4f", "secrets")
			if err := k.publishOnce(t, req); err != nil {
				t.Fatal(err)
			}
			k.killAt(t, point, req.GetTargetPath(), func() error { return k.unpublishOnce(t, req) })
			shownVersion(t, req.GetTargetPath(), 1)
			if err := k.unpublishOnce(t, req); err != nil {
				t.Fatalf("kubelet's retry of the unpublish: %v", err)
			}
			k.assertGoneFrom(t, req.GetTargetPath())
		})
	}
}
