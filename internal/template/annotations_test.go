package template

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromAnnotations(t *testing.T) {
	got, err := FromAnnotations(map[string]string{
		"keymount.io/template.config.yaml":       "user: {{ .username }}",
		"keymount.io/template..dockerconfigjson": `{{ .json }}`,
		"keymount.io/other":                      "ignored",
		"app":                                    "ignored",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Template{
		{Target: ".dockerconfigjson", Annotation: "keymount.io/template..dockerconfigjson", Text: `{{ .json }}`},
		{Target: "config.yaml", Annotation: "keymount.io/template.config.yaml", Text: "user: {{ .username }}"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromAnnotations (-want +got):\n%s", diff)
	}
	rendered, err := RenderAll(got, objects)
	if err != nil {
		t.Fatal(err)
	}
	if string(rendered["config.yaml"]) != "user: admin" {
		t.Errorf("RenderAll[config.yaml] = %q", rendered["config.yaml"])
	}
	if got, err := FromAnnotations(map[string]string{"a": "b"}); err != nil || got != nil {
		t.Errorf("FromAnnotations without templates = %v, %v; want nil, nil", got, err)
	}
}

func TestFromAnnotationsRejects(t *testing.T) {
	for _, tc := range []struct{ key, text, want string }{
		{"keymount.io/template.", "x", "keymount.io/template."},
		{"keymount.io/template...", "x", `".."`},
		{"keymount.io/template.a/b", "x", `"a/b"`},
		{"keymount.io/template.a b", "x", `"a b"`},
		{"keymount.io/template." + strings.Repeat("a", 254), "x", "keymount.io/template.aaa"},
		{"keymount.io/template.ok", "line\n{{ nosuch }}", "ok:2:"},
	} {
		_, err := FromAnnotations(map[string]string{tc.key: tc.text, "keymount.io/template.fine": "{{ .x }}"})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "annotation") {
			t.Errorf("FromAnnotations(%q) error = %v, want one naming the annotation and %s", tc.key, err, tc.want)
		}
		if strings.Contains(tc.text, "nosuch") != !errors.Is(err, ErrInvalidTarget) {
			t.Errorf("FromAnnotations(%q): errors.Is(ErrInvalidTarget) = %v", tc.key, errors.Is(err, ErrInvalidTarget))
		}
	}
}

func TestRenderAllStopsAtFirstError(t *testing.T) {
	tmpls := []Template{{Target: "a", Annotation: "keymount.io/template.a", Text: "{{ .missing }}"}}
	out, err := RenderAll(tmpls, objects)
	if err == nil || out != nil || !strings.Contains(err.Error(), "keymount.io/template.a") {
		t.Errorf("RenderAll = %v, %v; want nil and an error naming the annotation", out, err)
	}
}
