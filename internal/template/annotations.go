package template

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// AnnotationPrefix starts the key of every template annotation:
// keymount.io/template.<target> = <template text>. On a SecretSync the target
// is a data key of the synced Secret; on a SecretProviderClass it is the name
// of a file written into each volume of the class.
const AnnotationPrefix = "keymount.io/template."

// ErrInvalidTarget is returned when a template annotation names a target that is not a valid
// Secret data key or file name.
var ErrInvalidTarget = errors.New("invalid template target")

// Template is one configured template.
type Template struct {
	// Target is the Secret data key or file name the output is written to.
	Target string
	// Annotation is the annotation's key, the template's name in errors.
	Annotation string
	// Text is the template.
	Text string
}

// Render renders the template from objects (see Render).
func (t Template) Render(objects map[string][]byte) ([]byte, error) {
	return Render(t.Annotation, t.Text, objects)
}

// FromAnnotations returns the templates configured in annotations, sorted by
// target. A target must be a valid Secret data key (letters, digits, '-',
// '_' and '.'; not "." or ".."; at most 253 characters), which is also a safe
// file name, and a template must parse; the error names the annotation.
func FromAnnotations(annotations map[string]string) ([]Template, error) {
	var out []Template
	var errs []error
	for key, text := range annotations {
		target, ok := strings.CutPrefix(key, AnnotationPrefix)
		if !ok {
			continue
		}
		if msgs := validation.IsConfigMapKey(target); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("annotation %q: %w %q: %s (the part after %q must be a valid Secret data key and file name)",
				key, ErrInvalidTarget, target, strings.Join(msgs, "; "), AnnotationPrefix))
			continue
		}
		if err := Validate(key, text); err != nil {
			errs = append(errs, fmt.Errorf("annotation %q: %w", key, err))
			continue
		}
		out = append(out, Template{Target: target, Annotation: key, Text: text})
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(out, func(a, b Template) int { return strings.Compare(a.Target, b.Target) })
	return out, nil
}

// RenderAll renders every template from objects and returns target →
// output. The first error stops it.
func RenderAll(templates []Template, objects map[string][]byte) (map[string][]byte, error) {
	if len(templates) == 0 {
		return nil, nil
	}
	out := make(map[string][]byte, len(templates))
	for _, t := range templates {
		b, err := t.Render(objects)
		if err != nil {
			return nil, err
		}
		out[t.Target] = b
	}
	return out, nil
}
