package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/keymount/keymount/tests/promtext"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/poll"
)

// TestMetricsScrape: the driver's /metrics, scraped while a pod's volume is
// published, refreshed and unpublished, counts exactly that under
// upstream's names and labels, and keymount's provider calls, refresh
// decisions, Secret sync writes and API write queue; /healthz and /readyz
// answer.
func TestMetricsScrape(t *testing.T) {
	n := startNode(t, nodeOptions{})
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := n.getMetricsPage(t, path); code != http.StatusOK {
			t.Errorf("%s of a ready driver: %d, want 200", path, code)
		}
	}
	ns := n.newNamespace(t)
	n.writeObject(t, "metrics/token", []byte("v1-"+randomHex(6)))
	n.createClass(t, ns, "metrics", "local", []object{{name: "metrics/token", alias: "token"}},
		&secretsstorev1.SecretObject{SecretName: "metrics", Type: "Opaque",
			Data: []*secretsstorev1.SecretObjectData{{ObjectName: "token", Key: "token"}}})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "metrics"})

	n.mustPublish(t, pod, "secrets") // first publish: the provider is called, the Secret created
	n.waitForSeries(t, "keymount_secret_sync_writes_total", 1)
	n.mustPublish(t, pod, "secrets") // the node refreshes on every republish: nothing changed
	n.waitForSeries(t, "keymount_secret_sync_skipped_total", 1)
	n.writeObject(t, "metrics/token", []byte("v2-"+randomHex(6)))
	n.mustPublish(t, pod, "secrets") // a refresh that changes the file and the Secret
	n.waitForSeries(t, "keymount_secret_sync_writes_total", 2)
	n.mustUnpublish(t, pod, "secrets")
	n.waitForSeries(t, "keymount_api_write_queue_depth", 0)

	got := n.scrapeMetrics(t)
	osType := runtime.GOOS
	for series, want := range map[string]float64{
		`node_publish_total{os_type="` + osType + `",provider="local"}`:                       3,
		`node_unpublish_total{os_type="` + osType + `"}`:                                      1,
		`node_unpublish_error_total{os_type="` + osType + `"}`:                                0,
		`rotation_reconcile_total{os_type="` + osType + `",provider="local",rotated="false"}`: 1,
		`rotation_reconcile_total{os_type="` + osType + `",provider="local",rotated="true"}`:  1,
		`rotation_reconcile_duration_sec_count{os_type="` + osType + `"}`:                     2,
		`keymount_provider_call_duration_seconds_count{code="OK",provider="local"}`:           3,
		`keymount_refresh_decisions_total{decision="due"}`:                                    2,
		`keymount_refresh_decisions_total{decision="not_due"}`:                                0,
		`keymount_secret_sync_writes_total`:                                                   2,
		`keymount_secret_sync_skipped_total`:                                                  1,
		`keymount_node_publish_duration_seconds_count`:                                        3,
		`keymount_api_write_queue_oldest_seconds`:                                             0,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present: %v), want %v", series, v, ok, want)
		}
	}
	for series := range got {
		if strings.HasPrefix(series, "node_publish_error_total") || strings.HasPrefix(series, "rotation_reconcile_error_total") {
			t.Errorf("an error was counted: %s = %v", series, got[series])
		}
	}
}

// getMetricsPage GETs path from the driver's --metrics-addr.
func (n *node) getMetricsPage(t *testing.T, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+n.metricsAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// scrapeMetrics reads the driver's /metrics: every series as it prints it
// (name{labels}) and its value.
func (n *node) scrapeMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	code, body := n.getMetricsPage(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	out, err := promtext.Series(body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitForSeries waits until series reads want: the cluster side (Secret
// sync, pod statuses) is written after the CSI call returns.
func (n *node) waitForSeries(t *testing.T, series string, want float64) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%s to read %v", series, want), func(context.Context) (bool, error) {
		return n.scrapeMetrics(t)[series] == want, nil
	})
}
