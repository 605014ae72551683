package conformance_test

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/harness"
)

// TestTriggersCutBackoffOncePerStep: against a refresh that keeps failing,
// a new trigger value cuts the backoff short once; the next new value,
// right after that attempt failed, waits for the backoff (no provider
// call: the record is untouched and the trigger not handled); once the
// step's retry has failed, a new value may cut the next step short. The
// driver keeps what it needs for that in the volume's record.
func TestTriggersCutBackoffOncePerStep(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	ann := &annotations{}
	h := harness.Start(t, harness.Options{
		Clock: clk,
		Refresh: &rotation.Decider{Node: rotation.NodeDefaults{Enabled: true, Interval: time.Hour},
			Backoff: rotation.Backoff{Initial: time.Minute, Max: time.Hour}, Source: ann},
	})
	h.WriteClass(appClass, appObjects)
	writeApp(h, "v1")
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	h.RemoveObject("api-token") // every refresh fails from now on

	republish := func(trigger string, wantFailures, wantCut int, wantHandled string) {
		t.Helper()
		if trigger != "" {
			ann.setClass(rotation.RefreshAnnotation, trigger)
		}
		publish(t, h, v, appClass) // a failed refresh answers kubelet OK
		rec := mustRecord(t, h, v)
		if rec.Failures != wantFailures || rec.CutBackoff != wantCut || rec.HandledClassRefresh != wantHandled {
			t.Fatalf("after trigger %q: failures %d, cut at %d, handled %q; want %d, %d, %q",
				trigger, rec.Failures, rec.CutBackoff, rec.HandledClassRefresh, wantFailures, wantCut, wantHandled)
		}
	}
	republish("t1", 1, 0, "t1") // a trigger refreshes, and fails: failure 1, no backoff to cut yet
	clk.SetTime(clk.Now().Add(10 * time.Second))
	republish("t2", 2, 1, "t2") // in the 1m backoff: cut short once
	clk.SetTime(clk.Now().Add(10 * time.Second))
	republish("t3", 2, 1, "t2") // right after the cut attempt failed: waits
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	republish("", 3, 1, "t3") // the step's own retry (2m), which also acts on t3, fails
	clk.SetTime(clk.Now().Add(10 * time.Second))
	republish("t4", 4, 3, "t4") // a new step: may be cut short again

	writeApp(h, "v2") // the store is back
	clk.SetTime(clk.Now().Add(time.Hour))
	publish(t, h, v, appClass)
	waitForRecord(t, h, v, func(r *volume.Record) bool { return r.Failures == 0 && r.CutBackoff == 0 })
	assertFiles(t, v.Target, appFiles("v2"))
}
