package conformance_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/tests/harness"
	"github.com/keymount/keymount/tests/poll"
)

// TestRepublishUnchanged: kubelet's periodic republish of a volume whose
// content did not change writes no new generation.
func TestRepublishUnchanged(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	gen := generation(t, v.Target)
	before := mustRecord(t, h, v)

	for range 3 {
		publish(t, h, v, appClass)
	}

	if got := generation(t, v.Target); got != gen {
		t.Errorf("..data -> %s after republishing unchanged content, want the unchanged %s", got, gen)
	}
	assertPublished(t, h, v)
	assertFiles(t, v.Target, appFiles("v1"))
	assertTidy(t, v.Target)
	after := mustRecord(t, h, v)
	if after.Generation != 1 || !after.LastChange.Equal(before.LastChange) {
		t.Errorf("record generation %d lastChange %v, want 1 and the unchanged %v", after.Generation, after.LastChange, before.LastChange)
	}
	if diff := cmp.Diff(before.Objects, after.Objects); diff != "" {
		t.Errorf("recorded objects changed (-before +after):\n%s", diff)
	}
}

// TestRepublishChanged: a republish after the store changed swaps in a new
// generation and removes the old one.
func TestRepublishChanged(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	gen1 := generation(t, v.Target)
	rec1 := mustRecord(t, h, v)

	writeApp(h, "v2")
	publish(t, h, v, appClass)

	gen2 := generation(t, v.Target)
	if gen2 == gen1 {
		t.Fatalf("..data still -> %s after the content changed", gen1)
	}
	assertFiles(t, v.Target, appFiles("v2"))
	if retired := assertTidy(t, v.Target); len(retired) > 1 || (len(retired) == 1 && retired[0] != gen1) {
		t.Errorf("retired generations %v, want at most the previous one, %s", retired, gen1)
	}
	assertPublished(t, h, v)
	rec2 := mustRecord(t, h, v)
	if rec2.Generation != 2 || !rec2.LastChange.After(rec1.LastChange) {
		t.Errorf("record generation %d lastChange %v, want 2 and later than %v", rec2.Generation, rec2.LastChange, rec1.LastChange)
	}
	if cmp.Equal(rec1.Objects, rec2.Objects) {
		t.Errorf("recorded object versions did not change: %v", rec2.Objects)
	}
}

// TestRepublishRemovesRetiredGeneration: the writer keeps a retired
// generation for a grace period (a reader's path lookup in flight may still
// need it), then a later publish removes it.
func TestRepublishRemovesRetiredGeneration(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	gen1 := generation(t, v.Target)
	writeApp(h, "v2")
	publish(t, h, v, appClass)
	gen2 := generation(t, v.Target)

	start := time.Now()
	err := poll.Wait(t.Context(), retiredGenerationDeadline, func(context.Context) (bool, error) {
		publish(t, h, v, appClass)
		_, err := os.Lstat(filepath.Join(v.Target, gen1))
		return errors.Is(err, fs.ErrNotExist), nil
	})
	if err != nil {
		t.Fatalf("old generation %s still present after it was retired: %v", gen1, err)
	}
	t.Logf("old generation removed by a republish %s after it was retired", time.Since(start).Round(time.Millisecond))

	if got := generation(t, v.Target); got != gen2 {
		t.Errorf("..data -> %s after unchanged republishes, want %s", got, gen2)
	}
	if retired := assertTidy(t, v.Target); len(retired) != 0 {
		t.Errorf("retired generations %v left", retired)
	}
	assertFiles(t, v.Target, appFiles("v2"))
}

// TestRepublishObjectSetChanges: the class drops api-token and adds a nested
// file; the new file's link appears, api-token's link disappears.
func TestRepublishObjectSetChanges(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)

	h.WriteObject("extra/cert.pem", "pem")
	h.WriteClass(appClass, `- objectName: db/password
  objectAlias: password
  filePermission: "0600"
- objectName: extra/cert.pem
  objectAlias: tls/cert.pem
  filePermission: "0440"
- objectName: config/app.yaml
`)
	publish(t, h, v, appClass)

	want := appFiles("v1")
	delete(want, "api-token")
	want["tls/cert.pem"] = file{"pem", 0o440}
	assertFiles(t, v.Target, want)
	assertTidy(t, v.Target)
	if _, err := os.Lstat(filepath.Join(v.Target, "api-token")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("api-token link left behind (lstat: %v)", err)
	}
}

// retiredGenerationDeadline bounds how long a retired generation may stay
// while the volume is republished: far above the writer's grace period
// (seconds), so only a generation that is never removed fails the test.
const retiredGenerationDeadline = 60 * time.Second

// TestRepublishKeepsFilesWhenRefreshFails: a republish whose refresh fails
// returns OK and keeps the files the pod has (kubelet would otherwise remove
// the mount, kubernetes/kubernetes#121271), records the failure, and the
// next successful refresh clears it.
func TestRepublishKeepsFilesWhenRefreshFails(t *testing.T) {
	tests := []struct {
		name   string
		spoil  func(t *testing.T, h *harness.Harness)
		repair func(t *testing.T, h *harness.Harness)
	}{
		{
			name:   "object removed from the store",
			spoil:  func(t *testing.T, h *harness.Harness) { h.RemoveObject("api-token") },
			repair: func(t *testing.T, h *harness.Harness) { writeApp(h, "v2") },
		},
		{
			name:   "class deleted",
			spoil:  func(t *testing.T, h *harness.Harness) { h.RemoveClass(appClass) },
			repair: func(t *testing.T, h *harness.Harness) { h.WriteClass(appClass, appObjects); writeApp(h, "v2") },
		},
		{
			// The class keeps its provider (changing it is AlreadyExists, see
			// TestRepublishConflicts); the provider's socket goes away.
			name:  "provider socket gone",
			spoil: func(t *testing.T, h *harness.Harness) { mustRename(t, providerSocket(h), providerSocket(h)+".away") },
			repair: func(t *testing.T, h *harness.Harness) {
				mustRename(t, providerSocket(h)+".away", providerSocket(h))
				writeApp(h, "v2")
			},
		},
		{
			name:   "objects parameter invalid",
			spoil:  func(t *testing.T, h *harness.Harness) { h.WriteClass(appClass, "- objectName: /etc/passwd\n") },
			repair: func(t *testing.T, h *harness.Harness) { h.WriteClass(appClass, appObjects); writeApp(h, "v2") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startApp(t)
			v := h.NewVolume("secrets")
			publish(t, h, v, appClass)
			gen := generation(t, v.Target)

			tt.spoil(t, h)
			publish(t, h, v, appClass) // must succeed

			assertPublished(t, h, v)
			assertFiles(t, v.Target, appFiles("v1"))
			if got := generation(t, v.Target); got != gen {
				t.Errorf("..data -> %s after a failed refresh, want the unchanged %s", got, gen)
			}
			rec := mustRecord(t, h, v)
			if rec.LastError == "" || rec.LastErrorTime.IsZero() || rec.Generation != 1 {
				t.Errorf("record after a failed refresh: lastError %q at %v, generation %d; want the failure recorded, generation 1",
					rec.LastError, rec.LastErrorTime, rec.Generation)
			}

			tt.repair(t, h)
			publish(t, h, v, appClass)
			assertFiles(t, v.Target, appFiles("v2"))
			assertTidy(t, v.Target)
			if rec := mustRecord(t, h, v); rec.LastError != "" || rec.Generation != 2 {
				t.Errorf("record after recovery: lastError %q generation %d, want no error, generation 2", rec.LastError, rec.Generation)
			}
		})
	}
}

// providerSocket is the local provider's socket the driver finds.
func providerSocket(h *harness.Harness) string {
	return filepath.Join(h.ProviderDir, harness.ProviderName+".sock")
}

func mustRename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func mustRecord(t *testing.T, h *harness.Harness, v harness.Volume) *volume.Record {
	t.Helper()
	rec, err := h.Record(v.ID)
	if err != nil || rec == nil {
		t.Fatalf("record of %s: %v, %v", v.ID, rec, err)
	}
	return rec
}
