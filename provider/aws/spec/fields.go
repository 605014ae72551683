package spec

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// unmarshalerType is json.Unmarshaler: a field of such a type reads its
// whole value itself (modeText), so its keys are not fields.
var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkFields refuses every key of an `objects` entry, a jmesPath entry, a
// failoverObject (and keymount's extract and find) that no field reads,
// unless the class ignores it. Keys match fields case-insensitively, as
// encoding/json matches them when the entries are decoded. entries are
// src decoded, for the objects' names.
func checkFields(p *problems, src string, entries []objectEntry, ignore ignoreList) {
	var raw []any
	if err := yaml.Unmarshal([]byte(src), &raw); err != nil {
		return // decodeObjects reported it
	}
	t := reflect.TypeFor[objectEntry]()
	for i, v := range raw {
		name := ""
		if i < len(entries) {
			name = entries[i].ObjectName
		}
		walkFields(p, objectWhere(i, name), v, t, ignore)
	}
}

// walkFields checks the keys of v, decoded from YAML, against the fields of
// t, and goes down into the fields that are entries themselves.
func walkFields(p *problems, where string, v any, t reflect.Type, ignore ignoreList) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	switch t.Kind() {
	case reflect.Slice:
		list, _ := v.([]any)
		for j, e := range list {
			walkFields(p, fmt.Sprintf("%s[%d]", where, j), e, t.Elem(), ignore)
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return // a type error decodeObjects reported
		}
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			name, ft, ok := lookupField(fields, k)
			switch {
			case ok:
				walkFields(p, where+"."+name, m[k], ft, ignore)
			case !ignore.field(k):
				p.addf("%s.%s: %s", where, keyName(k), unknownField(k, fields))
			}
		}
	}
}

// unknownField says why field k is refused and what to do.
func unknownField(k string, fields map[string]reflect.Type) string {
	if where, ok := newerFields[strings.ToLower(k)]; ok {
		return notKnown(where)
	}
	return fmt.Sprintf("not known to keymount's AWS provider, nor to any upstream ASCP release it knows of "+
		"(fields here: %s): check the spelling, or list it in %s if the class may mount without it",
		strings.Join(slices.Sorted(maps.Keys(fields)), ", "), KeyIgnoreParameters)
}

// lookupField finds the field key k matches, case-insensitively.
func lookupField(fields map[string]reflect.Type, k string) (string, reflect.Type, bool) {
	if t, ok := fields[k]; ok {
		return k, t, true
	}
	for name, t := range fields {
		if strings.EqualFold(name, k) {
			return name, t, true
		}
	}
	return "", nil, false
}

// jsonFields maps the JSON names of t's fields to their types, with the
// fields of embedded structs, as encoding/json reads them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			maps.Copy(fields, jsonFields(f.Type))
		case !f.IsExported():
		case name == "":
			fields[f.Name] = f.Type
		default:
			fields[name] = f.Type
		}
	}
	return fields
}
