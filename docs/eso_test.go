package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// esoAPIVersion is an External Secrets Operator apiVersion in a manifest,
// with the kind on the next line.
var esoAPIVersion = regexp.MustCompile(`apiVersion:\s*external-secrets\.io/(\S+)\s*\nkind:\s*(\S+)`)

// TestESOGuideUsesServedAPI: every External Secrets Operator manifest of
// the ESO migration guide is external-secrets.io/v1, the version current
// ESO serves (v1beta1 is no longer served), but a PushSecret, which ESO
// serves at v1alpha1 only.
func TestESOGuideUsesServedAPI(t *testing.T) {
	found := esoAPIVersion.FindAllStringSubmatch(readDoc(t, "migrating-from-external-secrets.md"), -1)
	if len(found) == 0 {
		t.Fatal("migrating-from-external-secrets.md has no external-secrets.io manifest: is the parsing broken?")
	}
	for _, m := range found {
		want := "v1"
		if m[2] == "PushSecret" {
			want = "v1alpha1"
		}
		if m[1] != want {
			t.Errorf("migrating-from-external-secrets.md's %s uses external-secrets.io/%s; use external-secrets.io/%s", m[2], m[1], want)
		}
	}
}

// TestESOGuidePushSecretExample: the PushSecret example of the ESO
// migration guide is the converter's corpus case push-guide: the ESO
// PushSecret shown is the case's, and the output shown is the case's golden
// output (which TestCorpus checks against keymount convert).
func TestESOGuidePushSecretExample(t *testing.T) {
	const file = "migrating-from-external-secrets.md"
	corpus := filepath.Join("..", "cmd", "keymount", "internal", "convert", "testdata", "corpus")
	in, err := os.ReadFile(filepath.Join(corpus, "push-guide.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join(corpus, "push-guide.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var eso, converted string
	for _, b := range codeBlocks(t, file) {
		switch {
		case strings.Contains(b.body, "apiVersion: external-secrets.io/v1alpha1\nkind: PushSecret"):
			eso = b.body
		case strings.Contains(b.body, "converted by keymount convert from PushSecret"):
			converted = b.body
		}
	}
	if eso == "" || converted == "" {
		t.Fatalf("%s shows no ESO PushSecret and its conversion", file)
	}
	if !strings.Contains(string(in), eso) {
		t.Errorf("%s's ESO PushSecret is not the one of corpus case push-guide:\n%s", file, eso)
	}
	if converted != string(out) {
		t.Errorf("%s's converted PushSecret differs from corpus case push-guide's golden output:\n%s", file, cmp.Diff(string(out), converted))
	}
}
