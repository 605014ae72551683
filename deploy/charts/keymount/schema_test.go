package keymount_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/strvals"
)

// TestSchemaRefusesUnknownKeys: a key values.schema.json does not know (a
// typo, at any depth the chart reads a fixed set of keys) fails the render,
// and the error names the key's path.
func TestSchemaRefusesUnknownKeys(t *testing.T) {
	ch := loadChart(t)
	for _, tc := range []struct {
		set, path string
	}{
		{"syncSecrets.enabled=true", "syncSecrets"},
		{"linux.imag.repository=x", "imag"},
		{"linux.image.repo=x", "repo"},
		{"linux.registrar.enable=true", "enable"},
		{"linux.crds.enabeld=false", "enabeld"},
		{"windows.enabeld=true", "enabeld"},
		{"livenessProbe.prot=9808", "prot"},
		{"providers.aws.regoin=eu-west-1", "regoin"},
		{"providers.vault.tokenAudience=vault", "tokenAudience"},
		{"providers.gcp.enabled=true", "gcp"},
		{"controller.fanout.enable=true", "enable"},
		{"metrics.servcie.enabled=false", "servcie"},
		{"tokenRequests[0].audiance=vault", "audiance"},
	} {
		vals := map[string]any{}
		if err := strvals.ParseInto(tc.set, vals); err != nil {
			t.Fatal(err)
		}
		_, err := renderRaw(ch, vals)
		if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), "additional") {
			t.Errorf("--set %s: render error %v, want one naming %s as not allowed", tc.set, err, tc.path)
		}
	}
}

// TestSchemaRefusesWrongTypes: a value of the wrong type fails the render,
// and the error names the key's path.
func TestSchemaRefusesWrongTypes(t *testing.T) {
	ch := loadChart(t)
	for _, tc := range []struct {
		vals map[string]any
		path string
	}{
		{map[string]any{"syncSecret": map[string]any{"enabled": "yes"}}, "/syncSecret/enabled"},
		{map[string]any{"enableSecretRotation": "true"}, "/enableSecretRotation"},
		{map[string]any{"livenessProbe": map[string]any{"port": "9808"}}, "/livenessProbe/port"},
		{map[string]any{"linux": map[string]any{"tolerations": map[string]any{"operator": "Exists"}}}, "/linux/tolerations"},
		{map[string]any{"linux": map[string]any{"podLabels": map[string]any{"tier": 1}}}, "/linux/podLabels/tier"},
		{map[string]any{"linux": map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}}, "/linux/image/pullPolicy"},
		{map[string]any{"linux": map[string]any{"additionalProvidersDirs": "/etc/providers"}}, "/linux/additionalProvidersDirs"},
		{map[string]any{"automountServiceAccountToken": "false"}, "/automountServiceAccountToken"},
		{map[string]any{"maxCallRecvMsgSize": "4MiB"}, "/maxCallRecvMsgSize"},
		{map[string]any{"providers": map[string]any{"vault": map[string]any{"tokenAudiences": "vault"}}}, "/providers/vault/tokenAudiences"},
		{map[string]any{"controller": map[string]any{"replicas": "2"}}, "/controller/replicas"},
	} {
		_, err := renderRaw(ch, tc.vals)
		if err == nil || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("values %v: render error %v, want one naming %s", tc.vals, err, tc.path)
		}
	}
}

// TestSchemaAcceptsEveryExample: every values file of testdata/ and every
// `--set` of a helm command in the docs renders (the schema refuses none of
// them).
func TestSchemaAcceptsEveryExample(t *testing.T) {
	ch := loadChart(t)
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("testdata values files %v: %v", files, err)
	}
	for _, f := range files {
		if _, err := renderRaw(ch, readValues(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	docs, err := filepath.Glob("../../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "README.md", "../../../README.md")
	setFlag := regexp.MustCompile(`--set ([^ \x60]+)`)
	examples := 0
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		// A command continued over lines (\) is one command.
		text := strings.ReplaceAll(string(data), "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			if !strings.Contains(line, "deploy/charts/keymount") || !strings.Contains(line, "--set ") {
				continue
			}
			vals := map[string]any{}
			for _, m := range setFlag.FindAllStringSubmatch(line, -1) {
				if err := strvals.ParseInto(m[1], vals); err != nil {
					t.Fatalf("%s: --set %s: %v", doc, m[1], err)
				}
			}
			examples++
			if _, err := renderRaw(ch, vals); err != nil {
				t.Errorf("%s: %q: %v", doc, strings.TrimSpace(line), err)
			}
		}
	}
	if examples == 0 {
		t.Error("found no helm command with --set in the docs")
	}
}
