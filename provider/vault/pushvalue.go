package vault

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/keymount/keymount/internal/vaultkv"
	"github.com/keymount/keymount/provider/server"
)

// errNotObject: an item without a property whose value is not a JSON
// object.
var errNotObject = errors.New("the value is not a JSON object: an item without a property writes the members of a JSON object as the secret's fields (give the item a property to write its value as one field)")

// changeOf is what items make of the fields at path, in the External
// Secrets Operator's format: an item without a property replaces every
// field with the members of its value, a JSON object; an item with one
// sets that field to its value as a string. With strict false (a removal,
// which only needs what the items name), a value that is no JSON object
// replaces the fields with none instead of failing. Errors name the path
// and never quote a value.
func changeOf(path string, items []server.PushItem, strict bool) (vaultkv.Change, error) {
	c := make(vaultkv.Change, 0, len(items))
	for _, it := range items {
		if it.Property != "" {
			c = append(c, vaultkv.Step{Field: it.Property, Value: string(it.Value)})
			continue
		}
		obj, err := jsonObject(it.Value)
		if err != nil && strict {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		c = append(c, vaultkv.Step{Object: obj})
	}
	return c, nil
}

// jsonObject is b as one JSON object, its numbers kept as written.
func jsonObject(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil || obj == nil {
		return nil, errNotObject
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errNotObject
	}
	return obj, nil
}
