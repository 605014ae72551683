package convert

import (
	"encoding/json"
	"strings"
)

// gjsonToJMESPath turns ESO's remoteRef.property (a gjson path: fields
// separated by dots) into the JMESPath keymount's AWS provider evaluates.
// Each field becomes an identifier, quoted when it is not a plain one.
// gjson's wildcards, modifiers, queries and escapes, and array indexes,
// have no conversion here and are reported.
func gjsonToJMESPath(is issues, path, property string) (string, bool) {
	if strings.ContainsAny(property, `*?#|@\!=<>%`) {
		is.unsupported(path, "%q uses gjson syntax (wildcards, queries, modifiers or escapes); write a jmesPath in the class by hand", property)
		return "", false
	}
	fields := strings.Split(property, ".")
	out := make([]string, len(fields))
	for i, f := range fields {
		switch {
		case f == "":
			is.invalid(path, "%q has an empty field", property)
			return "", false
		case isDigits(f):
			is.unsupported(path, "%q: field %q is an array index or a numeric key, which gjson does not tell apart; write a jmesPath in the class by hand", property, f)
			return "", false
		}
		out[i] = quoteIdentifier(f)
	}
	if len(fields) > 1 {
		is.note(path, "%q: ESO reads a top-level key of that exact name first when the value has one; keymount reads the nested path %s", property, strings.Join(out, "."))
	}
	return strings.Join(out, "."), true
}

// quoteIdentifier is s as one JMESPath identifier: as is when it is a plain
// identifier, else a quoted identifier (JSON string syntax).
func quoteIdentifier(s string) string {
	if isPlainIdentifier(s) {
		return s
	}
	q, _ := json.Marshal(s) // a string always marshals
	return string(q)
}

// isPlainIdentifier reports whether s is a JMESPath unquoted-string:
// [A-Za-z_][A-Za-z0-9_]*.
func isPlainIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
