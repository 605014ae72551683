package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unknownProvider is the provider label of every provider whose socket the
// driver never found (internal/metrics.UnknownProvider).
const unknownProvider = "(unknown)"

// TestMetricsBoundedByFoundProviders: any namespace editor can create
// SecretProviderClasses, so spec.provider is user input. 100 classes
// naming made-up providers (valid socket names, and names no socket can
// have), each mounted once by a pod through the driver's CSI socket, add
// no series to the driver's /metrics: it has the same series after 100 as
// after one. The made-up names count under provider="(unknown)" and appear
// in no series; the provider whose socket the driver found keeps its name.
func TestMetricsBoundedByFoundProviders(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	n.writeObject(t, "bounded/token", []byte("v1-"+randomHex(6)))
	n.createClass(t, ns, "found", "local", []object{{name: "bounded/token", alias: "token"}})
	n.mustPublish(t, n.createPod(t, ns, "found", secretsVolume{name: "secrets", class: "found"}), "secrets")

	const classes = 100
	madeUp := func(i int) string {
		switch i % 10 {
		case 3:
			return fmt.Sprintf("made.up/%03d", i) // no socket can have this name
		case 7:
			return fmt.Sprintf("made-up-provider-with-a-long-name-%03d", i) // longer than a provider name may be
		}
		return fmt.Sprintf("made-up-%03d", i)
	}
	mount := func(i int) {
		t.Helper()
		class := fmt.Sprintf("made-up-%03d", i)
		n.createClass(t, ns, class, madeUp(i), []object{{name: "bounded/token", alias: "token"}})
		pod := n.createPod(t, ns, class, secretsVolume{name: "secrets", class: class})
		if err := n.publish(t, pod, "secrets"); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("publish of a class naming provider %q = %v, want FailedPrecondition", madeUp(i), err)
		}
	}

	mount(0)
	afterOne := n.scrapeMetrics(t)
	for i := 1; i < classes; i++ {
		mount(i)
	}
	afterAll := n.scrapeMetrics(t)

	if len(afterAll) != len(afterOne) {
		t.Errorf("/metrics has %d series after 1 class naming a made-up provider, %d after %d; new: %q",
			len(afterOne), len(afterAll), classes, newSeries(afterOne, afterAll))
	}
	for series := range afterAll {
		if strings.Contains(series, "made") {
			t.Errorf("a made-up provider labels a series: %s", series)
		}
	}
	var unknownErrors, foundPublishes float64
	for series, v := range afterAll {
		if strings.HasPrefix(series, "node_publish_error_total{") && strings.Contains(series, `provider="`+unknownProvider+`"`) {
			unknownErrors += v
		}
		if strings.HasPrefix(series, "node_publish_total{") && strings.Contains(series, `provider="local"`) {
			foundPublishes += v
		}
	}
	if unknownErrors != classes {
		t.Errorf("failed publishes counted under provider=%q: %v, want %d", unknownProvider, unknownErrors, classes)
	}
	if foundPublishes != 1 {
		t.Errorf("node_publish_total of the found provider local: %v, want 1", foundPublishes)
	}
}

// newSeries lists the series of after that before lacks.
func newSeries(before, after map[string]float64) []string {
	var out []string
	for _, s := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[s]; !ok {
			out = append(out, s)
		}
	}
	return out
}
