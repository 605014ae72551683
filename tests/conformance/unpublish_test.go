package conformance_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/keymount/keymount/tests/harness"
)

func TestUnpublish(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)

	unpublish(t, h, v)

	assertGone(t, h, v)
	assertNoMounts(t, h.StateDir)
	// Kubelet's directory of the volume stays: it is kubelet's to remove.
	if _, err := os.Stat(filepath.Dir(v.Target)); err != nil {
		t.Errorf("the target's parent directory was removed: %v", err)
	}
}

func TestUnpublishTwice(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)

	unpublish(t, h, v)
	unpublish(t, h, v)

	assertGone(t, h, v)
}

// TestUnpublishNeverPublished: kubelet may unpublish a volume whose publish
// never succeeded, or that another driver instance already removed.
func TestUnpublishNeverPublished(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")

	unpublish(t, h, v)

	assertGone(t, h, v)
}

// TestUnpublishKeepsOtherVolumes: unpublishing one pod's volume leaves the
// other pods' volumes alone.
func TestUnpublishKeepsOtherVolumes(t *testing.T) {
	h := startApp(t)
	a, b := h.NewVolume("secrets"), h.NewVolume("secrets")
	publish(t, h, a, appClass)
	publish(t, h, b, appClass)

	unpublish(t, h, a)

	assertGone(t, h, a)
	assertPublished(t, h, b)
	assertFiles(t, b.Target, appFiles("v1"))
	unpublish(t, h, b)
	assertGone(t, h, b)
	assertNoMounts(t, h.Dir)
}

// TestUnpublishTouchesOnlyItsVolume: an unpublish naming a path the
// volume's record does not name, or a path that is not a kubelet target
// path, succeeds and leaves everything as it is: the driver acts only on
// what its record says it mounted.
func TestUnpublishTouchesOnlyItsVolume(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	other := h.NewVolume("secrets")
	publish(t, h, other, appClass)
	plain := filepath.Join(h.Dir, "plain")
	mustWrite(t, filepath.Join(plain, "keep"), "keep")

	for name, path := range map[string]string{
		"another volume's target":              other.Target,
		"the target's parent":                  filepath.Dir(v.Target),
		"a directory outside the kubelet root": plain,
		"a made-up target of the same pod":     h.TargetPath(v.Pod.UID, "nothing"),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := h.Node.NodeUnpublishVolume(t.Context(), harness.UnpublishRequest(v.ID, path)); err != nil {
				t.Fatalf("NodeUnpublishVolume(%s): %v, want OK", path, err)
			}
			assertPublished(t, h, v)
			assertFiles(t, v.Target, appFiles("v1"))
			assertPublished(t, h, other)
			if _, err := os.Stat(filepath.Join(plain, "keep")); err != nil {
				t.Errorf("%s touched: %v", plain, err)
			}
		})
	}
	unpublish(t, h, v)
	unpublish(t, h, other)
	assertGone(t, h, v)
	assertGone(t, h, other)
}
