package template

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
)

// A render error ends in conditions, events, kubelet's pod events and logs,
// so it never shows a value derived from an object (a secret): not the value,
// not what a function made of it ({{ .password | upper | fail }}), not what
// text/template quotes of it ("range can't iterate over ..."). It names the
// template, the line and column, the part of the template (text/template's
// excerpt of the template's own text), the function, and what went wrong in
// words of keymount's or text/template's that hold no value: an unknown
// function message is hidden (fail closed), keymount's own messages show a
// key or message only when the template's text spells it (its author typed
// it, as in {{ index . "db-pasword" }} or {{ fail "no host" }}).

// hiddenMessage replaces the message of a function whose error may quote its
// arguments.
const hiddenMessage = "its message is not shown, as it may quote a value derived from a secret"

// funcError is the error of a function of the set, as budget.wrap returns it.
type funcError struct {
	fn  string
	err error
}

func (e *funcError) Error() string { return e.err.Error() }
func (e *funcError) Unwrap() error { return e.err }

// safeError is an error of keymount's own functions whose text holds no
// value of an object except in args: a string argument is shown only when
// the template's text spells it (quoted), any other only when it is a count
// or a type name; else it reads <hidden>.
type safeError struct {
	format string
	args   []any
	err    error
}

// count is a safeError argument shown as is: a length or limit, never a
// value.
type count int

// typeName is a safeError argument shown as is: a Go type or kind.
type typeName string

func safeErrorf(format string, args ...any) error {
	return &safeError{format: format, args: args}
}

func (e *safeError) Error() string { return fmt.Sprintf(e.format, e.args...) }
func (e *safeError) Unwrap() error { return e.err }

// shown is the error's text with what the template's text does not spell
// hidden.
func (e *safeError) shown(text string) string {
	args := make([]any, len(e.args))
	for i, a := range e.args {
		switch v := a.(type) {
		case count:
			args[i] = int(v)
		case typeName:
			args[i] = string(v)
		case string:
			if v != "" && (strings.Contains(text, strconv.Quote(v)) || strings.Contains(text, "`"+v+"`")) {
				args[i] = v
			} else {
				args[i] = hidden{}
			}
		default:
			args[i] = hidden{}
		}
	}
	return fmt.Sprintf(e.format, args...)
}

// hidden prints <hidden> whatever the verb.
type hidden struct{}

func (hidden) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("<hidden>")) }

// renderError is a failed render: msg names the template, where and what;
// it unwraps to the sentinel the failure is, if any, never to the errors
// whose text it replaced.
type renderError struct {
	msg      string
	sentinel error
}

func (e *renderError) Error() string { return e.msg }
func (e *renderError) Unwrap() error { return e.sentinel }

var sentinels = []error{ErrOutputTooLarge, ErrLimit, ErrTimeout, ErrPanic}

// execLocation matches the start of text/template's execution errors: the
// template's name (that of the text, also within a {{define}}), line,
// column and the excerpt of the template's text.
var execLocation = regexp.MustCompile(`^template: ([^:]*):(\d+):(\d+): executing "[^"]*" at <(.*?)>: `)

// describe turns an error of executing the template name (text) into one that
// shows no value: see the comment at the top of this file.
func describe(name, text string, err error) error {
	where, detail := "", ""
	msg := err.Error()
	if m := execLocation.FindStringSubmatch(msg); m != nil {
		node := strings.ReplaceAll(strings.ReplaceAll(m[4], rangeGuard, "range"), callGuard, "template")
		where = fmt.Sprintf(" line %s, column %s, at <%s>", m[2], m[3], node)
		detail = msg[len(m[0]):]
	}
	var fe *funcError
	switch {
	case errors.As(err, &fe):
		detail = "error calling " + fe.fn + ": " + funcDetail(fe.fn, text, fe.err)
	case sentinel(err) != nil:
		detail = sentinelMessage(err)
	case strings.HasPrefix(detail, "range can't iterate over "), strings.HasPrefix(detail, "can't use ") && strings.HasSuffix(detail, " to iterate over more than one variable"):
		detail = "range can't iterate over this value: a list, map or number is needed"
	case panicked(detail) != "":
		// A sprig function that panics (urlParse) reaches text/template,
		// which makes the panic its error, past budget.wrap.
		detail = "error calling " + panicked(detail) + ": " + hiddenMessage
	case !builtinSafe(detail):
		detail = "text/template refused a value here (" + hiddenMessage + ")"
	}
	out := fmt.Sprintf("template %q:%s: %s", name, where, detail)
	return &renderError{msg: out, sentinel: sentinel(err)}
}

// funcDetail is what may be shown of the error of the function fn.
func funcDetail(fn, text string, err error) string {
	if sentinel(err) != nil {
		return sentinelMessage(err)
	}
	var se *safeError
	if errors.As(err, &se) {
		shown := strings.TrimPrefix(se.shown(text), fn+": ")
		if fn == "fail" && strings.Contains(shown, "<hidden>") {
			return "its message is not shown: only a message the template spells, as in {{ fail \"no host\" }}, is"
		}
		return shown
	}
	if d := libraryDetail(err); d != "" {
		return d
	}
	return hiddenMessage
}

// libraryDetail describes the errors of the standard library the functions
// return by what they hold that is not a value: an offset, a kind of
// mistake. "" for any other error.
func libraryDetail(err error) string {
	var (
		jsonErr   *json.SyntaxError
		b64Err    base64.CorruptInputError
		b32Err    base32.CorruptInputError
		regexpErr *syntax.Error
		numErr    *strconv.NumError
	)
	switch {
	case errors.As(err, &jsonErr):
		return fmt.Sprintf("invalid JSON at byte offset %d", jsonErr.Offset)
	case errors.As(err, &b64Err):
		return fmt.Sprintf("illegal base64 data at input byte %d", int64(b64Err))
	case errors.As(err, &b32Err):
		return fmt.Sprintf("illegal base32 data at input byte %d", int64(b32Err))
	case errors.As(err, &regexpErr):
		return "invalid regular expression: " + string(regexpErr.Code)
	case errors.As(err, &numErr):
		return "not a number: " + numErr.Err.Error()
	}
	return ""
}

// sentinel returns the sentinel err is, or nil.
func sentinel(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// sentinelMessage is the text of keymount's error that wraps the sentinel
// ("template limit exceeded: range over more than 100000 items"): made of
// limits and function names only.
func sentinelMessage(err error) string {
	s := sentinel(err)
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), s.Error()) {
			return strings.ReplaceAll(strings.ReplaceAll(e.Error(), rangeGuard, "range"), callGuard, "template")
		}
	}
	return s.Error()
}

// builtinSafe are text/template's own execution messages that hold no
// value: a key or field name is the template's text, the rest types and
// counts.
var builtinSafe = regexp.MustCompile(`^(` + strings.Join([]string{
	`map has no entry for key "[^"]*"`,
	`can't evaluate field \w+ in type [\w.*\[\]]+`,
	`nil pointer evaluating [\w.*\[\]]+\.\w+`,
	`wrong type for value; expected [\w.*\[\]{} ]+; got [\w.*\[\]{} ]+`,
	`wrong number of args for \w+: want (at least )?\d+ got \d+`,
	`invalid value; expected [\w.*\[\]{} ]+`,
	`template "[^"]*" not defined`,
	`error calling len: len of (type [\w.*\[\]{} ]+|nil pointer|untyped nil)`,
	`error calling (eq|ne|lt|le|gt|ge): (incompatible types for comparison|invalid type for comparison|missing argument for comparison)`,
	`error calling (eq|ne|lt|le|gt|ge): incompatible types for comparison: [\w.*\[\]{} ]+ and [\w.*\[\]{} ]+`,
	`index of untyped nil`,
	`nil is not a command`,
}, "|") + `)$`).MatchString

// callOf matches text/template's "error calling <function>: ".
var callOf = regexp.MustCompile(`^error calling (\w+): `)

// panicked returns the function of the set a text/template error of calling
// it names, or "".
func panicked(detail string) string {
	if m := callOf.FindStringSubmatch(detail); m != nil {
		if _, ok := functions[m[1]]; ok {
			return m[1]
		}
	}
	return ""
}
