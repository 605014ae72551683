package datafrom

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrNotObject is returned by Extract for a value that is not a JSON
// object.
var ErrNotObject = errors.New("the value is not a JSON object")

// Extract returns every field of the JSON object value as its own key,
// rewritten, converted and decoded by c: a string field is its text, any
// other field its JSON as written (a number, true, null, an object).
func (c *Compiled) Extract(value []byte) (map[string][]byte, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(value))
	if err := dec.Decode(&fields); err != nil || fields == nil || dec.More() {
		return nil, ErrNotObject
	}
	raw := make(map[string][]byte, len(fields))
	for k, v := range fields {
		var s string
		if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
			raw[k] = []byte(s)
		} else {
			raw[k] = []byte(v)
		}
	}
	return c.keys(raw, false)
}

// Found returns the values found by a store search, keyed by name, as
// keys: rewritten, then, when no rewrite is set, converted (a found name's
// "/" and every other character a key cannot hold become "_" by default),
// and decoded.
func (c *Compiled) Found(byName map[string][]byte) (map[string][]byte, error) {
	return c.keys(byName, true)
}

// keys rewrites, converts and decodes in, as ESO does: rewrites first;
// extracted keys and found names are converted when no rewrite is set;
// every key must then be a valid Secret key, and no two values may end up
// under one key.
func (c *Compiled) keys(in map[string][]byte, found bool) (map[string][]byte, error) {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range in {
			if !yield(k) {
				return
			}
		}
	})
	out := make(map[string][]byte, len(in))
	from := make(map[string]string, len(in))
	var errs []error
	for _, name := range names {
		key := c.rewrite(name)
		// As External Secrets: the conversion strategy applies to the keys
		// of extract and find alike, and only without rewrites.
		if len(c.rewrites) == 0 {
			key = convert(key, c.conversion)
		}
		if msgs := validation.IsConfigMapKey(key); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("key %q (from %q) is not a valid Secret key: %s; add a rewrite or set conversionStrategy: Unicode", key, name, strings.Join(msgs, "; ")))
			continue
		}
		if prev, ok := from[key]; ok {
			errs = append(errs, fmt.Errorf("%q and %q both become key %q; add a rewrite that keeps them apart", prev, name, key))
			continue
		}
		v, err := decode(in[name], c.decoding)
		if err != nil {
			errs = append(errs, fmt.Errorf("key %q: %w", key, err))
			continue
		}
		from[key] = name
		out[key] = v
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *Compiled) rewrite(key string) string {
	for _, r := range c.rewrites {
		key = r.re.ReplaceAllString(key, r.target)
	}
	return key
}

// convert replaces every character a Secret key cannot hold: by "_"
// (Default) or by _U<hex>_ (Unicode).
func convert(key, strategy string) string {
	var b strings.Builder
	for _, r := range key {
		switch {
		case keyRune(r):
			b.WriteRune(r)
		case strategy == ConvertUnicode:
			b.WriteString("_U" + fmt.Sprintf("%04x", r) + "_")
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

func keyRune(r rune) bool {
	return r == '-' || r == '.' || r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')
}

// decode applies a decoding strategy; the error never quotes the value.
func decode(v []byte, strategy string) ([]byte, error) {
	switch strategy {
	case DecodeBase64:
		out, err := base64.StdEncoding.DecodeString(string(v))
		if err != nil {
			return nil, fmt.Errorf("decodingStrategy %s: the value is not standard base64: %w", strategy, err)
		}
		return out, nil
	case DecodeBase64URL:
		out, err := base64.URLEncoding.DecodeString(string(v))
		if err != nil {
			return nil, fmt.Errorf("decodingStrategy %s: the value is not URL base64: %w", strategy, err)
		}
		return out, nil
	case DecodeAuto:
		if out, err := base64.StdEncoding.DecodeString(string(v)); err == nil {
			return out, nil
		}
		if out, err := base64.URLEncoding.DecodeString(string(v)); err == nil {
			return out, nil
		}
	}
	return v, nil
}
