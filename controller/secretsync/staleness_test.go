package secretsync

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

// TestStaleness: the failing gauge counts SecretSyncs whose latest sync
// failed; the stale gauge is the longest time one of them has gone without
// a success (since its first failure when it never succeeded); a success
// takes a SecretSync out of both; the last success is a timestamp.
func TestStaleness(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	gauge := func(name string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("%s not gathered", name)
		return 0
	}
	if got := gauge(MetricFailing); got != 0 {
		t.Errorf("%s before any reconciler = %v, want 0", MetricFailing, got)
	}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s := newStates()
	m.watchStates(s, func() time.Time { return now })
	s.put("ok", refreshState{lastRefresh: now.Add(-time.Hour)})
	s.put("failing", refreshState{lastRefresh: now.Add(-90 * time.Minute), failures: 3, lastFailure: now.Add(-time.Minute), failingSince: now.Add(-30 * time.Minute)})
	s.put("never", refreshState{failures: 1, lastFailure: now, failingSince: now.Add(-2 * time.Hour)})
	if got := gauge(MetricFailing); got != 2 {
		t.Errorf("%s = %v, want 2", MetricFailing, got)
	}
	if got := gauge(MetricStale); got != (2 * time.Hour).Seconds() {
		t.Errorf("%s = %v, want 7200 (the one that never succeeded, failing for 2 hours)", MetricStale, got)
	}
	s.put("never", refreshState{lastRefresh: now})
	if got := gauge(MetricStale); got != (90 * time.Minute).Seconds() {
		t.Errorf("%s after a success = %v, want 5400 (since the other's last success)", MetricStale, got)
	}
	s.forget(types.UID("failing"))
	if f, st := gauge(MetricFailing), gauge(MetricStale); f != 0 || st != 0 {
		t.Errorf("with no SecretSync failing: %s = %v, %s = %v; want 0, 0", MetricFailing, f, MetricStale, st)
	}
	m.SyncSucceeded(now)
	if got := testutil.ToFloat64(m.staleness.lastSuccess); got != float64(now.Unix()) {
		t.Errorf("%s = %v, want %d", MetricLastSuccess, got, now.Unix())
	}
	var none *Metrics
	none.SyncSucceeded(now) // a nil Metrics records nothing
	none.watchStates(s, time.Now)
}
