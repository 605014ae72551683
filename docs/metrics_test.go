package docs_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/internal/metrics"
	"github.com/keymount/keymount/rotation"
)

// runtimePrefixes are the metric families of client_golang's Go and process
// collectors, which metrics.md documents as groups: their members depend
// on the Go and client_golang versions.
var runtimePrefixes = []string{"go_", "process_"}

// registered returns the metric family names internal/metrics registers,
// the driver's and the AWS provider's, each given a value first (a vector
// without a series is not gathered).
func registered(t *testing.T) []string {
	t.Helper()
	m := metrics.New()
	failed := status.Error(codes.Internal, "x")
	m.NodePublish("p", time.Millisecond)
	m.NodePublishFailed("p", "FailedToMount", codes.Internal, time.Millisecond)
	m.NodeUnpublish(nil, time.Millisecond)
	m.NodeUnpublish(failed, time.Millisecond)
	m.ProviderCall("p", codes.OK, time.Millisecond)
	m.ProviderUnpublish("p", codes.Unimplemented)
	m.RefreshDecision(rotation.DecisionDue)
	m.RotationReconcile("p", true, "", time.Second)
	m.RotationReconcile("p", false, "GRPCProviderError", time.Second)
	m.SecretSynced("p", true, time.Millisecond)
	m.SecretSynced("p", false, time.Millisecond)
	m.WatchProviderHealth(func() map[string]bool { return map[string]bool{"p": true} })
	out := gathered(t, m.Registry())

	// keymount-controller's, on its --metrics-bind-address beside
	// controller-runtime's.
	reg := prometheus.NewRegistry()
	cm, err := secretsync.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cm.ProviderCall("p", codes.OK, time.Millisecond)
	out = append(out, gathered(t, reg)...)

	// The AWS provider's, on keymount-provider-aws --metrics-addr.
	aws := metrics.NewAWS()
	aws.StoreCall("Secrets Manager", "GetSecretValue", "ok", time.Millisecond)
	aws.CacheLookup(true)
	rec := httptest.NewRecorder()
	aws.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("the AWS provider's metrics handler answered %d", rec.Code)
	}
	n := 0
	for line := range strings.Lines(rec.Body.String()) {
		// "# TYPE <name> <type>" opens each family in the text format.
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			n++
			if !slices.Contains(out, f[2]) {
				out = append(out, f[2])
			}
		}
	}
	if n == 0 {
		t.Fatal("the AWS provider's metrics handler serves no metric family")
	}
	return out
}

func gathered(t *testing.T, g prometheus.Gatherer) []string {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		out = append(out, f.GetName())
	}
	return out
}

func isRuntimeMetric(name string) bool {
	for _, p := range runtimePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// TestEveryMetricDocumented: every metric family internal/metrics
// registers is named in metrics.md (the Go and process collectors' as the
// groups `go_*` and `process_*`).
func TestEveryMetricDocumented(t *testing.T) {
	doc := backticked(readDoc(t, "metrics.md"))
	names := registered(t)
	if len(names) < 15 {
		t.Fatalf("the registry gathers %d families, want more: is the registry wired?", len(names))
	}
	for _, n := range names {
		if isRuntimeMetric(n) {
			continue
		}
		if !doc[n] {
			t.Errorf("metrics.md does not name the metric `%s`", n)
		}
	}
	for _, p := range runtimePrefixes {
		if !doc[p+"*"] {
			t.Errorf("metrics.md does not name the group `%s*`", p)
		}
	}
}

// metricRow is the first cell of a table row naming a metric: | `name` |.
var metricRow = regexp.MustCompile("^\\| `([a-z_:][a-z0-9_:]*)` \\|")

// metricRows returns the first cells of the rows of the tables whose header
// starts with "| metric |".
func metricRows(text string) []string {
	var out []string
	inTable := false
	for line := range strings.Lines(text) {
		switch {
		case strings.HasPrefix(line, "| metric |"):
			inTable = true
		case !strings.HasPrefix(line, "|"):
			inTable = false
		case inTable:
			if m := metricRow.FindStringSubmatch(line); m != nil {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// TestDocumentedMetricsExist: every metric the tables of metrics.md list is
// registered: the docs name no metric the driver does not export.
func TestDocumentedMetricsExist(t *testing.T) {
	have := map[string]bool{}
	for _, n := range registered(t) {
		have[n] = true
	}
	rows := metricRows(readDoc(t, "metrics.md"))
	if len(rows) < 10 {
		t.Fatalf("metrics.md has %d metric rows, want a table of every metric", len(rows))
	}
	for _, r := range rows {
		if !have[r] {
			t.Errorf("metrics.md lists `%s`, which internal/metrics does not register", r)
		}
	}
}

// TestRefreshDecisionsDocumented: every decision label value of
// keymount_refresh_decisions_total is in metrics.md and rotation.md.
func TestRefreshDecisionsDocumented(t *testing.T) {
	files := sourceFiles(t)
	ds := stringConstants(files, func(file, name string) bool {
		return file == "rotation/policy.go" && strings.HasPrefix(name, "Decision")
	})
	if len(ds) < 5 {
		t.Fatalf("found %d decisions in rotation/policy.go, want 5", len(ds))
	}
	for _, f := range []string{"metrics.md", "rotation.md"} {
		doc := backticked(readDoc(t, f))
		for _, d := range ds {
			if !doc[d.value] {
				t.Errorf("%s does not name the decision `%s` (%s)", f, d.value, d.name)
			}
		}
	}
}

var (
	// promqlNoise is what holds no metric name in PromQL: strings, label
	// matchers, range durations, and the label lists of by, without, on
	// and ignoring.
	promqlNoise = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|\{[^}]*\}|\[[^\]]*\]|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	// promqlName is a name, with what follows it.
	promqlName     = regexp.MustCompile(`\b\d+(?:\.\d+)?[a-z]*\b|([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\(?)`)
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
)

// promqlMetrics returns the metric names a PromQL expression selects.
func promqlMetrics(expr string) []string {
	var out []string
	for _, m := range promqlName.FindAllStringSubmatch(promqlNoise.ReplaceAllString(expr, " "), -1) {
		if m[1] == "" || m[2] == "(" || promqlKeywords[strings.ToLower(m[1])] {
			continue
		}
		out = append(out, m[1])
	}
	return out
}

// TestPromQLExamplesUseExportedMetrics: every metric a ```promql example of
// the docs selects is exported (a histogram as _bucket, _sum or _count).
func TestPromQLExamplesUseExportedMetrics(t *testing.T) {
	have := map[string]bool{}
	for _, n := range registered(t) {
		have[n] = true
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			have[n+s] = true
		}
	}
	found := 0
	for _, f := range docFiles(t) {
		for _, b := range codeBlocks(t, f) {
			if b.lang != "promql" {
				continue
			}
			names := promqlMetrics(b.body)
			if len(names) == 0 {
				t.Errorf("%s:%d: a PromQL example selects no metric", f, b.line)
			}
			for _, n := range names {
				found++
				if !have[n] {
					t.Errorf("%s:%d: the PromQL example selects %s, which the driver does not export", f, b.line, n)
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("no PromQL example found: metrics.md has some")
	}
}
