package template

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"
)

// The limits of one render. They are documented in docs/templates.md.
const (
	// MaxTemplateBytes bounds the template text.
	MaxTemplateBytes = 64 << 10
	// MaxOutputBytes bounds the rendered output, and any single string a
	// function returns.
	MaxOutputBytes = 1 << 20
	// MaxRangeItems bounds the items one {{range}} walks, and the length of
	// a list built by until, untilStep or seq.
	MaxRangeItems = 100_000
	// MaxTemplateCalls bounds the {{template}} calls of one render (and so
	// the recursion of a template that calls itself).
	MaxTemplateCalls = 1000
	// Timeout bounds the time one render may take. It is checked at every
	// function call, range and template call, so a render stops shortly
	// after it.
	Timeout = 2 * time.Second
)

// Sentinel errors, for errors.Is. Every error Render returns also names the
// template.
var (
	// ErrTemplateTooLarge: the template text exceeds MaxTemplateBytes.
	ErrTemplateTooLarge = errors.New("template text too large")
	// ErrOutputTooLarge: the output, or one value built while rendering,
	// exceeds MaxOutputBytes.
	ErrOutputTooLarge = errors.New("template output too large")
	// ErrLimit: a range, list or template call count exceeds its limit.
	ErrLimit = errors.New("template limit exceeded")
	// ErrTimeout: the render took longer than Timeout.
	ErrTimeout = errors.New("template render timed out")
	// ErrPanic: a function panicked (a bug; the render fails instead).
	ErrPanic = errors.New("template render panicked")
)

// Render executes the template text, named name in errors, with objects as
// dot (object name → content as a string), and returns the output.
//
// Errors name the template and, where text/template knows it, the line,
// column and the missing key or failing function; never a value derived
// from an object (errors.go).
func Render(name, text string, objects map[string][]byte) ([]byte, error) {
	return render(name, text, objects, Timeout)
}

// Validate parses text as Render would, without executing it: an unknown
// function or a syntax error is reported with its line.
func Validate(name, text string) error {
	_, err := parseText(name, text, newBudget(Timeout))
	return err
}

func render(name, text string, objects map[string][]byte, timeout time.Duration) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out = nil
			err = fmt.Errorf("template %q: %w: %T", name, ErrPanic, r)
		}
	}()
	b := newBudget(timeout)
	tmpl, err := parseText(name, text, b)
	if err != nil {
		return nil, err
	}
	data := make(map[string]string, len(objects))
	for k, v := range objects {
		data[k] = string(v)
	}
	w := &limitedBuffer{max: MaxOutputBytes}
	if err := tmpl.Execute(w, data); err != nil {
		var fe *funcError
		if errors.Is(err, ErrOutputTooLarge) && !errors.As(err, &fe) {
			return nil, fmt.Errorf("template %q: %w: more than %d bytes", name, ErrOutputTooLarge, MaxOutputBytes)
		}
		return nil, redact(describe(name, text, err), objects)
	}
	return w.buf.Bytes(), nil
}

// redactedError is an error whose text has the objects' values cut out, a
// second guard behind describe (errors.go), which already shows no value.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact replaces every object value (and every line of one) of at least
// minRedact bytes found in err's text by <redacted>.
func redact(err error, objects map[string][]byte) error {
	const minRedact = 4
	msg := err.Error()
	var secrets []string
	for _, v := range objects {
		s := strings.TrimSpace(string(v))
		if len(s) < minRedact {
			continue
		}
		secrets = append(secrets, s)
		for line := range strings.Lines(s) {
			if line = strings.TrimSpace(line); len(line) >= minRedact && line != s {
				secrets = append(secrets, line)
			}
		}
	}
	// Longest first, so a value is cut whole before a line of it.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	redacted := msg
	for _, s := range secrets {
		redacted = strings.ReplaceAll(redacted, s, "<redacted>")
	}
	if redacted == msg {
		return err
	}
	return &redactedError{err: err, msg: redacted}
}

// parseText parses text with the function set bound to b and inserts the range
// and template-call guards into every tree.
func parseText(name, text string, b *budget) (*template.Template, error) {
	if len(text) > MaxTemplateBytes {
		return nil, fmt.Errorf("template %q: %w: %d bytes, at most %d", name, ErrTemplateTooLarge, len(text), MaxTemplateBytes)
	}
	tmpl, err := template.New(name).Option("missingkey=error").Funcs(b.funcs()).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("template %q: %w", name, err)
	}
	for _, t := range tmpl.Templates() {
		if t.Tree != nil {
			guardTree(t.Root)
		}
	}
	return tmpl, nil
}

// limitedBuffer is the output: a write past max fails with ErrOutputTooLarge,
// which stops the execution.
type limitedBuffer struct {
	buf bytes.Buffer
	max int
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		return 0, ErrOutputTooLarge
	}
	return w.buf.Write(p)
}
