package docs_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/keymount/keymount/controller/telemetry"
	"github.com/keymount/keymount/internal/metrics"
	"github.com/keymount/keymount/rotation"
)

// The binaries that serve metrics, as docs/metrics.md's headings and the
// chart's rule groups name them.
const (
	binDriver     = "keymount-driver"
	binController = "keymount-controller"
	binAWS        = "keymount-provider-aws"
	binVault      = "keymount-provider-vault"
)

var binaryNames = []string{binDriver, binController, binAWS, binVault}

// binaryMetrics is what one binary serves: the metric families its
// registry gathers (each given a value first: a vector without a series
// is not gathered), built by the constructor the binary itself calls.
type binaryMetrics map[string]bool

// has reports whether the binary serves name, a histogram also as its
// _bucket, _sum and _count series.
func (b binaryMetrics) has(name string) bool {
	if b[name] {
		return true
	}
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, s); ok && b[base] {
			return true
		}
	}
	return false
}

// served returns, per binary, the metric families it serves.
func served(t *testing.T) map[string]binaryMetrics {
	t.Helper()
	out := map[string]binaryMetrics{
		binDriver: driverMetrics(t), binController: controllerMetrics(t),
		binAWS: awsMetrics(t), binVault: vaultMetrics(t),
	}
	for name, b := range out {
		if len(b) < 5 {
			t.Fatalf("%s serves %d metric families, want more: is its registry wired?", name, len(b))
		}
	}
	return out
}

// driverMetrics: keymount-driver's registry (internal/metrics.New, as
// cmd/keymount-driver's newMetrics makes it).
func driverMetrics(t *testing.T) binaryMetrics {
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
	return gathered(t, m.Registry())
}

// controllerMetrics: keymount-controller's registry, controller-runtime's
// (its own families) with keymount-controller's (telemetry.Register, as
// cmd/keymount-controller's run calls it) on it.
func controllerMetrics(t *testing.T) binaryMetrics {
	reg := prometheus.NewRegistry()
	m, err := telemetry.Register(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.SecretSync.ProviderCall("p", codes.OK, time.Millisecond)
	m.Fanout.Init("reflector")
	now := time.Now()
	m.Fanout.Propagated("reflector", now.Add(-time.Second), now)
	out := gathered(t, reg)
	for n := range gathered(t, crmetrics.Registry) {
		out[n] = true
	}
	return out
}

// awsMetrics: keymount-provider-aws's (internal/metrics.NewAWS), as its
// --metrics-addr serves them.
func awsMetrics(t *testing.T) binaryMetrics {
	m := metrics.NewAWS()
	m.StoreCall("Secrets Manager", "GetSecretValue", "ok", time.Millisecond)
	m.CacheLookup(true)
	m.CredentialRequest("sts", false, time.Millisecond)
	return servedBy(t, m.Handler())
}

// vaultMetrics: keymount-provider-vault's (internal/metrics.NewVault), as
// its --metrics-addr serves them.
func vaultMetrics(t *testing.T) binaryMetrics {
	m := metrics.NewVault()
	m.VaultRequest("login", false)
	m.LeaseReissued()
	return servedBy(t, m.Handler())
}

// servedBy returns the families h serves on GET /metrics ("# TYPE <name>
// <type>" opens each in the text format).
func servedBy(t *testing.T, h http.Handler) binaryMetrics {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("metrics handler answered %d", rec.Code)
	}
	out := binaryMetrics{}
	for line := range strings.Lines(rec.Body.String()) {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
		}
	}
	return out
}

func gathered(t *testing.T, g prometheus.Gatherer) binaryMetrics {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := binaryMetrics{}
	for _, f := range families {
		out[f.GetName()] = true
	}
	return out
}

// union is every metric any binary serves.
func union(all map[string]binaryMetrics) binaryMetrics {
	out := binaryMetrics{}
	for _, b := range all {
		for n := range b {
			out[n] = true
		}
	}
	return out
}

// metricsSection is the text of docs/metrics.md under a heading naming one
// binary, up to the next heading of its level or higher.
type metricsSection struct {
	binary, heading, text string
}

// binarySections splits metrics.md into the sections whose "##" heading
// names a binary ("## The AWS provider's metrics (keymount-provider-aws)");
// the others' text (scraping, queries, alert examples) comes back as rest.
func binarySections(text string) (sections []metricsSection, rest string) {
	var cur *metricsSection
	var other strings.Builder
	for line := range strings.Lines(text) {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			cur = nil
			for _, b := range binaryNames {
				if strings.Contains(h, "("+b+")") {
					sections = append(sections, metricsSection{binary: b, heading: strings.TrimSpace(h)})
					cur = &sections[len(sections)-1]
				}
			}
		}
		if cur != nil {
			cur.text += line
		} else {
			other.WriteString(line)
		}
	}
	return sections, other.String()
}

// groups are the `prefix_*` groups a section names (`go_*`,
// `controller_runtime_*`): families it documents as a group.
func groups(text string) []string {
	var out []string
	for s := range backticked(text) {
		if p, ok := strings.CutSuffix(s, "*"); ok && strings.HasSuffix(p, "_") && !strings.ContainsAny(p, " `{") {
			out = append(out, p)
		}
	}
	return out
}

// namedMetrics returns the metric names a text names in backticks (a name,
// or a PromQL expression such as `rate(x_total{a="b"}[5m])`) that look
// like keymount's (keymount_...) or that some binary serves: label names
// and values, and upstream's retired names (total_node_publish), are not
// metrics of a keymount binary.
func namedMetrics(text string, known binaryMetrics) []string {
	var out []string
	for s := range backticked(text) {
		for _, n := range promqlMetrics(s) {
			// "keymount_" alone is the prefix, not a metric.
			metric := strings.HasPrefix(n, "keymount_") && !strings.HasSuffix(n, "_")
			if (metric || known.has(n)) && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestEveryMetricDocumented: every metric family a binary serves is named
// in the section of metrics.md about that binary, or in one of the groups
// it names (`go_*`, `process_*`, controller-runtime's).
func TestEveryMetricDocumented(t *testing.T) {
	all := served(t)
	sections, _ := binarySections(readDoc(t, "metrics.md"))
	text := map[string]string{}
	for _, s := range sections {
		text[s.binary] += s.text
	}
	for _, b := range binaryNames {
		if text[b] == "" {
			t.Errorf("metrics.md has no section whose heading names (%s)", b)
			continue
		}
		doc, gs := backticked(text[b]), groups(text[b])
		for n := range all[b] {
			inGroup := slices.ContainsFunc(gs, func(p string) bool { return strings.HasPrefix(n, p) })
			if !doc[n] && !inGroup {
				t.Errorf("%s serves `%s`, which its section of metrics.md does not name", b, n)
			}
		}
	}
}

// TestDocumentedMetricsExist: every metric a section of metrics.md names,
// in its tables or its text, is served by the binary its heading names;
// every metric the rest of the page names is served by some binary.
func TestDocumentedMetricsExist(t *testing.T) {
	all := served(t)
	known := union(all)
	sections, rest := binarySections(readDoc(t, "metrics.md"))
	rows := 0
	for _, s := range sections {
		for _, r := range metricRows(s.text) {
			rows++
			if !all[s.binary].has(r) {
				t.Errorf("metrics.md, %q: the table lists `%s`, which %s does not serve", s.heading, r, s.binary)
			}
		}
		for _, n := range namedMetrics(s.text, known) {
			if !all[s.binary].has(n) {
				t.Errorf("metrics.md, %q: names `%s`, which %s does not serve", s.heading, n, s.binary)
			}
		}
	}
	if rows < 30 {
		t.Fatalf("metrics.md's binary sections have %d metric rows, want a table of every metric", rows)
	}
	for _, n := range namedMetrics(rest, known) {
		if !known.has(n) {
			t.Errorf("metrics.md names `%s`, which no binary serves", n)
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
// the docs selects is served by some binary (a histogram as _bucket, _sum
// or _count).
func TestPromQLExamplesUseExportedMetrics(t *testing.T) {
	have := union(served(t))
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
				if !have.has(n) {
					t.Errorf("%s:%d: the PromQL example selects %s, which no keymount binary serves", f, b.line, n)
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("no PromQL example found: metrics.md has some")
	}
}

// chartDir is the Helm chart.
const chartDir = "../deploy/charts/keymount"

// chartMetricName is a keymount metric named in the chart's text.
var chartMetricName = regexp.MustCompile(`\bkeymount_[a-z0-9_]*[a-z0-9]\b`)

// TestChartMetricsExist: every keymount metric the chart names (its
// values' comments, README, templates and their comments) is served by a
// keymount binary.
func TestChartMetricsExist(t *testing.T) {
	have := union(served(t))
	files := []string{filepath.Join(chartDir, "values.yaml"), filepath.Join(chartDir, "README.md")}
	templates, err := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, templates...)
	named := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range chartMetricName.FindAllString(string(b), -1) {
			named++
			if !have.has(n) {
				t.Errorf("%s names %s, which no keymount binary serves", f, n)
			}
		}
	}
	if named == 0 {
		t.Fatal("the chart names no keymount metric: its PrometheusRule does")
	}
}

// chartRules renders the chart's PrometheusRule with every alert example
// on and returns its expressions by rule group, and the alerts' names.
func chartRules(t *testing.T) (exprs map[string][]string, alerts []string) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.37.1", Major: "1", Minor: "37"}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "keymount", Namespace: "kube-system", IsInstall: true}, caps)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(out["keymount/templates/prometheusrule.yaml"]), &rule); err != nil {
		t.Fatal(err)
	}
	if rule.Kind != "PrometheusRule" {
		t.Fatalf("metrics.prometheusRule.enabled renders %q, want a PrometheusRule", rule.Kind)
	}
	exprs = map[string][]string{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			exprs[g.Name] = append(exprs[g.Name], r.Expr)
			alerts = append(alerts, r.Alert)
		}
	}
	return exprs, alerts
}

// TestChartAlertsUseServedMetrics: each rule group of the chart's
// PrometheusRule is named after a binary, and every metric its
// expressions select is served by that binary; every alert is in
// metrics.md's alert examples.
func TestChartAlertsUseServedMetrics(t *testing.T) {
	all := served(t)
	exprs, alerts := chartRules(t)
	for group, es := range exprs {
		b, ok := all[group]
		if !ok {
			t.Errorf("rule group %q names no binary (want one of %v)", group, binaryNames)
			continue
		}
		for _, e := range es {
			names := promqlMetrics(e)
			if len(names) == 0 {
				t.Errorf("rule group %s: %q selects no metric", group, e)
			}
			for _, n := range names {
				if !b.has(n) {
					t.Errorf("rule group %s: %q selects %s, which %s does not serve", group, e, n, group)
				}
			}
		}
	}
	// Stale secrets, failing syncs, unhealthy providers at least.
	for _, g := range []string{binController, binDriver} {
		if len(exprs[g]) < 2 {
			t.Errorf("rule group %s has %d alerts, want at least 2", g, len(exprs[g]))
		}
	}
	doc := backticked(readDoc(t, "metrics.md"))
	for _, a := range alerts {
		if !doc[a] {
			t.Errorf("the chart's alert %s is not in metrics.md's alert examples", a)
		}
	}
}
