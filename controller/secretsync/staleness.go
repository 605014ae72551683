package secretsync

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names of how current the SecretSyncs are.
const (
	MetricLastSuccess = "keymount_controller_sync_last_success_timestamp_seconds"
	MetricFailing     = "keymount_controller_syncs_failing"
	MetricStale       = "keymount_controller_sync_stale_seconds"
)

// staleness are the gauges of how current the SecretSyncs are, none per
// SecretSync: when a sync last succeeded, how many SecretSyncs fail, and
// how long the one failing longest has gone without a success.
type staleness struct {
	lastSuccess prometheus.Gauge
	// failing reports the failing SecretSyncs and the longest time since
	// one's last success; nil until a reconciler watches its states.
	failing atomic.Pointer[func() (int, time.Duration)]
}

func (s *staleness) collectors() []prometheus.Collector {
	s.lastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricLastSuccess,
		Help: "Unix time of the latest successful SecretSync sync (any SecretSync, created, updated or unchanged); 0 before the first.",
	})
	return []prometheus.Collector{
		s.lastSuccess,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: MetricFailing,
			Help: "SecretSyncs whose latest sync failed (their Secret keeps its last content).",
		}, func() float64 { n, _ := s.stats(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: MetricStale,
			Help: "Seconds the SecretSync failing longest has gone without a successful sync (since its last success, or its first failure when it never succeeded); 0 while no SecretSync fails.",
		}, func() float64 { _, d := s.stats(); return d.Seconds() }),
	}
}

func (s *staleness) stats() (int, time.Duration) {
	f := s.failing.Load()
	if f == nil {
		return 0, 0
	}
	return (*f)()
}

// SyncSucceeded records a successful sync at now; a nil Metrics records
// nothing.
func (m *Metrics) SyncSucceeded(now time.Time) {
	if m != nil {
		m.staleness.lastSuccess.Set(float64(now.UnixNano()) / 1e9)
	}
}

// watchStates makes the failing and stale gauges report states at the
// time now gives, on every scrape.
func (m *Metrics) watchStates(s *states, now func() time.Time) {
	if m == nil {
		return
	}
	f := func() (int, time.Duration) { return s.failingStats(now()) }
	m.staleness.failing.Store(&f)
}

// failingStats counts the SecretSyncs whose latest sync failed and finds
// the longest time one of them has gone without a success at now.
func (s *states) failingStats(now time.Time) (n int, stale time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.failing {
		if st.failures == 0 {
			continue
		}
		n++
		since := st.lastRefresh
		if since.IsZero() {
			since = st.failingSince
		}
		if d := now.Sub(since); !since.IsZero() && d > stale {
			stale = d
		}
	}
	return n, stale
}
