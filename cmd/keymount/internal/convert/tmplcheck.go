package convert

import (
	"github.com/keymount/keymount/internal/template"
)

// checkTemplate parses a converted template as keymount-controller will
// (package internal/template: Go text/template with ESO's engine v2
// functions), so that a syntax error or a function keymount does not offer
// is reported by the conversion, naming the annotation.
func checkTemplate(name, text string) error {
	return template.Validate(name, text)
}
