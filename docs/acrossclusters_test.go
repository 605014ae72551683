package docs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAcrossClustersShowsTheTestedManifests: every file of
// examples/across-clusters, which TestOneCertificateForEveryCluster
// applies, is shown whole in a fenced block of copying-secrets.md's
// "Across clusters", so the guide's manifests are the tested ones.
func TestAcrossClustersShowsTheTestedManifests(t *testing.T) {
	guide, err := os.ReadFile("copying-secrets.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(guide)
	start := strings.Index(section, "### Across clusters")
	if start < 0 {
		t.Fatal(`copying-secrets.md has no "### Across clusters"`)
	}
	section = section[start:]
	if end := strings.Index(section[1:], "\n### "); end >= 0 {
		section = section[:end+1]
	}
	files, err := filepath.Glob("../examples/across-clusters/*")
	if err != nil || len(files) < 4 {
		t.Fatalf("examples/across-clusters: %v, %v; want the two clusters' manifests and the two policies", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(section, "\n"+string(b)+"```") {
			t.Errorf("%s is not shown whole in a fenced block of \"Across clusters\"", f)
		}
	}
}
