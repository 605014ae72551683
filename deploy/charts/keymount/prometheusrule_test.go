package keymount_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// prometheusRuleValues turns the alert examples on (make chart-lint renders
// it with every testdata file; not in valuesFiles: a dry run against an API
// server without the Prometheus Operator's CRD would refuse it).
const prometheusRuleValues = "testdata/prometheus-rule.yaml"

// prometheusRule is the part of monitoring.coreos.com/v1 PrometheusRule the
// chart writes; decoding is strict, so a misspelt field fails.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// alerts maps each alert of r to its rule, by group.
func (r *prometheusRule) alerts() map[string]rule {
	out := map[string]rule{}
	for _, g := range r.Spec.Groups {
		for _, a := range g.Rules {
			out[g.Name+"/"+a.Alert] = a
		}
	}
	return out
}

// TestPrometheusRuleOffByDefault: no values file of the render tests (the
// defaults, upstream's, every feature) renders a PrometheusRule.
func TestPrometheusRuleOffByDefault(t *testing.T) {
	for _, f := range valuesFiles {
		if r := render(t, f); r.prometheusRule != nil {
			t.Errorf("values %q render a PrometheusRule; the alert examples are off by default", f)
		}
	}
}

// TestPrometheusRule: turned on, one group per binary with its alerts
// (stale secrets, failing syncs, unhealthy providers, ...), the rule's and
// the alerts' labels, the thresholds and waits of the values, and an alert
// turned off left out.
func TestPrometheusRule(t *testing.T) {
	r := render(t, prometheusRuleValues).prometheusRule
	if r == nil {
		t.Fatal("metrics.prometheusRule.enabled renders no PrometheusRule")
	}
	if r.APIVersion != "monitoring.coreos.com/v1" || r.Metadata.Name != releaseName || r.Metadata.Namespace != namespace {
		t.Errorf("PrometheusRule %s %s/%s: want monitoring.coreos.com/v1 %s/%s", r.APIVersion, r.Metadata.Namespace, r.Metadata.Name, namespace, releaseName)
	}
	if r.Metadata.Labels["release"] != "kube-prometheus-stack" || r.Metadata.Labels["app.kubernetes.io/name"] == "" {
		t.Errorf("PrometheusRule labels %v: want the chart's and metrics.prometheusRule.labels", r.Metadata.Labels)
	}
	var groups []string
	for _, g := range r.Spec.Groups {
		groups = append(groups, g.Name)
	}
	if diff := cmp.Diff([]string{"keymount-controller", "keymount-driver", "keymount-provider-vault", "keymount-provider-aws"}, groups); diff != "" {
		t.Errorf("rule groups, one per binary (-want +got):\n%s", diff)
	}
	alerts := r.alerts()
	want := []string{
		"keymount-controller/KeymountFanoutCopiesFailing", "keymount-controller/KeymountSecretSyncFailing",
		"keymount-controller/KeymountSecretSyncStale", "keymount-driver/KeymountProviderUnhealthy",
		"keymount-driver/KeymountVolumeRefreshFailing", "keymount-provider-vault/KeymountVaultLoginsFailing",
	} // awsThrottled is off in the values file
	if diff := cmp.Diff(want, slices.Sorted(maps.Keys(alerts))); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
	stale := alerts["keymount-controller/KeymountSecretSyncStale"]
	if stale.Expr != "max(keymount_controller_sync_stale_seconds) > 7200" || stale.For != "10m" {
		t.Errorf("KeymountSecretSyncStale expr %q for %q: want the values' 7200 seconds and 10m", stale.Expr, stale.For)
	}
	for name, a := range alerts {
		if a.Labels["team"] != "platform" || a.Labels["severity"] == "" || a.For == "" || a.Annotations["summary"] == "" {
			t.Errorf("%s: labels %v, for %q, annotations %v: want alertLabels, a severity, a wait and a summary", name, a.Labels, a.For, a.Annotations)
		}
	}
	if a := alerts["keymount-driver/KeymountProviderUnhealthy"]; a.Expr != "keymount_provider_healthy == 0" || a.Labels["severity"] != "critical" {
		t.Errorf("KeymountProviderUnhealthy: %+v", a)
	}
}

// TestPrometheusRuleLint: helm lint --strict passes with the alert
// examples on (TestLint covers valuesFiles).
func TestPrometheusRuleLint(t *testing.T) {
	linter := lint.AllWithKubeVersion(chartDir, readValues(t, prometheusRuleValues), namespace, &kubeVersion)
	for _, m := range linter.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
	if linter.HighestSeverity >= support.WarningSev {
		t.Errorf("helm lint: highest severity %d", linter.HighestSeverity)
	}
}
