package template

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLimits(t *testing.T) {
	big := map[string][]byte{"big": []byte(strings.Repeat("x", 600<<10)), "mid": []byte(strings.Repeat("x", 300<<10))}
	tests := []struct {
		name, text string
		want       error
	}{
		{"template text", strings.Repeat("a", MaxTemplateBytes+1), ErrTemplateTooLarge},
		{"output", `{{ .big }}{{ .big }}`, ErrOutputTooLarge},
		{"output by range", `{{ range 100 }}{{ $.big }}{{ end }}`, ErrOutputTooLarge},
		{"repeat", `{{ repeat 1000000000 "ab" }}`, ErrOutputTooLarge},
		{"replace", `{{ replace "" .big .big }}`, ErrOutputTooLarge},
		{"indent", `{{ indent 100000000 "a\nb" }}`, ErrOutputTooLarge},
		{"nindent", `{{ nindent 100000000 "a" }}`, ErrOutputTooLarge},
		{"join", `{{ join .big (until 10) }}`, ErrOutputTooLarge},
		{"wrapWith", `{{ wrapWith 1 .big .big }}`, ErrOutputTooLarge},
		{"regexReplaceAll", `{{ regexReplaceAll "x" .mid "$0$0$0$0" }}`, ErrOutputTooLarge},
		{"regexReplaceAllLiteral", `{{ regexReplaceAllLiteral "x" .mid "yyyy" }}`, ErrOutputTooLarge},
		{"doubling", `{{ $s := "xxxxxxxx" }}{{ range 40 }}{{ $s = cat $s $s }}{{ end }}`, ErrOutputTooLarge},
		{"inputs", `{{ cat .big .big .big .big .big .big .big .big .big .big .big .big .big .big .big }}`, ErrOutputTooLarge},
		{"until", `{{ until 1000000000 }}`, ErrLimit},
		{"until negative", `{{ until -1000000000 }}`, ErrLimit},
		{"untilStep", `{{ untilStep 0 1000000000 1 }}`, ErrLimit},
		{"seq", `{{ seq 1000000000 }}`, ErrLimit},
		{"seq step", `{{ seq 0 1 1000000000 }}`, ErrLimit},
		{"range over int", `{{ range 1000000000000 }}{{ end }}`, ErrLimit},
		{"range over list", `{{ range splitList "" .big }}{{ end }}`, ErrLimit},
		{"recursion", `{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}`, ErrLimit},
		{"fan-out", `{{ define "a" }}{{ template "b" }}{{ template "b" }}{{ end }}{{ define "b" }}{{ template "c" }}{{ template "c" }}{{ end }}{{ define "c" }}c{{ end }}{{ range 10000 }}{{ template "a" }}{{ end }}`, ErrLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Render("limit", tt.text, big)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Render error = %v, want %v", err, tt.want)
			}
			if out != nil {
				t.Errorf("Render returned %d bytes with the error", len(out))
			}
			if !strings.Contains(err.Error(), `"limit"`) {
				t.Errorf("error %q does not name the template", err)
			}
		})
	}
}

func TestLimitsAllowTheLargest(t *testing.T) {
	out, err := Render("fits", `{{ repeat 1024 (repeat 1024 "x") }}`, nil)
	if err != nil {
		t.Fatalf("Render of exactly MaxOutputBytes: %v", err)
	}
	if len(out) != MaxOutputBytes {
		t.Errorf("len = %d, want %d", len(out), MaxOutputBytes)
	}
	if _, err := Render("fits", `{{ range 100000 }}{{ end }}{{ len (until 100000) }}`, nil); err != nil {
		t.Errorf("range and until of MaxRangeItems: %v", err)
	}
}

// TestTimeout: a render that would run for hours stops with ErrTimeout. The
// timeout here is short; the loop would take far longer than any test.
func TestTimeout(t *testing.T) {
	text := `{{ range 100000 }}{{ range 100000 }}{{ range 100000 }}{{ end }}{{ end }}{{ end }}`
	_, err := render("slow", text, nil, 50*time.Millisecond)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("render error = %v, want ErrTimeout", err)
	}
	text = `{{ range 100000 }}{{ range 100000 }}{{ $x := sha256sum "a" }}{{ end }}{{ end }}`
	if _, err := render("slow", text, nil, 50*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("render error = %v, want ErrTimeout", err)
	}
}

func TestPrintfWidth(t *testing.T) {
	for _, text := range []string{`{{ printf "%999999d" 1 }}`, `{{ printf "%.5000f" 1.0 }}`, `{{ printf "%*d" 5 1 }}`, `{{ printf "%0*d" 5 1 }}`} {
		if _, err := Render("w", text, nil); err == nil {
			t.Errorf("Render(%s): nil error, want a width error", text)
		}
	}
	if out, err := Render("w", `{{ printf "%%|%8.3f|%[1]d" 2.5 }}`, nil); err != nil || !strings.HasPrefix(string(out), "%|   2.500|") {
		t.Errorf("printf = %q, %v", out, err)
	}
}
