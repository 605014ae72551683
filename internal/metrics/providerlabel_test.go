package metrics

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
)

// newFound returns Metrics whose provider client found the sockets of
// names only.
func newFound(names ...string) *Metrics {
	m := New()
	m.ProvidersFound(func(p string) bool { return slices.Contains(names, p) })
	return m
}

// TestProviderLabels: a name keeps its value only when found; any other
// is UnknownProvider, also before SetFound; "" stays "".
func TestProviderLabels(t *testing.T) {
	var p ProviderLabels
	if got := p.Label("aws"); got != UnknownProvider {
		t.Errorf("before SetFound: Label(aws) = %q, want %q", got, UnknownProvider)
	}
	p.SetFound(func(name string) bool { return name == "aws" })
	for name, want := range map[string]string{"aws": "aws", "made-up": UnknownProvider, "": "", UnknownProvider: UnknownProvider} {
		if got := p.Label(name); got != want {
			t.Errorf("Label(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestMadeUpProvidersAddNoSeries: every metric with a provider label, fed
// 100 made-up provider names, has the series one made-up name gives it,
// under UnknownProvider; codes outside gRPC's count as Unknown (Internal
// for kubelet's grpc_code).
func TestMadeUpProvidersAddNoSeries(t *testing.T) {
	feed := func(m *Metrics, names []string) {
		health := map[string]bool{"aws": true}
		for _, p := range names {
			m.NodePublish(p, time.Millisecond)
			m.NodePublishFailed(p, "", codes.FailedPrecondition, time.Millisecond)
			m.ProviderCall(p, codes.Code(100+len(p)), time.Millisecond)
			m.ProviderUnpublish(p, codes.Code(200+len(p)))
			m.RotationReconcile(p, true, "", time.Millisecond)
			m.RotationReconcile(p, false, "FailedToRotate", time.Millisecond)
			m.SecretSynced(p, true, time.Millisecond)
			health[p] = len(p)%2 == 0
		}
		m.WatchProviderHealth(func() map[string]bool { return health })
	}
	count := func(names []string) int {
		m := newFound("aws")
		feed(m, append([]string{"aws"}, names...))
		n, err := testutil.GatherAndCount(m.Registry())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	made := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("made-up-%d", i)
		}
		return out
	}
	if one, hundred := count(made(1)), count(made(100)); one != hundred {
		t.Errorf("series after 1 made-up provider: %d; after 100: %d", one, hundred)
	}

	m := newFound("aws")
	feed(m, made(3))
	want := fmt.Sprintf(`
# HELP node_publish_total Total number of successful NodePublishVolume calls (upstream's name).
# TYPE node_publish_total counter
node_publish_total{os_type=%[1]q,provider=%[2]q} 3
# HELP keymount_provider_healthy %[3]s
# TYPE keymount_provider_healthy gauge
keymount_provider_healthy{provider=%[2]q} 0
keymount_provider_healthy{provider="aws"} 1
`, runtime.GOOS, UnknownProvider, providerHealthHelp)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "node_publish_total", "keymount_provider_healthy"); err != nil {
		t.Error(err)
	}
	if n, _ := histogram(t, m.Registry(), "keymount_provider_call_duration_seconds", map[string]string{"provider": UnknownProvider, "code": "Unknown"}); n != 3 {
		t.Errorf("provider calls with codes outside gRPC's: %d under code Unknown, want 3", n)
	}
	if got := testutil.ToFloat64(m.nodePublishErrors.WithLabelValues(UnknownProvider, "", "FailedPrecondition")); got != 3 {
		t.Errorf("node_publish_error_total of made-up providers = %v, want 3", got)
	}
	if got := grpcCode(codes.Code(99)); got != "Internal" {
		t.Errorf("grpc_code of code 99 = %q, want Internal", got)
	}
}
