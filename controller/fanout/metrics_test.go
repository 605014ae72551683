package fanout_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/controller/fanout"
)

// TestChangedAt: the latest managedFields time; zero without any.
func TestChangedAt(t *testing.T) {
	early, late := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "a", Time: &metav1.Time{Time: late}}, {Manager: "b"}, {Manager: "c", Time: &metav1.Time{Time: early}},
	}}}
	if got := fanout.ChangedAt(s); !got.Equal(late) {
		t.Errorf("ChangedAt = %v, want %v", got, late)
	}
	if got := fanout.ChangedAt(&corev1.Secret{}); !got.IsZero() {
		t.Errorf("ChangedAt without managedFields = %v, want zero", got)
	}
}

// TestStale: a copy is behind when its version annotation is set and
// differs; a new copy or one never versioned is not.
func TestStale(t *testing.T) {
	const key = "x/version"
	at := func(v string) *corev1.Secret {
		s := &corev1.Secret{}
		if v != "" {
			s.Annotations = map[string]string{key: v}
		}
		return s
	}
	for _, c := range []struct {
		existing client.Object
		want     bool
	}{{at("1"), true}, {at("2"), false}, {at(""), false}, {nil, false}} {
		if got := fanout.Stale(c.existing, at("2"), key); got != c.want {
			t.Errorf("Stale(%v) = %v, want %v", c.existing, got, c.want)
		}
	}
}

// TestPropagated: one observation from the change to now; none without a
// change time, none when the change is after now; a nil Metrics is a
// no-op.
func TestPropagated(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := fanout.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Init("reflector")
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	m.Propagated("reflector", now.Add(-3*time.Second), now)
	m.Propagated("reflector", time.Time{}, now)
	m.Propagated("reflector", now.Add(time.Second), now)
	var none *fanout.Metrics
	none.Propagated("reflector", now.Add(-time.Second), now)
	none.Conflict("reflector", "Secret")
	if n := testutil.CollectAndCount(reg, fanout.MetricPropagation); n != 1 {
		t.Fatalf("%d propagation series, want 1", n)
	}
	const want = `
# HELP keymount_fanout_propagation_seconds Seconds from a source's change (the latest time of its managedFields) to the write of its last out-of-date copy, per source change that reached every copy, by writer.
# TYPE keymount_fanout_propagation_seconds histogram
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="0.1"} 0
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="0.25"} 0
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="0.5"} 0
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="1"} 0
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="2.5"} 0
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="5"} 1
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="10"} 1
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="30"} 1
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="60"} 1
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="120"} 1
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="300"} 1
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="600"} 1
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="1800"} 1
keymount_fanout_propagation_seconds_bucket{writer="reflector",le="+Inf"} 1
keymount_fanout_propagation_seconds_sum{writer="reflector"} 3
keymount_fanout_propagation_seconds_count{writer="reflector"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), fanout.MetricPropagation); err != nil {
		t.Error(err)
	}
	// Init exports every series of the writer at 0: 2 kinds x 3 results.
	if n := testutil.CollectAndCount(reg, fanout.MetricCopiesWritten); n != 6 {
		t.Errorf("%d %s series after Init, want 6", n, fanout.MetricCopiesWritten)
	}
}
