package docs_test

import (
	"testing"

	"github.com/keymount/keymount/internal/template"
)

// TestEveryTemplateFunctionDocumented: templates.md names every function a
// template may call.
func TestEveryTemplateFunctionDocumented(t *testing.T) {
	doc := backticked(readDoc(t, "templates.md"))
	fns := template.Functions()
	if len(fns) < 100 {
		t.Fatalf("template.Functions() has %d names, want the whole set", len(fns))
	}
	for _, fn := range fns {
		if !doc[fn] {
			t.Errorf("templates.md does not name `%s`", fn)
		}
	}
}
