package fanout

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Metric names of the fan-out writers (reflector's annotations,
// SecretMirrors), on keymount-controller's /metrics.
const (
	MetricCopiesWritten = "keymount_fanout_copies_written_total"
	MetricCopiesDeleted = "keymount_fanout_copies_deleted_total"
	MetricConflicts     = "keymount_fanout_copy_conflicts_total"
	MetricErrors        = "keymount_fanout_copy_errors_total"
	MetricPropagation   = "keymount_fanout_propagation_seconds"
)

// Label values. writer is a Writer's Name ("reflector", "mirror"), kind
// "Secret" or "ConfigMap": every label comes from a fixed set, never from
// an object's namespace or name.
const (
	OperationWrite  = "write"
	OperationDelete = "delete"
)

// propagationBuckets run from a source copied into a few namespaces (well
// under a second) to a large fan-out waiting on the API rate limit and
// retries (half an hour).
var propagationBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

// Metrics count what the fan-out writers do. A nil *Metrics counts
// nothing.
type Metrics struct {
	written     *prometheus.CounterVec
	deleted     *prometheus.CounterVec
	conflicts   *prometheus.CounterVec
	errors      *prometheus.CounterVec
	propagation *prometheus.HistogramVec
}

// NewMetrics registers the fan-out metrics with reg (controller-runtime's
// registry in keymount-controller).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricCopiesWritten,
			Help: "Copies the fan-out writers wrote, by writer (reflector, mirror), kind (Secret, ConfigMap) and result (created, updated, adopted).",
		}, []string{"writer", "kind", "result"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricCopiesDeleted,
			Help: "Copies the fan-out writers deleted (a namespace no longer matching, a source or SecretMirror gone), by writer and kind.",
		}, []string{"writer", "kind"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricConflicts,
			Help: "Copies not written because an object of that name exists that keymount did not write (or another SecretMirror's copy), by writer and kind.",
		}, []string{"writer", "kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricErrors,
			Help: "Copy writes and deletes that failed (the API server refused or did not answer), by writer, kind and operation (write, delete).",
		}, []string{"writer", "kind", "operation"}),
		propagation: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricPropagation,
			Help:    "Seconds from a source's change (the latest time of its managedFields) to the write of its last out-of-date copy, per source change that reached every copy, by writer.",
			Buckets: propagationBuckets,
		}, []string{"writer"}),
	}
	for _, c := range []prometheus.Collector{m.written, m.deleted, m.conflicts, m.errors, m.propagation} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Init exports writer's series at 0 from the start, so that a rate or an
// alert sees them before the first copy.
func (m *Metrics) Init(writer string) {
	if m == nil {
		return
	}
	for _, kind := range []string{"Secret", "ConfigMap"} {
		for _, r := range []Result{Created, Updated, Adopted} {
			m.written.WithLabelValues(writer, kind, r.label())
		}
		m.deleted.WithLabelValues(writer, kind)
		m.conflicts.WithLabelValues(writer, kind)
		m.errors.WithLabelValues(writer, kind, OperationWrite)
		m.errors.WithLabelValues(writer, kind, OperationDelete)
	}
}

func (r Result) label() string {
	return [...]string{"unchanged", "created", "updated", "adopted"}[r]
}

// written counts one write of a copy of kind.
func (m *Metrics) wrote(writer, kind string, r Result) {
	if m != nil && r != Unchanged {
		m.written.WithLabelValues(writer, kind, r.label()).Inc()
	}
}

func (m *Metrics) removed(writer, kind string) {
	if m != nil {
		m.deleted.WithLabelValues(writer, kind).Inc()
	}
}

// Conflict counts one copy of kind not written because another object
// holds its name.
func (m *Metrics) Conflict(writer, kind string) {
	if m != nil {
		m.conflicts.WithLabelValues(writer, kind).Inc()
	}
}

func (m *Metrics) failed(writer, kind, operation string) {
	if m != nil {
		m.errors.WithLabelValues(writer, kind, operation).Inc()
	}
}

// Propagated observes a source change that reached every copy at now:
// changed is when the source changed (ChangedAt); a zero changed (a source
// without managedFields, a Vault secret) is not observed, nor is a change
// the API server's clock puts after now.
func (m *Metrics) Propagated(writer string, changed, now time.Time) {
	if m == nil || changed.IsZero() || now.Before(changed) {
		return
	}
	m.propagation.WithLabelValues(writer).Observe(now.Sub(changed).Seconds())
}

// ChangedAt is when obj last changed as the API server recorded it: the
// latest time of its managedFields entries (seconds resolution); zero when
// it has none.
func ChangedAt(obj client.Object) time.Time {
	var t time.Time
	for _, f := range obj.GetManagedFields() {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}

// Stale reports whether existing, a copy, was written from another version
// of its source than desired: the annotation key, which carries the
// source's version on every copy, is set and differs. A missing copy, or
// one no version was written into (a manual mirror before its first
// write), is not stale: it is new, not behind a change.
func Stale(existing, desired client.Object, key string) bool {
	if existing == nil {
		return false
	}
	v := existing.GetAnnotations()[key]
	return v != "" && v != desired.GetAnnotations()[key]
}
