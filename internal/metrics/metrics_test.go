package metrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/rotation"
)

// TestCSICalls: the upstream driver's publish and unpublish series, with
// its names, labels and os_type, count what happened and nothing else; the
// duration histograms count every call.
func TestCSICalls(t *testing.T) {
	m := newFound("aws", "local", "vault")
	m.NodePublish("aws", time.Millisecond)
	m.NodePublish("aws", time.Millisecond)
	m.NodePublish("local", time.Millisecond)
	m.NodePublishFailed("aws", "SecretProviderClassNotFound", codes.FailedPrecondition, time.Millisecond)
	m.NodePublishFailed("", "FailedToMount", codes.Unknown, time.Millisecond)
	m.NodePublishFailed("aws", "", codes.FailedPrecondition, time.Millisecond)
	m.NodeUnpublish(nil, time.Millisecond)
	m.NodeUnpublish(nil, time.Millisecond)
	m.NodeUnpublish(status.Error(codes.Internal, "x"), time.Millisecond)

	want := fmt.Sprintf(`
# HELP node_publish_total Total number of successful NodePublishVolume calls (upstream's name).
# TYPE node_publish_total counter
node_publish_total{os_type=%[1]q,provider="aws"} 2
node_publish_total{os_type=%[1]q,provider="local"} 1
# HELP node_publish_error_total Total number of failed NodePublishVolume calls, by upstream's reason (error_type) and the gRPC code returned to kubelet (grpc_code) (upstream's name).
# TYPE node_publish_error_total counter
node_publish_error_total{error_type="",grpc_code="FailedPrecondition",os_type=%[1]q,provider="aws"} 1
node_publish_error_total{error_type="FailedToMount",grpc_code="Internal",os_type=%[1]q,provider=""} 1
node_publish_error_total{error_type="SecretProviderClassNotFound",grpc_code="FailedPrecondition",os_type=%[1]q,provider="aws"} 1
# HELP node_unpublish_total Total number of successful NodeUnpublishVolume calls (upstream's name).
# TYPE node_unpublish_total counter
node_unpublish_total{os_type=%[1]q} 2
# HELP node_unpublish_error_total Total number of failed NodeUnpublishVolume calls (upstream's name).
# TYPE node_unpublish_error_total counter
node_unpublish_error_total{os_type=%[1]q} 1
`, runtime.GOOS)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"node_publish_total", "node_publish_error_total", "node_unpublish_total", "node_unpublish_error_total"); err != nil {
		t.Error(err)
	}
	if n, sum := histogram(t, m.Registry(), "keymount_node_publish_duration_seconds", nil); n != 6 || sum != 0.006 {
		t.Errorf("publish duration: %d calls, %v s; want 6 and 0.006", n, sum)
	}
	if n, _ := histogram(t, m.Registry(), "keymount_node_unpublish_duration_seconds", nil); n != 3 {
		t.Errorf("unpublish duration: %d calls, want 3", n)
	}
}

// TestRotation: a refresh counts as upstream's reconciler counts it — a
// success in rotation_reconcile_total and the duration histogram (buckets
// up to minutes), a failure in rotation_reconcile_error_total only.
func TestRotation(t *testing.T) {
	m := newFound("aws", "local", "vault")
	m.RotationReconcile("aws", true, "", 400*time.Millisecond)
	m.RotationReconcile("aws", false, "", 90*time.Second)
	m.RotationReconcile("aws", false, "", 20*time.Minute)
	m.RotationReconcile("aws", false, "GRPCProviderError", time.Second)
	want := fmt.Sprintf(`
# HELP rotation_reconcile_total Total number of successful refreshes of mounted volumes; rotated says the files changed (upstream's name).
# TYPE rotation_reconcile_total counter
rotation_reconcile_total{os_type=%[1]q,provider="aws",rotated="false"} 2
rotation_reconcile_total{os_type=%[1]q,provider="aws",rotated="true"} 1
# HELP rotation_reconcile_error_total Total number of failed refreshes of mounted volumes, by upstream's reason for the failure (upstream's name).
# TYPE rotation_reconcile_error_total counter
rotation_reconcile_error_total{error_type="GRPCProviderError",os_type=%[1]q,provider="aws",rotated="false"} 1
# HELP rotation_reconcile_duration_sec Distribution of how long a successful refresh of a mounted volume took, in seconds (upstream's name).
# TYPE rotation_reconcile_duration_sec histogram
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="0.1"} 0
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="0.2"} 0
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="0.3"} 0
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="0.4"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="0.5"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="1"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="1.5"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="2"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="2.5"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="3"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="5"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="10"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="15"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="30"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="60"} 1
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="120"} 2
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="300"} 2
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="600"} 2
rotation_reconcile_duration_sec_bucket{os_type=%[1]q,le="+Inf"} 3
rotation_reconcile_duration_sec_sum{os_type=%[1]q} 1290.4
rotation_reconcile_duration_sec_count{os_type=%[1]q} 3
`, runtime.GOOS)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"rotation_reconcile_total", "rotation_reconcile_error_total", "rotation_reconcile_duration_sec"); err != nil {
		t.Error(err)
	}
}

func TestProviderCalls(t *testing.T) {
	m := newFound("aws", "local", "vault")
	m.ProviderCall("aws", codes.OK, 3*time.Millisecond)
	m.ProviderCall("aws", codes.OK, 2*time.Second)
	m.ProviderCall("aws", codes.Unavailable, 10*time.Millisecond)
	m.ProviderCall("local", codes.OK, time.Millisecond)
	for _, tc := range []struct {
		provider, code string
		n              uint64
		sum            float64
	}{
		{"aws", "OK", 2, 2.003},
		{"aws", "Unavailable", 1, 0.01},
		{"local", "OK", 1, 0.001},
		{"local", "Unavailable", 0, 0},
	} {
		n, sum := histogram(t, m.Registry(), "keymount_provider_call_duration_seconds", map[string]string{"provider": tc.provider, "code": tc.code})
		if n != tc.n || sum != tc.sum {
			t.Errorf("provider %s code %s: %d calls, %v s; want %d and %v", tc.provider, tc.code, n, sum, tc.n, tc.sum)
		}
	}
}

// TestRefreshDecisions: every decision shows from the start, at 0.
func TestRefreshDecisions(t *testing.T) {
	m := newFound("aws", "local", "vault")
	m.RefreshDecision(rotation.DecisionNotDue)
	m.RefreshDecision(rotation.DecisionNotDue)
	m.RefreshDecision(rotation.DecisionTriggered)
	want := map[string]float64{
		rotation.DecisionNotDue: 2, rotation.DecisionDue: 0, rotation.DecisionTriggered: 1,
		rotation.DecisionSkippedByPolicy: 0, rotation.DecisionBackoff: 0,
	}
	if n := testutil.CollectAndCount(m.refreshDecisions); n != len(want) {
		t.Errorf("%d decision series, want %d", n, len(want))
	}
	for d, v := range want {
		if got := testutil.ToFloat64(m.refreshDecisions.WithLabelValues(d)); got != v {
			t.Errorf("keymount_refresh_decisions_total{decision=%q} = %v, want %v", d, got, v)
		}
	}
}

// TestSecretSync: every Secret synced counts in upstream's
// sync_k8s_secret_total by provider and its duration in
// sync_k8s_secret_duration_sec (upstream's buckets, continued), written or
// not; keymount's own counters tell the two apart.
func TestSecretSync(t *testing.T) {
	m := newFound("aws", "local", "vault")
	m.SecretSynced("aws", true, 350*time.Millisecond)
	m.SecretSynced("aws", false, 50*time.Millisecond)
	m.SecretSynced("vault", false, 90*time.Second)
	if w, s := testutil.ToFloat64(m.secretWrites), testutil.ToFloat64(m.secretUnchanged); w != 1 || s != 2 {
		t.Errorf("sync writes %v skipped %v, want 1 and 2", w, s)
	}
	want := fmt.Sprintf(`
# HELP sync_k8s_secret_total Total number of k8s secrets synced: Secrets of secretObjects a sync brought to what they should hold, written or already holding it (upstream's name).
# TYPE sync_k8s_secret_total counter
sync_k8s_secret_total{os_type=%[1]q,provider="aws"} 2
sync_k8s_secret_total{os_type=%[1]q,provider="vault"} 1
# HELP sync_k8s_secret_duration_sec Distribution of how long it took to sync k8s secret: one Secret's reads and writes, retries included, in seconds (upstream's name).
# TYPE sync_k8s_secret_duration_sec histogram
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="0.1"} 1
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="0.2"} 1
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="0.3"} 1
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="0.4"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="0.5"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="1"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="1.5"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="2"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="2.5"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="3"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="5"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="10"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="15"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="30"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="60"} 2
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="120"} 3
sync_k8s_secret_duration_sec_bucket{os_type=%[1]q,le="+Inf"} 3
sync_k8s_secret_duration_sec_sum{os_type=%[1]q} 90.4
sync_k8s_secret_duration_sec_count{os_type=%[1]q} 3
`, runtime.GOOS)
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "sync_k8s_secret_total", "sync_k8s_secret_duration_sec"); err != nil {
		t.Error(err)
	}
}

func TestWriteQueue(t *testing.T) {
	m := newFound("aws", "local", "vault")
	queue := `
# HELP keymount_api_write_queue_depth Volumes whose pod status or Secret sync waits to be written to the API server (including retries).
# TYPE keymount_api_write_queue_depth gauge
keymount_api_write_queue_depth %v
# HELP keymount_api_write_queue_oldest_seconds How long the oldest write waiting for the API server has waited, in seconds; 0 when none waits.
# TYPE keymount_api_write_queue_oldest_seconds gauge
keymount_api_write_queue_oldest_seconds %v
`
	names := []string{"keymount_api_write_queue_depth", "keymount_api_write_queue_oldest_seconds"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(fmt.Sprintf(queue, 0, 0)), names...); err != nil {
		t.Errorf("before WatchWriteQueue: %v", err)
	}
	m.WatchWriteQueue(func() (int, time.Duration) { return 7, 1500 * time.Millisecond })
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(fmt.Sprintf(queue, 7, 1.5)), names...); err != nil {
		t.Error(err)
	}
}

// TestRegistry: the Go and process collectors are there, and keymount's
// own metrics follow Prometheus' naming rules (upstream's names are kept as
// they are, _sec included).
func TestRegistry(t *testing.T) {
	m := newFound("aws", "local", "vault")
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		have[f.GetName()] = true
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "node_unpublish_total", "keymount_refresh_decisions_total"} {
		if !have[name] {
			t.Errorf("no %s", name)
		}
	}
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "keymount_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

func TestHandler(t *testing.T) {
	m := newFound("aws", "local", "vault")
	m.NodeUnpublish(nil, time.Millisecond)
	health := http.NewServeMux()
	health.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	srv := httptest.NewServer(m.Handler(health))
	defer srv.Close()
	body := get(t, srv.URL+"/metrics", http.StatusOK)
	if want := fmt.Sprintf("node_unpublish_total{os_type=%q} 1\n", runtime.GOOS); !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q:\n%.2000s", want, body)
	}
	if body := get(t, srv.URL+"/healthz", http.StatusOK); body != "ok\n" {
		t.Errorf("/healthz = %q, want the health handler's answer", body)
	}
	get(t, srv.URL+"/nothing", http.StatusNotFound)
}

func get(t *testing.T, url string, wantCode int) string {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a test server, closed with the test
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != wantCode {
		t.Errorf("GET %s: %s, want %d", url, resp.Status, wantCode)
	}
	return string(b)
}

// histogram returns the sample count and sum of the series of histogram
// name with exactly labels (besides none other); 0, 0 when there is none.
func histogram(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			if len(s.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range s.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return s.GetHistogram().GetSampleCount(), s.GetHistogram().GetSampleSum()
		}
	}
	return 0, 0
}
