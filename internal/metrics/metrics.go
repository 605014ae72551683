package metrics

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/internal/panics"
	"github.com/keymount/keymount/rotation"
)

// Label names. Upstream's metrics carry os_type (runtime.GOOS) on every
// series; keymount's own do not.
const (
	labelProvider  = "provider"
	labelOSType    = "os_type"
	labelErrorType = "error_type"
	labelRotated   = "rotated"
	labelCode      = "code"
	labelGRPCCode  = "grpc_code"
	labelDecision  = "decision"
)

// Bucket bounds, in seconds.
var (
	// rotationBuckets are upstream's bounds (0.1 s to 30 s) continued to
	// ten minutes: a refresh waits for a provider slot and its call, whose
	// deadline is a minute by default.
	rotationBuckets = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 1, 1.5, 2, 2.5, 3, 5, 10, 15, 30, 60, 120, 300, 600}
	// syncBuckets are upstream's bounds for syncing a Secret (its
	// documented sample shows them), continued to two minutes: a sync
	// retries writes that race another node's.
	syncBuckets = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 1, 1.5, 2, 2.5, 3, 5, 10, 15, 30, 60, 120}
	// callBuckets cover a CSI or provider call, from a republish that is
	// not due (well under a millisecond) to kubelet's two-minute deadline.
	callBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
)

// Metrics records what the driver does. It is safe for concurrent use;
// every method is a few atomic operations and never blocks.
type Metrics struct {
	reg *prometheus.Registry

	nodePublish          *prometheus.CounterVec
	nodePublishErrors    *prometheus.CounterVec
	nodeUnpublish        prometheus.Counter
	nodeUnpublishErrors  prometheus.Counter
	rotationReconcile    *prometheus.CounterVec
	rotationErrors       *prometheus.CounterVec
	rotationDuration     prometheus.Observer
	publishDuration      prometheus.Observer
	unpublishDuration    prometheus.Observer
	providerCallDuration *prometheus.HistogramVec
	providerUnpublish    *prometheus.CounterVec
	refreshDecisions     *prometheus.CounterVec
	secretWrites         prometheus.Counter
	secretUnchanged      prometheus.Counter
	syncSecret           *prometheus.CounterVec
	syncSecretDuration   prometheus.Observer

	// queue reports the API write queue: pending writes and the age of
	// the oldest; nil until WatchWriteQueue.
	queue atomic.Pointer[func() (int, time.Duration)]
	// providerHealth reports keymount_provider_healthy.
	providerHealth providerHealthCollector
	// providers bounds every provider label: a name whose socket the
	// driver never found counts as UnknownProvider.
	providers ProviderLabels
}

// New returns Metrics registered on a registry of their own, with the Go
// runtime and process collectors.
func New() *Metrics {
	m := &Metrics{reg: newRegistry()}
	m.providerHealth.providers = &m.providers
	osType := prometheus.Labels{labelOSType: runtime.GOOS}
	f := factory{reg: m.reg}
	m.nodePublish = f.counterVec(prometheus.CounterOpts{
		Name: "node_publish_total", Help: "Total number of successful NodePublishVolume calls (upstream's name).",
		ConstLabels: osType,
	}, labelProvider)
	m.nodePublishErrors = f.counterVec(prometheus.CounterOpts{
		Name: "node_publish_error_total", Help: "Total number of failed NodePublishVolume calls, by upstream's reason (error_type) and the gRPC code returned to kubelet (grpc_code) (upstream's name).",
		ConstLabels: osType,
	}, labelProvider, labelErrorType, labelGRPCCode)
	m.nodeUnpublish = f.counter(prometheus.CounterOpts{
		Name: "node_unpublish_total", Help: "Total number of successful NodeUnpublishVolume calls (upstream's name).",
		ConstLabels: osType,
	})
	m.nodeUnpublishErrors = f.counter(prometheus.CounterOpts{
		Name: "node_unpublish_error_total", Help: "Total number of failed NodeUnpublishVolume calls (upstream's name).",
		ConstLabels: osType,
	})
	m.rotationReconcile = f.counterVec(prometheus.CounterOpts{
		Name: "rotation_reconcile_total", Help: "Total number of successful refreshes of mounted volumes; rotated says the files changed (upstream's name).",
		ConstLabels: osType,
	}, labelProvider, labelRotated)
	m.rotationErrors = f.counterVec(prometheus.CounterOpts{
		Name: "rotation_reconcile_error_total", Help: "Total number of failed refreshes of mounted volumes, by upstream's reason for the failure (upstream's name).",
		ConstLabels: osType,
	}, labelProvider, labelRotated, labelErrorType)
	m.rotationDuration = f.histogram(prometheus.HistogramOpts{
		Name: "rotation_reconcile_duration_sec", Help: "Distribution of how long a successful refresh of a mounted volume took, in seconds (upstream's name).",
		ConstLabels: osType, Buckets: rotationBuckets,
	})
	m.publishDuration = f.histogram(prometheus.HistogramOpts{
		Name: "keymount_node_publish_duration_seconds", Help: "How long NodePublishVolume calls took, successful or not.",
		Buckets: callBuckets,
	})
	m.unpublishDuration = f.histogram(prometheus.HistogramOpts{
		Name: "keymount_node_unpublish_duration_seconds", Help: "How long NodeUnpublishVolume calls took, successful or not.",
		Buckets: callBuckets,
	})
	m.providerCallDuration = f.histogramVec(prometheus.HistogramOpts{
		Name: "keymount_provider_call_duration_seconds", Help: "How long Mount calls to provider plugins took, by provider and gRPC code (OK for success); its _count counts the calls.",
		Buckets: callBuckets,
	}, labelProvider, labelCode)
	m.providerUnpublish = f.counterVec(prometheus.CounterOpts{
		Name: "keymount_provider_unpublish_calls_total", Help: "Unpublish calls of keymount's provider extension made after NodeUnpublishVolume, by provider and gRPC code (Unimplemented: a provider without the extension; a failure never fails the unpublish).",
	}, labelProvider, labelCode)
	m.refreshDecisions = f.counterVec(prometheus.CounterOpts{
		Name: "keymount_refresh_decisions_total", Help: "Decisions about refreshing a mounted volume (a republish or a trigger): not_due, due, triggered, skipped_by_policy, backoff.",
	}, labelDecision)
	for _, d := range []string{rotation.DecisionNotDue, rotation.DecisionDue, rotation.DecisionTriggered, rotation.DecisionSkippedByPolicy, rotation.DecisionBackoff} {
		m.refreshDecisions.WithLabelValues(d) // every decision shows, at 0 until made
	}
	m.secretWrites = f.counter(prometheus.CounterOpts{
		Name: "keymount_secret_sync_writes_total", Help: "Secrets the Secret sync wrote (created, or content or owner references applied).",
	})
	m.secretUnchanged = f.counter(prometheus.CounterOpts{
		Name: "keymount_secret_sync_skipped_total", Help: "Secret syncs that wrote nothing because the Secret already held what it should.",
	})
	m.syncSecret = f.counterVec(prometheus.CounterOpts{
		Name: "sync_k8s_secret_total", Help: "Total number of k8s secrets synced: Secrets of secretObjects a sync brought to what they should hold, written or already holding it (upstream's name).",
		ConstLabels: osType,
	}, labelProvider)
	m.syncSecretDuration = f.histogram(prometheus.HistogramOpts{
		Name: "sync_k8s_secret_duration_sec", Help: "Distribution of how long it took to sync k8s secret: one Secret's reads and writes, retries included, in seconds (upstream's name).",
		ConstLabels: osType, Buckets: syncBuckets,
	})
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "keymount_api_write_queue_depth", Help: "Volumes whose pod status or Secret sync waits to be written to the API server (including retries).",
		}, func() float64 { n, _ := m.writeQueue(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "keymount_api_write_queue_oldest_seconds", Help: "How long the oldest write waiting for the API server has waited, in seconds; 0 when none waits.",
		}, func() float64 { _, age := m.writeQueue(); return age.Seconds() }),
		&m.providerHealth,
	)
	return m
}

// ProvidersFound bounds the provider labels: a provider keeps its name
// only when found(name) is true (the provider client's Found: its socket
// was found); any other counts as UnknownProvider. Until it is called,
// every provider counts as UnknownProvider.
func (m *Metrics) ProvidersFound(found func(provider string) bool) {
	m.providers.SetFound(found)
}

// Registry is the registry every metric is on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// NodePublish counts one successful NodePublishVolume call.
func (m *Metrics) NodePublish(provider string, took time.Duration) {
	m.publishDuration.Observe(took.Seconds())
	m.nodePublish.WithLabelValues(m.providers.Label(provider)).Inc()
}

// NodePublishFailed counts one failed NodePublishVolume call in
// node_publish_error_total, with upstream's reason as error_type and the
// gRPC code kubelet got as grpc_code.
func (m *Metrics) NodePublishFailed(provider, errorType string, code codes.Code, took time.Duration) {
	m.publishDuration.Observe(took.Seconds())
	m.nodePublishErrors.WithLabelValues(m.providers.Label(provider), errorType, grpcCode(code)).Inc()
}

// NodeUnpublish counts one NodeUnpublishVolume call.
func (m *Metrics) NodeUnpublish(err error, took time.Duration) {
	m.unpublishDuration.Observe(took.Seconds())
	if err != nil {
		m.nodeUnpublishErrors.Inc()
		return
	}
	m.nodeUnpublish.Inc()
}

// ProviderCall times one Mount call to a provider.
func (m *Metrics) ProviderCall(provider string, code codes.Code, took time.Duration) {
	m.providerCallDuration.WithLabelValues(m.providers.Label(provider), CodeLabel(code)).Observe(took.Seconds())
}

// ProviderUnpublish counts one Unpublish call of keymount's provider
// extension.
func (m *Metrics) ProviderUnpublish(provider string, code codes.Code) {
	m.providerUnpublish.WithLabelValues(m.providers.Label(provider), CodeLabel(code)).Inc()
}

// RefreshDecision counts one decision about a mounted volume.
func (m *Metrics) RefreshDecision(decision string) {
	m.refreshDecisions.WithLabelValues(decision).Inc()
}

// RotationReconcile counts one refresh as upstream's rotation reconciler
// does: a failure counts in rotation_reconcile_error_total only; a success
// in rotation_reconcile_total and rotation_reconcile_duration_sec.
func (m *Metrics) RotationReconcile(provider string, rotated bool, errType string, took time.Duration) {
	r := strconv.FormatBool(rotated)
	if errType != "" {
		m.rotationErrors.WithLabelValues(m.providers.Label(provider), r, errType).Inc()
		return
	}
	m.rotationReconcile.WithLabelValues(m.providers.Label(provider), r).Inc()
	m.rotationDuration.Observe(took.Seconds())
}

// SecretSynced counts one Secret a sync brought to what it should hold
// (secretsync.WriteObserver): upstream's sync_k8s_secret_total and
// sync_k8s_secret_duration_sec, and keymount_secret_sync_writes_total or
// keymount_secret_sync_skipped_total by whether it was written.
func (m *Metrics) SecretSynced(provider string, written bool, took time.Duration) {
	m.syncSecret.WithLabelValues(m.providers.Label(provider)).Inc()
	m.syncSecretDuration.Observe(took.Seconds())
	if written {
		m.secretWrites.Inc()
		return
	}
	m.secretUnchanged.Inc()
}

// WatchWriteQueue makes the API write queue gauges report what queue
// returns: the writes waiting and the age of the oldest
// (driver.Driver.WriteQueue). It is called on every scrape.
func (m *Metrics) WatchWriteQueue(queue func() (pending int, oldest time.Duration)) {
	m.queue.Store(&queue)
}

func (m *Metrics) writeQueue() (int, time.Duration) {
	q := m.queue.Load()
	if q == nil {
		return 0, 0
	}
	return (*q)()
}

// grpcCode is the grpc_code of a failed CSI call: the gRPC code kubelet
// got (Internal for an error that carries none, or a code gRPC does not
// define).
func grpcCode(c codes.Code) string {
	if c == codes.Unknown || c == codes.OK || c > codes.Unauthenticated {
		c = codes.Internal
	}
	return c.String()
}

// CodeLabel is the code label of a call's gRPC code: its name, one of the
// 17 gRPC defines; Unknown for any other number (a provider may answer
// with any), which would otherwise print as Code(n).
func CodeLabel(c codes.Code) string {
	if c > codes.Unauthenticated {
		c = codes.Unknown
	}
	return c.String()
}

// newRegistry returns a registry of its own with the Go runtime, process
// and panics collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), panics.Collector())
	return reg
}

// factory creates metrics registered on reg.
type factory struct{ reg prometheus.Registerer }

func (f factory) counter(o prometheus.CounterOpts) prometheus.Counter {
	c := prometheus.NewCounter(o)
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(o prometheus.CounterOpts, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(o, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogram(o prometheus.HistogramOpts) prometheus.Histogram {
	h := prometheus.NewHistogram(o)
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVec(o prometheus.HistogramOpts, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(o, labels)
	f.reg.MustRegister(h)
	return h
}
