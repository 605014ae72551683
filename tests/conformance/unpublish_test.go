package conformance_test

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUnpublish(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass, false)

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
	publish(t, h, v, appClass, false)

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
	publish(t, h, a, appClass, false)
	publish(t, h, b, appClass, true)

	unpublish(t, h, a)

	assertGone(t, h, a)
	assertPublished(t, h, b, true)
	assertFiles(t, b.Target, appFiles("v1"))
	unpublish(t, h, b)
	assertGone(t, h, b)
	assertNoMounts(t, h.Dir)
}
