package conformance_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/tests/harness"
)

// TestRepublishConflicts: a republish that would change what a published
// volume is (its target, class or provider) is AlreadyExists, and the
// volume stays exactly as it was: same mounts, files, generation and record.
// The unchanged republish still works afterwards.
func TestRepublishConflicts(t *testing.T) {
	tests := []struct {
		name    string
		publish func(t *testing.T, h *harness.Harness, v harness.Volume) error
		mention []string
	}{
		{
			name: "another class",
			publish: func(t *testing.T, h *harness.Harness, v harness.Volume) error {
				h.WriteObject("other", "other-contents")
				h.WriteClass("other", harness.ObjectsYAML("other"))
				return h.Publish(t.Context(), v, "other", true)
			},
			mention: []string{`"app"`, `"other"`},
		},
		{
			name: "another target of the same pod",
			publish: func(t *testing.T, h *harness.Harness, v harness.Volume) error {
				req := h.PublishRequest(v.ID, h.TargetPath(v.Pod.UID, "elsewhere"), appClass, true)
				_, err := h.Node.NodePublishVolume(t.Context(), req)
				return err
			},
			mention: []string{"elsewhere"},
		},
		{
			name: "the class switches provider",
			publish: func(t *testing.T, h *harness.Harness, v harness.Volume) error {
				h.WriteClassFor(appClass, "vault", map[string]string{"objects": appObjects})
				err := h.Publish(t.Context(), v, appClass, true)
				h.WriteClass(appClass, appObjects)
				return err
			},
			mention: []string{`"local"`, `"vault"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startApp(t)
			v := h.NewVolume("secrets")
			publish(t, h, v, appClass)
			gen := generation(t, v.Target)
			before := mustRecord(t, h, v)

			writeApp(h, "v2")
			err := tt.publish(t, h, v)

			assertCode(t, err, codes.AlreadyExists, tt.mention...)
			assertPublished(t, h, v)
			assertFiles(t, v.Target, appFiles("v1"))
			if got := generation(t, v.Target); got != gen {
				t.Errorf("..data -> %s after a refused republish, want the unchanged %s", got, gen)
			}
			if diff := cmp.Diff(before, mustRecord(t, h, v)); diff != "" {
				t.Errorf("record changed by a refused republish (-before +after):\n%s", diff)
			}
			assertNoMounts(t, h.TargetPath(v.Pod.UID, "elsewhere"))

			publish(t, h, v, appClass)
			assertFiles(t, v.Target, appFiles("v2"))
			unpublish(t, h, v)
			assertGone(t, h, v)
		})
	}
}

// TestPublishOntoAnotherVolumesTarget: a volume ID published at the target
// another volume shows is AlreadyExists; unpublishing that volume ID at that
// target then succeeds without touching the other volume, which the target
// does not show as the caller's.
func TestPublishOntoAnotherVolumesTarget(t *testing.T) {
	h := startApp(t)
	a := h.NewVolume("secrets")
	publish(t, h, a, appClass)
	intruder := a
	intruder.ID = harness.VolumeID(a.Pod.UID, "intruder")

	err := h.Publish(t.Context(), intruder, appClass, true)

	assertCode(t, err, codes.AlreadyExists, a.Target)
	assertPublished(t, h, a)
	assertFiles(t, a.Target, appFiles("v1"))
	if rec, err := h.Record(intruder.ID); rec != nil || err != nil {
		t.Errorf("record of the refused volume: %v, %v", rec, err)
	}
	assertNoMounts(t, h.VolumeDir(intruder.ID))

	unpublish(t, h, intruder)
	assertPublished(t, h, a)
	assertFiles(t, a.Target, appFiles("v1"))

	unpublish(t, h, a)
	assertGone(t, h, a)
	assertNoMounts(t, h.Dir)
}
