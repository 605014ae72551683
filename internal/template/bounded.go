package template

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/Masterminds/sprig/v3"
)

// MaxFormatWidth bounds a width or precision in a printf format.
const MaxFormatWidth = 1024

// The sprig functions the bounded versions call once their output is known
// to fit.
var (
	sprigToString = sprigFunc[func(any) []string]("toStrings")
	sprigWrapWith = sprigFunc[func(int, string, string) string]("wrapWith")
	sprigUntilSt  = sprigFunc[func(int, int, int) []int]("untilStep")
	sprigSeq      = sprigFunc[func(...int) string]("seq")
)

// sprigFunc returns sprig's function name; a sprig release that changed it
// fails every test at once.
func sprigFunc[T any](name string) T {
	fn, ok := sprig.GenericFuncMap()[name].(T)
	if !ok {
		panic(fmt.Sprintf("template: sprig's %s is not a %T", name, fn))
	}
	return fn
}

func tooLarge(fn string, _ int) error {
	return fmt.Errorf("%w: %s would return more than %d bytes", ErrOutputTooLarge, fn, MaxOutputBytes)
}

func repeat(count int, s string) (string, error) {
	if count > 0 && len(s) > 0 && count > MaxOutputBytes/len(s) {
		return "", tooLarge("repeat", count)
	}
	return strings.Repeat(s, max(count, 0)), nil
}

func replace(old, replacement, src string) (string, error) {
	n := strings.Count(src, old)
	if grow := len(replacement) - len(old); grow > 0 && n > (MaxOutputBytes-len(src))/grow {
		return "", tooLarge("replace", n)
	}
	return strings.ReplaceAll(src, old, replacement), nil
}

func indent(spaces int, s string) (string, error) {
	spaces = max(spaces, 0)
	lines := strings.Count(s, "\n") + 1
	if spaces > 0 && lines > (MaxOutputBytes-len(s))/spaces {
		return "", tooLarge("indent", lines)
	}
	pad := strings.Repeat(" ", spaces)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad), nil
}

func nindent(spaces int, s string) (string, error) {
	out, err := indent(spaces, s)
	if err != nil {
		return "", fmt.Errorf("nindent: %w", err)
	}
	return "\n" + out, nil
}

func join(sep string, list any) (string, error) {
	items := sprigToString(list)
	n := len(sep) * max(len(items)-1, 0)
	for _, s := range items {
		n += len(s)
	}
	if n > MaxOutputBytes {
		return "", tooLarge("join", n)
	}
	return strings.Join(items, sep), nil
}

func wrapWith(width int, sep, s string) (string, error) {
	if n := len(s) + (len(s)/max(width, 1)+1)*len(sep); n > MaxOutputBytes {
		return "", tooLarge("wrapWith", n)
	}
	return sprigWrapWith(width, sep, s), nil
}

// steps is the number of items from start towards stop by step (stop
// excluded), or -1 when it exceeds MaxRangeItems.
func steps(start, stop, step int) int {
	if step == 0 || (stop > start) != (step > 0) || stop == start {
		return 0
	}
	d, s := uint64(stop-start), uint64(step) //nolint:gosec // both negative or both positive: the ratio is right
	if step < 0 {
		d, s = uint64(start-stop), uint64(-step) //nolint:gosec // as above
	}
	n := (d + s - 1) / s
	if n > MaxRangeItems {
		return -1
	}
	return int(n)
}

func until(count int) ([]int, error) {
	step := 1
	if count < 0 {
		step = -1
	}
	return untilStep(0, count, step)
}

func untilStep(start, stop, step int) ([]int, error) {
	if steps(start, stop, step) < 0 {
		return nil, fmt.Errorf("%w: a list of more than %d items", ErrLimit, MaxRangeItems)
	}
	return sprigUntilSt(start, stop, step), nil
}

// seq is sprig's (the numbers as one space-separated string, as the seq
// command), bounded to MaxRangeItems numbers.
func seq(params ...int) (string, error) {
	start, step, end := 1, 1, 0
	switch len(params) {
	case 1:
		end = params[0]
	case 2:
		start, end = params[0], params[1]
	case 3:
		start, step, end = params[0], params[1], params[2]
	default:
		return sprigSeq(params...), nil
	}
	if len(params) < 3 && end < start {
		step = -1
	}
	if step != 0 && steps(start, end+sign(step), step) < 0 {
		return "", fmt.Errorf("%w: seq of more than %d numbers", ErrLimit, MaxRangeItems)
	}
	return sprigSeq(params...), nil
}

func sign(n int) int {
	if n < 0 {
		return -1
	}
	return 1
}

func regexReplaceAll(expr, s, repl string) (string, error) {
	return regexReplace("regexReplaceAll", expr, s, repl, true)
}

func regexReplaceAllLiteral(expr, s, repl string) (string, error) {
	return regexReplace("regexReplaceAllLiteral", expr, s, repl, false)
}

// regexReplace replaces every match of expr in s by repl (expanding $1, ${name}
// when expand), checking the size before each replacement: a capture group
// lies within its match, so one expansion is at most len(repl) plus the match
// for each $ in repl.
func regexReplace(fn, expr, s, repl string, expand bool) (string, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fn, err)
	}
	dollars := 0
	if expand {
		dollars = strings.Count(repl, "$")
	}
	var out []byte
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		if len(out)+(m[0]-last)+len(repl)+dollars*(m[1]-m[0]) > MaxOutputBytes {
			return "", tooLarge(fn, len(out))
		}
		out = append(out, s[last:m[0]]...)
		if expand {
			out = re.ExpandString(out, repl, s, m)
		} else {
			out = append(out, repl...)
		}
		last = m[1]
	}
	return string(append(out, s[last:]...)), nil
}

// printf is fmt.Sprintf with every width and precision at most
// MaxFormatWidth and none taken from an argument (*).
func printf(format string, args ...any) (string, error) {
	inDirective, n := false, 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case !inDirective:
			inDirective, n = c == '%', 0
		case c == '*':
			return "", safeErrorf("printf: a width or precision from an argument (*) is not allowed")
		case c >= '0' && c <= '9':
			if n = n*10 + int(c-'0'); n > MaxFormatWidth {
				return "", safeErrorf("printf: width or precision over %d", count(MaxFormatWidth))
			}
		case isVerb(c):
			inDirective = false
		default:
			n = 0
		}
	}
	return fmt.Sprintf(format, args...), nil
}

// isVerb reports whether c ends a printf directive: a letter or %.
func isVerb(c byte) bool {
	return c == '%' || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// index is text/template's, except that a missing map key is an error
// naming it (the builtin returns the zero value, which would hide a typo
// in {{ index . "db-password" }}).
func index(item any, keys ...any) (any, error) {
	v := reflect.ValueOf(item)
	for _, k := range keys {
		for (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && !v.IsNil() {
			v = v.Elem()
		}
		kv := reflect.ValueOf(k)
		switch v.Kind() {
		case reflect.Map:
			if !kv.IsValid() || !kv.Type().ConvertibleTo(v.Type().Key()) {
				return nil, safeErrorf("index: key %v of type %s for a map of %s keys", k, typeName(fmt.Sprintf("%T", k)), typeName(v.Type().Key().String()))
			}
			e := v.MapIndex(kv.Convert(v.Type().Key()))
			if !e.IsValid() {
				return nil, safeErrorf("index: map has no entry for key %q", fmt.Sprint(k))
			}
			v = e
		case reflect.Slice, reflect.Array, reflect.String:
			if !kv.IsValid() || !kv.CanInt() {
				return nil, safeErrorf("index: index %v of type %s is not an integer", k, typeName(fmt.Sprintf("%T", k)))
			}
			i := kv.Int()
			if i < 0 || i >= int64(v.Len()) {
				return nil, safeErrorf("index: index %d out of range [0, %d)", i, count(v.Len()))
			}
			v = v.Index(int(i))
		default:
			return nil, safeErrorf("index: cannot index into a %s", typeName(v.Kind().String()))
		}
	}
	if !v.IsValid() {
		return nil, nil
	}
	return v.Interface(), nil
}
