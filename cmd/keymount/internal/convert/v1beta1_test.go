package convert

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestV1beta1ConvertsAsV1 converts every ESO example of testdata/ with its
// apiVersions written as external-secrets.io/v1beta1 (the same schema,
// still in most Git repositories): the output and the issues are those of
// the v1 file.
func TestV1beta1ConvertsAsV1(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "eso-*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("ESO examples: %v, %v", files, err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			beta := strings.ReplaceAll(string(src), "apiVersion: external-secrets.io/v1\n", "apiVersion: external-secrets.io/v1beta1\n")
			if beta == string(src) {
				t.Fatal("no external-secrets.io/v1 document in the file")
			}
			v1Out, v1Issues := convertText(t, string(src))
			betaOut, betaIssues := convertText(t, beta)
			if d := cmp.Diff(v1Out, betaOut); d != "" {
				t.Errorf("output (-v1 +v1beta1):\n%s", d)
			}
			// An object convert does not read is named with its apiVersion.
			norm := func(issues []string) []string {
				for i, is := range issues {
					issues[i] = strings.ReplaceAll(is, "external-secrets.io/v1beta1 ", "external-secrets.io/v1 ")
				}
				return issues
			}
			if d := cmp.Diff(norm(v1Issues), norm(betaIssues)); d != "" {
				t.Errorf("issues (-v1 +v1beta1):\n%s", d)
			}
		})
	}
}

func convertText(t *testing.T, text string) (string, []string) {
	t.Helper()
	res, err := Convert([]Input{{Name: "in.yaml", R: strings.NewReader(text)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := res.Write(&out); err != nil {
		t.Fatal(err)
	}
	var issues []string
	for _, is := range res.Issues {
		issues = append(issues, is.String())
	}
	return out.String(), issues
}
