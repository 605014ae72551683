package template

import (
	"errors"
	"testing"
	"time"
)

// FuzzRender: no template, whatever its text and objects, panics, escapes
// the limits or runs past the timeout by much. The seeds run in go test.
func FuzzRender(f *testing.F) {
	for _, seed := range []string{
		`{{ .a }}`,
		`{{ index . "b-c" | upper }}`,
		`{{ range $k, $v := . }}{{ $k }}={{ $v | b64enc }};{{ end }}`,
		`{{ .a | fromJson | toYaml }}`,
		`{{ define "x" }}{{ template "x" . }}{{ end }}{{ template "x" . }}`,
		`{{ range 1000000 }}{{ end }}`,
		`{{ repeat 99999999 .a }}`,
		`{{ printf "%*d" 1 2 }}`,
		`{{ pkcs12cert .a }}{{ filterCertChain "leaf" .a }}{{ jwkPublicKeyPem .a }}`,
		`{{ $s := .a }}{{ range 30 }}{{ $s = cat $s $s }}{{ end }}{{ $s }}`,
		`{{ seq 5 1 }}{{ untilStep 10 0 -3 }}{{ regexReplaceAll "a*" .a "$0$0" }}`,
		`{{ if }}`, `{{ .nope }}`, `{{ slice .a 5 1 }}`, `{{ div 1 0 }}`, `{{ fail "x" }}`,
	} {
		f.Add(seed, "value", `{"k":[1,2]}`)
	}
	f.Fuzz(func(t *testing.T, text, a, b string) {
		start := time.Now()
		out, err := Render("fuzz", text, map[string][]byte{"a": []byte(a), "b-c": []byte(b)})
		if err == nil && len(out) > MaxOutputBytes {
			t.Fatalf("output of %d bytes", len(out))
		}
		if err != nil && out != nil {
			t.Fatalf("output with error %v", err)
		}
		if errors.Is(err, ErrPanic) {
			t.Fatalf("panic: %v", err)
		}
		if d := time.Since(start); d > 10*Timeout {
			t.Fatalf("render took %v", d)
		}
	})
}
