package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AWS is the AWS provider's metrics: its store requests by operation and
// outcome, their latency, its node-local cache's hits, and its requests
// for credentials. It implements the AWS store's and the identity
// resolver's Observers.
type AWS struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	lookups  *prometheus.CounterVec
	// credentials and credentialTime: the identity resolver's requests.
	credentials    *prometheus.CounterVec
	credentialTime *prometheus.HistogramVec
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
	m.credentials = f.counterVec(prometheus.CounterOpts{
		Name: "keymount_aws_credential_requests_total",
		Help: "Requests for a pod identity's credentials (cached ones are served without one), by source (sts: one region's STS, AssumeRoleWithWebIdentity for IRSA and AssumeRole for a class's assumeRoleArn; pod_identity: the node's EKS Pod Identity agent) and result (ok, error).",
	}, "source", "result")
	m.credentialTime = f.histogramVec(prometheus.HistogramOpts{
		Name:    "keymount_aws_credential_request_duration_seconds",
		Help:    "Time of one request for credentials, retries included, by source.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, "source")
	for _, src := range []string{awsSourceSTS, awsSourcePodIdentity} {
		m.credentials.WithLabelValues(src, "ok")
		m.credentials.WithLabelValues(src, "error")
	}
	return m
}

// The sources of credentials (identity.SourceSTS, SourcePodIdentity).
const (
	awsSourceSTS         = "sts"
	awsSourcePodIdentity = "pod_identity"
)

// CredentialRequest counts one request for credentials (the identity
// resolver's Observer); a source other than the two is not counted, so
// that the source label stays a fixed set.
func (m *AWS) CredentialRequest(source string, failed bool, took time.Duration) {
	if source != awsSourceSTS && source != awsSourcePodIdentity {
		return
	}
	result := "ok"
	if failed {
		result = "error"
	}
	m.credentials.WithLabelValues(source, result).Inc()
	m.credentialTime.WithLabelValues(source).Observe(took.Seconds())
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
