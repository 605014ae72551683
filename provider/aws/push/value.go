package push

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/keymount/keymount/provider/server"
)

// content is an object's value: a Secrets Manager SecretString (or
// SecretBinary when binary) or an SSM parameter's value.
type content struct {
	data   []byte
	binary bool
}

// String redacts the value.
func (c content) String() string { return fmt.Sprintf("content{<%d bytes redacted>}", len(c.data)) }

// GoString redacts %#v the same way as %v.
func (c content) GoString() string { return c.String() }

// whole is a value written as the object's value: a string when it is
// valid UTF-8, binary otherwise.
func whole(v []byte) content {
	return content{data: v, binary: !utf8.Valid(v)}
}

// errNotObject: the current value is not a JSON object, so a property
// cannot be set in it (or removed from it).
var errNotObject = errors.New("holds a value that is not a JSON object: a property cannot be set in it")

// fields decodes c as a JSON object; nil c is an empty one.
func fields(c *content) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if c == nil {
		return m, nil
	}
	if c.binary || json.Unmarshal(c.data, &m) != nil || m == nil {
		return nil, errNotObject
	}
	return m, nil
}

// apply returns the value items give the object whose value is cur (nil
// when there is none), and whether that is exactly cur. Items are either
// one whole value or properties (see check).
func apply(cur *content, items []server.PushItem) (content, bool, error) {
	if items[0].Property == "" {
		want := whole(items[0].Value)
		return want, cur != nil && cur.binary == want.binary && bytes.Equal(cur.data, want.data), nil
	}
	m, err := fields(cur)
	if err != nil {
		return content{}, false, err
	}
	same := cur != nil
	for _, it := range items {
		v := string(it.Value)
		var there string
		if old, ok := m[it.Property]; !ok || json.Unmarshal(old, &there) != nil || there != v {
			same = false
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return content{}, false, err
		}
		m[it.Property] = enc
	}
	if same {
		return *cur, true, nil
	}
	out, err := json.Marshal(m)
	if err != nil {
		return content{}, false, err
	}
	return content{data: out}, false, nil
}

// without returns cur with the items' properties removed, and whether no
// key remains.
func without(cur *content, items []server.PushItem) (content, bool, error) {
	m, err := fields(cur)
	if err != nil {
		return content{}, false, err
	}
	for _, it := range items {
		delete(m, it.Property)
	}
	if len(m) == 0 {
		return content{}, true, nil
	}
	out, err := json.Marshal(m)
	if err != nil {
		return content{}, false, err
	}
	return content{data: out}, false, nil
}

// check returns why the items of one object cannot be written together,
// nil when they can: one whole value, or distinct properties; an SSM
// parameter holds one UTF-8 value.
func check(k kind, items []server.PushItem) error {
	props := map[string]bool{}
	for _, it := range items {
		switch {
		case k == parameter && it.Property != "":
			return fmt.Errorf("property %q: an SSM parameter holds one value: remove property", it.Property)
		case k == parameter && !utf8.Valid(it.Value):
			return errors.New("the value is not valid UTF-8, which an SSM parameter cannot hold")
		case it.Property != "" && !utf8.Valid(it.Value):
			return fmt.Errorf("property %q: the value is not valid UTF-8, which a JSON string cannot hold: push it without property", it.Property)
		case !utf8.ValidString(it.Property):
			return errors.New("the property is not valid UTF-8, which a JSON key must be")
		case it.Property == "" && len(items) > 1:
			return fmt.Errorf("%d items write it: one writes the whole value, so no other may write it", len(items))
		case props[it.Property] && it.Property != "":
			return fmt.Errorf("property %q is written by two items", it.Property)
		}
		props[it.Property] = true
	}
	return nil
}
