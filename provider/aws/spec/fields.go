package spec

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Keys of one entry of `objects`, of a jmesPath entry and of failoverObject.
var (
	objectKeys = []string{
		"objectName", "objectType", "objectAlias", "objectVersion", "objectVersionLabel",
		"filePermission", "jmesPath", "failoverObject",
	}
	jmesPathKeys = []string{"path", "objectAlias", "filePermission"}
	failoverKeys = []string{"objectName", "objectVersion", "objectVersionLabel"}
)

// fields reads the values of one YAML mapping, reporting wrong types.
type fields struct {
	p     *problems
	where string
	m     map[string]any
}

// newFields checks that v is a mapping; ok is false when it is not.
func newFields(p *problems, where string, v any, known []string) (f fields, ok bool) {
	m, ok := v.(map[string]any)
	if !ok {
		p.addf("%s: is not a mapping; write one with the keys %s", where, strings.Join(known, ", "))
		return fields{}, false
	}
	return fields{p: p, where: where, m: m}, true
}

// checkKeys reports every key that is not known, in a stable order.
func (f fields) checkKeys(known []string) {
	var unknown []string
	for k := range f.m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		f.p.addf("%s: unknown key %s; the keys are %s", f.where, quote(k), strings.Join(known, ", "))
	}
}

// has reports whether key is set to a value other than null or "".
func (f fields) has(key string) bool {
	v := f.m[key]
	s, isString := v.(string)
	return v != nil && (!isString || s != "")
}

// str returns a string value, "" when the key is missing or null.
func (f fields) str(key string) string {
	v := f.m[key]
	if v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		f.p.addf("%s.%s: is a %s, not a string; quote the value", f.where, key, yamlKind(v))
		return ""
	}
	return s
}

// mode returns a filePermission value: a quoted octal string like "0600".
func (f fields) mode(key string, def os.FileMode) os.FileMode {
	if v, ok := f.m[key]; ok && v != nil {
		if _, isString := v.(string); !isString {
			f.p.addf("%s.%s: is a %s; write the mode as a quoted octal string like \"0600\"", f.where, key, yamlKind(v))
			return def
		}
	}
	s := f.str(key)
	if s == "" {
		return def
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > uint64(os.ModePerm) {
		f.p.addf("%s.%s: %s is not an octal file mode between \"0000\" and \"0777\" like \"0600\"", f.where, key, quote(s))
		return def
	}
	return os.FileMode(n)
}

// yamlKind names the type of a decoded YAML value for an error.
func yamlKind(v any) string {
	switch v.(type) {
	case float64, json.Number:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "list"
	case map[string]any:
		return "mapping"
	}
	return fmt.Sprintf("%T", v)
}
