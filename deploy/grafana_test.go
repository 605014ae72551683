package deploy_test

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/internal/metrics"
	"github.com/keymount/keymount/rotation"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// TestGrafanaDashboard: every PromQL expression of the shipped dashboard
// (panels and template variables) names only metrics the driver's registry
// exports, and the dashboard shows every kind of metric it should.
func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile("grafana/keymount-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	exported := exportedMetrics(t)
	used := map[string]bool{}
	check := func(where, expr string) {
		names := promqlMetrics(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, expr)
		}
		labels := map[string]bool{"instance": true, "job": true} // added by the scrape
		for _, name := range names {
			used[name] = true
			if exported[name] == nil {
				t.Errorf("%s: %q names %s, which the driver does not export", where, expr, name)
			}
			for l := range exported[name] {
				labels[l] = true
			}
		}
		for _, l := range promqlGrouping(expr) {
			if !labels[l] {
				t.Errorf("%s: %q groups by %s, which none of its metrics carries", where, expr, l)
			}
		}
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, target := range p.Targets {
				check("panel "+p.Title, target.Expr)
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := json.Marshal(v.Query)
		if err != nil {
			t.Fatal(err)
		}
		m := labelValues.FindStringSubmatch(string(q))
		if m == nil {
			t.Errorf("variable %s: query %s is not label_values(metric, label)", v.Name, q)
			continue
		}
		check("variable "+v.Name, m[1])
	}
	for _, want := range []string{
		"node_publish_total", "node_publish_error_total", "node_unpublish_total", "node_unpublish_error_total",
		"rotation_reconcile_total", "rotation_reconcile_error_total", "rotation_reconcile_duration_sec_bucket",
		"keymount_provider_call_duration_seconds_bucket", "keymount_provider_call_duration_seconds_count",
		"keymount_refresh_decisions_total", "keymount_secret_sync_writes_total", "keymount_secret_sync_skipped_total",
		"keymount_api_write_queue_depth", "keymount_api_write_queue_oldest_seconds",
	} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

var labelValues = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)

// exportedMetrics are the series names the driver's registry exports once
// every metric has a value (a histogram as its _bucket, _sum and _count),
// each with its label names (le on a _bucket).
func exportedMetrics(t *testing.T) map[string]map[string]bool {
	t.Helper()
	m := metrics.New()
	failed := status.Error(codes.Internal, "x")
	m.NodePublish("p", time.Millisecond)
	m.NodePublishFailed("p", "FailedToMount", codes.Internal, time.Millisecond)
	m.NodeUnpublish(nil, time.Millisecond)
	m.NodeUnpublish(failed, time.Millisecond)
	m.ProviderCall("p", codes.OK, time.Millisecond)
	m.RefreshDecision(rotation.DecisionDue)
	m.RotationReconcile("p", true, "", time.Second)
	m.RotationReconcile("p", false, "GRPCProviderError", time.Second)
	m.SecretSynced("p", true, time.Millisecond)
	m.SecretSynced("p", false, time.Millisecond)
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, f := range families {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		name := f.GetName()
		switch f.GetType().String() {
		case "HISTOGRAM":
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = withLe(labels), labels, labels
		case "SUMMARY":
			out[name], out[name+"_sum"], out[name+"_count"] = labels, labels, labels
		default:
			out[name] = labels
		}
	}
	return out
}

func withLe(labels map[string]bool) map[string]bool {
	out := maps.Clone(labels)
	out["le"] = true
	return out
}

// promqlGroupingLists are the label lists of "by (...)" aggregations.
var promqlGroupingLists = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)

// promqlGrouping returns the labels expr's aggregations group by.
func promqlGrouping(expr string) []string {
	var out []string
	for _, m := range promqlGroupingLists.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

var (
	// promqlStrings, promqlMatchers and promqlRanges are what holds no
	// metric name: strings, label matchers, range durations.
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	// promqlLabelLists are the label lists of aggregations and vector
	// matching.
	promqlLabelLists = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	// promqlTokens are numbers and durations (skipped whole: 1e-9, 5m,
	// 1h30m) and names.
	promqlTokens   = regexp.MustCompile(`\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[a-zA-Z0-9_]*|([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
		"group_left", "group_right", "inf", "nan", "Inf", "NaN"}
)

// promqlMetrics returns the metric names expr selects: every name that is
// neither a function or aggregation (followed by "("), a keyword, a label
// nor in a string, a label matcher or a range.
func promqlMetrics(expr string) []string {
	s := promqlStrings.ReplaceAllString(expr, `""`)
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlRanges.ReplaceAllString(s, " ")
	s = promqlLabelLists.ReplaceAllString(s, " ")
	var names []string
	for _, m := range promqlTokens.FindAllStringSubmatchIndex(s, -1) {
		if m[2] < 0 {
			continue // a number
		}
		name := s[m[2]:m[3]]
		if strings.HasPrefix(strings.TrimSpace(s[m[3]:]), "(") || slices.Contains(promqlKeywords, name) {
			continue
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

func TestPromQLMetrics(t *testing.T) {
	for expr, want := range map[string][]string{
		`histogram_quantile(0.99, sum by (le, provider) (rate(x_bucket{a="b{c}", d=~"$d"}[$__rate_interval])))`: {"x_bucket"},
		`sum(rate(a[5m])) / clamp_min(sum(rate(b[5m])) + c, 1e-9)`:                                              {"a", "b", "c"},
		`max by (instance) (up) and on (instance) offset_metric offset 5m`:                                      {"up", "offset_metric"},
		`sum without (code) (rate(calls_total{code!="OK"}[1m])) > bool 0`:                                       {"calls_total"},
		`vector(1)`: nil,
	} {
		if got := promqlMetrics(expr); !slices.Equal(got, want) {
			t.Errorf("promqlMetrics(%q) = %q, want %q", expr, got, want)
		}
	}
}
