package docs_test

import (
	"regexp"
	"testing"
)

// esoAPIVersion is an External Secrets Operator apiVersion in a manifest.
var esoAPIVersion = regexp.MustCompile(`apiVersion:\s*external-secrets\.io/(\S+)`)

// TestESOGuideUsesServedAPI: every External Secrets Operator manifest of
// the ESO migration guide is external-secrets.io/v1, the version current
// ESO serves (v1beta1 is no longer served).
func TestESOGuideUsesServedAPI(t *testing.T) {
	found := esoAPIVersion.FindAllStringSubmatch(readDoc(t, "migrating-from-external-secrets.md"), -1)
	if len(found) == 0 {
		t.Fatal("migrating-from-external-secrets.md has no external-secrets.io manifest: is the parsing broken?")
	}
	for _, m := range found {
		if m[1] != "v1" {
			t.Errorf("migrating-from-external-secrets.md uses external-secrets.io/%s; use external-secrets.io/v1", m[1])
		}
	}
}
