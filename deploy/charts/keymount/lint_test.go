package keymount_test

import (
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLint runs `helm lint` (Helm's linter: Chart.yaml, values, templates
// rendered and parsed as Kubernetes YAML, dependencies) with each values
// file. A warning fails as an error does: `helm lint --strict`.
func TestLint(t *testing.T) {
	for _, f := range valuesFiles {
		t.Run(filepath.Base(f), func(t *testing.T) {
			linter := lint.AllWithKubeVersion(chartDir, readValues(t, f), namespace, &kubeVersion)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
			if linter.HighestSeverity >= support.WarningSev {
				t.Errorf("helm lint: highest severity %d", linter.HighestSeverity)
			}
		})
	}
}
