package convert

import "fmt"

// str returns the string at key of m; a value of another type is reported
// and read as "".
func str(is issues, path string, m map[string]any, key string) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		is.invalid(join(path, key), "is a %s, want a string", jsonType(v))
	}
	return s
}

// strMap returns the map of strings at key of m.
func strMap(is issues, path string, m map[string]any, key string) map[string]string {
	raw, ok := m[key].(map[string]any)
	if !ok || len(raw) == 0 {
		return nil
	}
	out := make(map[string]string, len(raw))
	for k := range raw {
		if s := str(is, join(path, key), raw, k); s != "" || raw[k] != nil {
			out[k] = s
		}
	}
	return out
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "list"
	case map[string]any:
		return "mapping"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// index is "path[i]".
func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
