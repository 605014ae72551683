package secretsync

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/internal/metrics"
)

// Metrics are the controller's own metrics.
type Metrics struct {
	syncs    *prometheus.CounterVec
	provider *prometheus.HistogramVec
	// staleness tells how current the SecretSyncs are (staleness.go).
	staleness staleness
	// providers bounds the provider label: a name whose socket the
	// provider client never found counts as metrics.UnknownProvider.
	providers metrics.ProviderLabels
}

// Metric names.
const (
	MetricSyncs            = "keymount_controller_syncs_total"
	MetricProviderDuration = "keymount_controller_provider_call_duration_seconds"
)

// NewMetrics registers the controller's metrics with reg (the
// controller-runtime registry in the binary).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricSyncs,
			Help: "SecretSync syncs that called the provider, by result: created, updated, unchanged, or the failure (conflict, invalid, class_error, token_error, provider_error, content_error, apply_error, hash_error).",
		}, []string{"result"}),
		provider: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricProviderDuration,
			Help:    "Duration of the controller's Mount calls to providers, by provider (" + metrics.UnknownProvider + " for every name whose socket was never found) and gRPC code.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"provider", "code"}),
	}
	for _, r := range Results {
		m.syncs.WithLabelValues(r) // every result exported from the start, at 0
	}
	for _, c := range append([]prometheus.Collector{m.syncs, m.provider}, m.staleness.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Results are every value of the sync counter's result label.
var Results = []string{ResultCreated, ResultUpdated, ResultUnchanged, ResultConflict, ResultInvalid, ResultClass,
	ResultToken, ResultProvider, ResultContent, ResultApply, ResultHash}

// Sync counts a sync by result; a nil Metrics counts nothing.
func (m *Metrics) Sync(result string) {
	if m != nil {
		m.syncs.WithLabelValues(result).Inc()
	}
}

// ProvidersFound bounds the provider label: a provider keeps its name only
// when found(name) is true (providerclient.Client.Found: its socket was
// found); any other counts as metrics.UnknownProvider, as every provider
// does until it is called.
func (m *Metrics) ProvidersFound(found func(provider string) bool) {
	m.providers.SetFound(found)
}

// ProviderCall observes a provider Mount call; a nil Metrics observes
// nothing.
func (m *Metrics) ProviderCall(provider string, code codes.Code, d time.Duration) {
	if m != nil {
		m.provider.WithLabelValues(m.providers.Label(provider), metrics.CodeLabel(code)).Observe(d.Seconds())
	}
}
