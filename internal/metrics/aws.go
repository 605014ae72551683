package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AWS is the AWS provider's metrics: its store requests by operation and
// outcome, their latency, and its node-local cache's hits. It implements
// the AWS store's Observer.
type AWS struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	lookups  *prometheus.CounterVec
}

// NewAWS returns the AWS provider's metrics on a registry of their own,
// with the Go and process collectors.
func NewAWS() *AWS {
	m := &AWS{reg: newRegistry()}
	f := factory{reg: m.reg}
	m.calls = f.counterVec(prometheus.CounterOpts{
		Name: "keymount_aws_store_requests_total",
		Help: "AWS API operations the provider sent (Secrets Manager, SSM Parameter Store), retries included, by outcome: ok, a known AWS error code, other (any other code) or error (no code: unreachable, cancelled).",
	}, "service", "operation", "outcome")
	m.duration = f.histogramVec(prometheus.HistogramOpts{
		Name:    "keymount_aws_store_request_duration_seconds",
		Help:    "Time of one AWS API operation, retries included.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, "service", "operation")
	m.lookups = f.counterVec(prometheus.CounterOpts{
		Name: "keymount_aws_cache_lookups_total",
		Help: "Lookups in the provider's node-local value cache, by result: hit or miss.",
	}, "result")
	m.lookups.WithLabelValues("hit")
	m.lookups.WithLabelValues("miss")
	return m
}

// StoreCall counts one AWS operation.
func (m *AWS) StoreCall(service, operation, outcome string, took time.Duration) {
	m.calls.WithLabelValues(service, operation, outcome).Inc()
	m.duration.WithLabelValues(service, operation).Observe(took.Seconds())
}

// CacheLookup counts one cache lookup.
func (m *AWS) CacheLookup(hit bool) {
	result := "miss"
	if hit {
		result = "hit"
	}
	m.lookups.WithLabelValues(result).Inc()
}

// Handler serves the metrics in Prometheus' text format.
func (m *AWS) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
