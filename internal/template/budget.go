package template

import (
	"fmt"
	"reflect"
	"text/template"
	"text/template/parse"
	"time"
)

// MaxInputBytes bounds the bytes one function call receives (its strings,
// byte slices, lists and dicts, summed), so no call can multiply a large value
// many times before its result is checked.
const MaxInputBytes = 8 << 20

// The names of the guards Render inserts into every range and template call.
// They are valid identifiers a template could call too, harmlessly.
const (
	rangeGuard = "_keymountRange"
	callGuard  = "_keymountCall"
)

// budget is what one render may still spend: time and template calls.
type budget struct {
	deadline time.Time
	calls    int
}

func newBudget(timeout time.Duration) *budget {
	return &budget{deadline: time.Now().Add(timeout)}
}

func (b *budget) check() error {
	if time.Now().After(b.deadline) {
		return fmt.Errorf("%w: after %v", ErrTimeout, Timeout)
	}
	return nil
}

// funcs is the allowlisted function set, each function wrapped so that a call
// checks the budget, the size of its inputs and the size of its result.
func (b *budget) funcs() template.FuncMap {
	fm := make(template.FuncMap, len(functions)+2)
	for name, fn := range functions {
		fm[name] = b.wrap(name, fn)
	}
	fm[rangeGuard] = b.guardRange
	fm[callGuard] = b.guardCall
	return fm
}

var errorType = reflect.TypeFor[error]()

// wrap returns fn with the same parameters and (result, error) results: the
// budget is checked before the call, the inputs' size before and the result's
// size after it.
func (b *budget) wrap(name string, fn any) any {
	v := reflect.ValueOf(fn)
	t := v.Type()
	in := make([]reflect.Type, t.NumIn())
	for i := range in {
		in[i] = t.In(i)
	}
	hasErr := t.NumOut() == 2
	ft := reflect.FuncOf(in, []reflect.Type{t.Out(0), errorType}, t.IsVariadic())
	zero := reflect.Zero(t.Out(0))
	// Every error is a funcError: the render shows what of it holds no
	// value (errors.go).
	fail := func(err error) []reflect.Value {
		err = &funcError{fn: name, err: err}
		return []reflect.Value{zero, reflect.ValueOf(&err).Elem()}
	}
	return reflect.MakeFunc(ft, func(args []reflect.Value) []reflect.Value {
		if err := b.check(); err != nil {
			return fail(err)
		}
		if n := sizeOfAll(args, MaxInputBytes); n > MaxInputBytes {
			return fail(fmt.Errorf("%w: %s called with more than %d bytes", ErrOutputTooLarge, name, MaxInputBytes))
		}
		var res []reflect.Value
		if t.IsVariadic() {
			res = v.CallSlice(args)
		} else {
			res = v.Call(args)
		}
		if hasErr && !res[1].IsNil() {
			err, _ := res[1].Interface().(error)
			return fail(err)
		}
		if err := checkResult(name, res[0]); err != nil {
			return fail(err)
		}
		return []reflect.Value{res[0], reflect.Zero(errorType)}
	}).Interface()
}

// checkResult bounds what a function returns: a string or byte slice at most
// MaxOutputBytes, a list at most MaxRangeItems items.
func checkResult(name string, v reflect.Value) error {
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	switch {
	case v.Kind() == reflect.String, v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
		if v.Len() > MaxOutputBytes {
			return fmt.Errorf("%w: %s returned %d bytes, at most %d", ErrOutputTooLarge, name, v.Len(), MaxOutputBytes)
		}
	case v.Kind() == reflect.Slice, v.Kind() == reflect.Array, v.Kind() == reflect.Map:
		if v.Len() > MaxRangeItems {
			return fmt.Errorf("%w: %s returned %d items, at most %d", ErrLimit, name, v.Len(), MaxRangeItems)
		}
	}
	return nil
}

// sizeOfAll sums sizeOf over args, stopping once the sum exceeds limit.
func sizeOfAll(args []reflect.Value, limit int) int {
	n := 0
	for _, a := range args {
		n += sizeOf(a, limit-n)
		if n > limit {
			break
		}
	}
	return n
}

// sizeOf estimates the bytes of v: strings and byte slices by length, lists
// and maps by their items plus 16 bytes each (so that nesting many empty
// lists counts too). It stops once the size exceeds limit.
func sizeOf(v reflect.Value, limit int) int {
	for (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && !v.IsNil() {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return v.Len()
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Len()
		}
		n := 0
		for i := 0; i < v.Len() && n <= limit; i++ {
			n += 16 + sizeOf(v.Index(i), limit-n)
		}
		return n
	case reflect.Map:
		n := 0
		for it := v.MapRange(); it.Next() && n <= limit; {
			n += 16 + sizeOf(it.Key(), limit-n)
			n += sizeOf(it.Value(), limit-n)
		}
		return n
	default:
		return 8
	}
}

// guardRange is inserted as the last command of every range pipeline: it
// checks the budget and the number of items, and passes the value on.
func (b *budget) guardRange(v any) (any, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	rv := reflect.ValueOf(v)
	n := 0
	switch rv.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map, reflect.String:
		n = rv.Len()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n = int(min(rv.Int(), int64(MaxRangeItems)+1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n = int(min(rv.Uint(), uint64(MaxRangeItems)+1))
	}
	if n > MaxRangeItems {
		return nil, fmt.Errorf("%w: range over more than %d items", ErrLimit, MaxRangeItems)
	}
	return v, nil
}

// guardCall is inserted into every {{template}} call: it counts the call,
// checks the budget, and passes the call's data on.
func (b *budget) guardCall(args ...any) (any, error) {
	b.calls++
	if b.calls > MaxTemplateCalls {
		return nil, fmt.Errorf("%w: more than %d template calls", ErrLimit, MaxTemplateCalls)
	}
	if err := b.check(); err != nil {
		return nil, err
	}
	if len(args) == 1 {
		return args[0], nil
	}
	return nil, nil
}

// guardTree inserts the guards into every range and template call under n.
func guardTree(n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			guardTree(c)
		}
	case *parse.IfNode:
		guardTree(n.List)
		guardTree(n.ElseList)
	case *parse.WithNode:
		guardTree(n.List)
		guardTree(n.ElseList)
	case *parse.RangeNode:
		n.Pipe.Cmds = append(n.Pipe.Cmds, guardCommand(rangeGuard, n.Pipe.Pos))
		guardTree(n.List)
		guardTree(n.ElseList)
	case *parse.TemplateNode:
		if n.Pipe == nil {
			n.Pipe = &parse.PipeNode{NodeType: parse.NodePipe, Pos: n.Pos, Line: n.Line}
		}
		n.Pipe.Cmds = append(n.Pipe.Cmds, guardCommand(callGuard, n.Pos))
	}
}

func guardCommand(name string, pos parse.Pos) *parse.CommandNode {
	return &parse.CommandNode{
		NodeType: parse.NodeCommand,
		Pos:      pos,
		Args:     []parse.Node{&parse.IdentifierNode{NodeType: parse.NodeIdentifier, Pos: pos, Ident: name}},
	}
}
