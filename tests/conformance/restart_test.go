package conformance_test

import (
	"testing"
)

// The driver keeps nothing about a volume in memory that it needs later:
// each test below restarts it (a new Driver over the same state directory,
// nothing carried over) between two calls on the same volume.

// TestRestartThenUnpublish: a volume published by the previous driver
// instance is unpublished completely by the new one.
func TestRestartThenUnpublish(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)

	h.RestartDriver()
	assertPublished(t, h, v)
	unpublish(t, h, v)

	assertGone(t, h, v)
	assertNoMounts(t, h.Dir)
}

// TestRestartThenRepublish: after a restart, a republish with unchanged
// content writes nothing, and one with changed content swaps in a new
// generation, continuing the record of the previous instance.
func TestRestartThenRepublish(t *testing.T) {
	h := startApp(t)
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	gen1 := generation(t, v.Target)
	rec1 := mustRecord(t, h, v)

	h.RestartDriver()
	publish(t, h, v, appClass)
	if got := generation(t, v.Target); got != gen1 {
		t.Errorf("..data -> %s after an unchanged republish across a restart, want %s", got, gen1)
	}

	h.RestartDriver()
	writeApp(h, "v2")
	publish(t, h, v, appClass)

	if got := generation(t, v.Target); got == gen1 {
		t.Errorf("..data still -> %s after a changed republish across a restart", gen1)
	}
	assertPublished(t, h, v)
	assertFiles(t, v.Target, appFiles("v2"))
	assertTidy(t, v.Target)
	rec := mustRecord(t, h, v)
	if rec.Generation != 2 || rec.LastError != "" || !rec.ReadOnly || rec.PodUID != rec1.PodUID {
		t.Errorf("record after restarts: generation %d lastError %q readOnly %v podUID %s; want 2, none, true, %s",
			rec.Generation, rec.LastError, rec.ReadOnly, rec.PodUID, rec1.PodUID)
	}

	h.RestartDriver()
	unpublish(t, h, v)
	assertGone(t, h, v)
}
