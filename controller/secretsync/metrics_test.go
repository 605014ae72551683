package secretsync

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/keymount/keymount/internal/metrics"
)

// TestProviderLabelBounded: the provider call histogram labels a provider
// by name only when its socket was found; 100 made-up providers add no
// series to what one adds, and a code outside gRPC's counts as Unknown.
func TestProviderLabelBounded(t *testing.T) {
	series := func(madeUp int) (int, *prometheus.Registry) {
		reg := prometheus.NewRegistry()
		m, err := NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		m.ProvidersFound(func(p string) bool { return p == "local" })
		m.ProviderCall("local", codes.OK, time.Millisecond)
		for i := range madeUp {
			m.ProviderCall(fmt.Sprintf("made-up-%d", i), codes.FailedPrecondition, time.Millisecond)
			m.ProviderCall(fmt.Sprintf("made-up-%d", i), codes.Code(100+i), time.Millisecond)
		}
		n, err := testutil.GatherAndCount(reg)
		if err != nil {
			t.Fatal(err)
		}
		return n, reg
	}
	one, _ := series(1)
	hundred, reg := series(100)
	if one != hundred {
		t.Errorf("series after 1 made-up provider: %d; after 100: %d", one, hundred)
	}
	got := providerCalls(t, reg)
	want := map[string]uint64{
		"local OK": 1, metrics.UnknownProvider + " FailedPrecondition": 100, metrics.UnknownProvider + " Unknown": 100,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("provider calls by provider and code: %v, want %v", got, want)
	}
}

// providerCalls reads the provider call histogram's counts by "provider
// code".
func providerCalls(t *testing.T, reg prometheus.Gatherer) map[string]uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != MetricProviderDuration {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["provider"]+" "+labels["code"]] = m.GetHistogram().GetSampleCount()
		}
	}
	return out
}
