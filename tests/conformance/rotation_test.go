package conformance_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/harness"
	"github.com/keymount/keymount/tests/poll"
)

// annotations stands in for the cluster's caches: the annotations of the
// classes and pods a test sets.
type annotations struct {
	mu         sync.Mutex
	class, pod map[string]string
}

func (a *annotations) ClassAnnotations(_, _ string) map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.class)
}

func (a *annotations) PodAnnotations(_, _ string) map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.pod)
}

func (a *annotations) setClass(k, v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.class == nil {
		a.class = map[string]string{}
	}
	a.class[k] = v
}

func (a *annotations) setPod(k, v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pod == nil {
		a.pod = map[string]string{}
	}
	a.pod[k] = v
}

// waitForFiles waits until target shows want's contents, then checks it
// fully; it fails after a deadline only a stuck test reaches.
func waitForFiles(t *testing.T, target string, want map[string]file) {
	t.Helper()
	poll.UntilTrue(t, "the volume at "+target+" to show the wanted files", func() bool { return sameContents(target, want) })
	assertFiles(t, target, want)
}

func sameContents(target string, want map[string]file) bool {
	for p, w := range want {
		b, err := os.ReadFile(filepath.Join(target, p))
		if err != nil || string(b) != w.contents {
			return false
		}
	}
	return true
}

// waitForRecord waits until v's record satisfies ok.
func waitForRecord(t *testing.T, h *harness.Harness, v harness.Volume, ok func(*volume.Record) bool) {
	t.Helper()
	poll.UntilTrue(t, "the record of "+v.ID+" to reach the wanted state", func() bool {
		rec, err := h.Record(v.ID)
		return err == nil && rec != nil && ok(rec)
	})
}

// TestTriggerRefreshesNow: with rotation off (upstream's default: no
// refresh by time), a new value of the refresh annotation on the class, or
// on the pod, refreshes the volume at once from the request held in
// memory, without a republish; the value acted on is recorded, and the
// same value again refreshes nothing. A class with CreatedOnce ignores
// triggers.
func TestTriggerRefreshesNow(t *testing.T) {
	ann := &annotations{}
	ann.setClass(rotation.RefreshAnnotation, "before")
	h := harness.Start(t, harness.Options{Refresh: &rotation.Decider{Node: rotation.NodeDefaults{}, Source: ann}})
	h.WriteClass(appClass, appObjects)
	writeApp(h, "v1")
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)
	if rec := mustRecord(t, h, v); rec.HandledClassRefresh != "before" {
		t.Errorf("first publish recorded the class trigger %q as handled, want the value already set, %q", rec.HandledClassRefresh, "before")
	}

	writeApp(h, "v2")
	publish(t, h, v, appClass) // rotation off: nothing refreshes
	assertFiles(t, v.Target, appFiles("v1"))

	ann.setClass(rotation.RefreshAnnotation, "2026-11-23T10:00:00Z")
	pod := h.PodOf(v.Target)
	h.Driver().TriggerClass(pod.Namespace, appClass)
	waitForFiles(t, v.Target, appFiles("v2"))
	waitForRecord(t, h, v, func(r *volume.Record) bool { return r.HandledClassRefresh == "2026-11-23T10:00:00Z" })

	writeApp(h, "v3")
	h.Driver().TriggerClass(pod.Namespace, appClass) // the same value: no request
	publish(t, h, v, appClass)
	assertFiles(t, v.Target, appFiles("v2"))

	ann.setPod(rotation.RefreshAnnotation, "pod-1")
	h.Driver().TriggerPod(pod.Namespace, pod.Name)
	waitForFiles(t, v.Target, appFiles("v3"))

	ann.setClass(rotation.PolicyAnnotation, "CreatedOnce")
	ann.setClass(rotation.RefreshAnnotation, "again")
	writeApp(h, "v4")
	publish(t, h, v, appClass)
	assertFiles(t, v.Target, appFiles("v3"))
}

// TestTriggerWithoutValidToken: a held request whose service account
// token expired is not reused; the trigger then acts at the next republish.
func TestTriggerWithoutValidToken(t *testing.T) {
	ann := &annotations{}
	h := harness.Start(t, harness.Options{Refresh: &rotation.Decider{Source: ann}})
	h.WriteClass(appClass, appObjects)
	writeApp(h, "v1")
	v := h.NewVolume("secrets")
	req := h.PublishRequest(v.ID, v.Target, appClass, true)
	tokens, err := json.Marshal(map[string]any{"vault": map[string]any{
		"token": "not-a-real-token", "expirationTimestamp": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
	}})
	if err != nil {
		t.Fatal(err)
	}
	req.VolumeContext[driver.AttrTokens] = string(tokens)
	if _, err := h.Node.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatal(err)
	}

	writeApp(h, "v2")
	ann.setClass(rotation.RefreshAnnotation, "1")
	pod := h.PodOf(v.Target)
	h.Driver().TriggerClass(pod.Namespace, appClass)
	h.Driver().TriggerClass(pod.Namespace, appClass)
	assertFiles(t, v.Target, appFiles("v1"))
	if rec := mustRecord(t, h, v); rec.HandledClassRefresh != "" || rec.Generation != 1 {
		t.Errorf("record after a trigger without a valid token: handled %q generation %d, want nothing handled",
			rec.HandledClassRefresh, rec.Generation)
	}

	req.VolumeContext[driver.AttrTokens] = freshTokens(t)
	if _, err := h.Node.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	assertFiles(t, v.Target, appFiles("v2"))
	if rec := mustRecord(t, h, v); rec.HandledClassRefresh != "1" {
		t.Errorf("the republish handled trigger %q, want 1", rec.HandledClassRefresh)
	}
}

func freshTokens(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"vault": map[string]any{
		"token": "not-a-real-token", "expirationTimestamp": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFailedRefreshBacksOff: with rotation at every republish, a refresh
// that fails keeps the files and is not retried on the next republishes
// until the backoff has passed (the provider is back meanwhile: a retry
// would succeed), then doubles after each failure in a row; a success
// clears it.
func TestFailedRefreshBacksOff(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	h := harness.Start(t, harness.Options{
		Clock:   clk,
		Refresh: &rotation.Decider{Node: rotation.NodeDefaults{Enabled: true}, Backoff: rotation.Backoff{Initial: time.Minute, Max: time.Hour}},
	})
	h.WriteClass(appClass, appObjects)
	writeApp(h, "v1")
	v := h.NewVolume("secrets")
	publish(t, h, v, appClass)

	fail := func() {
		t.Helper()
		h.RemoveObject("api-token")
		publish(t, h, v, appClass)
		writeApp(h, "v2")
	}
	fail()
	if rec := mustRecord(t, h, v); rec.Failures != 1 {
		t.Fatalf("failures after a failed refresh = %d, want 1", rec.Failures)
	}
	clk.SetTime(clk.Now().Add(59 * time.Second))
	publish(t, h, v, appClass)
	assertFiles(t, v.Target, appFiles("v1"))
	if rec := mustRecord(t, h, v); rec.Failures != 1 {
		t.Errorf("a republish within the backoff changed failures to %d: it called the provider", rec.Failures)
	}

	clk.SetTime(clk.Now().Add(time.Second))
	fail() // the retry after 1m fails again: the next waits 2m
	if rec := mustRecord(t, h, v); rec.Failures != 2 {
		t.Fatalf("failures = %d, want 2", rec.Failures)
	}
	clk.SetTime(clk.Now().Add(119 * time.Second))
	publish(t, h, v, appClass)
	assertFiles(t, v.Target, appFiles("v1"))

	clk.SetTime(clk.Now().Add(time.Second))
	publish(t, h, v, appClass)
	assertFiles(t, v.Target, appFiles("v2"))
	if rec := mustRecord(t, h, v); rec.Failures != 0 || rec.LastError != "" {
		t.Errorf("record after recovery: failures %d, lastError %q; want both cleared", rec.Failures, rec.LastError)
	}
}
