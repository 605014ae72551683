package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/keymount/keymount/provider/server"
)

// objectsParameter is the class parameter listing the objects to mount.
const objectsParameter = "objects"

// objectSpec is one entry of the objects parameter as the user writes it.
type objectSpec struct {
	ObjectName  string `json:"objectName"`
	ObjectAlias string `json:"objectAlias"`
	// FilePermission is raw so that an unquoted YAML number gets a helpful
	// error instead of a JSON type error.
	FilePermission json.RawMessage `json:"filePermission"`
}

// object is a validated objectSpec.
type object struct {
	name  string      // path under the root
	alias string      // path in the volume
	mode  os.FileMode // permission bits
}

// parseObjects parses and validates the objects parameter. Every problem is
// reported, each naming the object index and field; all wrap
// server.ErrInvalidParameters. A field it does not read is refused, unless
// ignored lists it (the class's keymount.io/ignore-parameters).
func parseObjects(text string, defaultMode os.FileMode, ignored map[string]bool) ([]object, error) {
	list, err := checkShape(text)
	if err != nil {
		return nil, err
	}
	if text, err = checkFields(text, list, ignored); err != nil {
		return nil, err
	}
	var specs []objectSpec
	if err := yaml.UnmarshalStrict([]byte(text), &specs); err != nil {
		return nil, invalidf("%s: %s", objectsParameter, yamlMessage(err))
	}

	var errs []error
	objs := make([]object, 0, len(specs))
	for i, spec := range specs {
		o, err := validateSpec(i, spec, defaultMode)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs = append(objs, o)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := checkAliases(objs); err != nil {
		return nil, err
	}
	return objs, nil
}

// checkShape checks that text is a non-empty YAML list of maps, so that
// a wrong shape gets a plain message rather than a Go type name, and
// returns the list.
func checkShape(text string) ([]any, error) {
	var shape any
	if err := yaml.Unmarshal([]byte(text), &shape); err != nil {
		return nil, invalidf("%s is not valid YAML: %s", objectsParameter, yamlMessage(err))
	}
	list, isList := shape.([]any)
	switch {
	case shape == nil || isList && len(list) == 0:
		return nil, invalidf("%s is empty: list at least one object to mount", objectsParameter)
	case !isList:
		return nil, invalidf("%s must be a YAML list of {objectName, objectAlias, filePermission}, not %s", objectsParameter, kindOf(shape))
	}
	for i, e := range list {
		if _, ok := e.(map[string]any); !ok {
			return nil, invalidf("%s[%d] must be a map with objectName and optional objectAlias and filePermission, not %s", objectsParameter, i, kindOf(e))
		}
	}
	return list, nil
}

// yamlMessage drops the conversion steps sigs.k8s.io/yaml prefixes to its
// errors, which mean nothing to the author of a SecretProviderClass.
func yamlMessage(err error) string {
	msg := err.Error()
	for _, prefix := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return msg
}

// kindOf names the YAML kind of a decoded value.
func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	case string:
		return "a string"
	case nil:
		return "null"
	default:
		return "a scalar"
	}
}

func validateSpec(i int, spec objectSpec, defaultMode os.FileMode) (object, error) {
	var errs []error
	if err := validateName(spec.ObjectName); err != nil {
		errs = append(errs, invalidf("%s[%d].objectName: %v", objectsParameter, i, err))
	}
	alias, aliasField := spec.ObjectAlias, "objectAlias"
	if alias == "" {
		alias, aliasField = spec.ObjectName, "objectAlias (defaulted from objectName)"
	}
	if len(errs) == 0 {
		if err := server.ValidatePath(alias); err != nil {
			errs = append(errs, invalidf("%s[%d].%s: %v", objectsParameter, i, aliasField, err))
		}
	}
	mode, err := parseMode(spec.FilePermission, defaultMode)
	if err != nil {
		errs = append(errs, invalidf("%s[%d].filePermission: %v", objectsParameter, i, err))
	}
	if len(errs) > 0 {
		return object{}, errors.Join(errs...)
	}
	return object{name: spec.ObjectName, alias: alias, mode: mode}, nil
}

// validateName checks an objectName: a clean relative path that stays under
// the root. Unlike an alias it may start with ".." ("..data/key" in a
// Secret volume).
func validateName(name string) error {
	switch {
	case name == "":
		return errors.New("is required")
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%q contains a NUL byte", name)
	case filepath.IsAbs(name):
		return fmt.Errorf("%q is absolute; give a path relative to the provider's root", name)
	case name == ".":
		return fmt.Errorf("%q names the root directory, not a file", name)
	case filepath.Clean(name) != name:
		return fmt.Errorf("%q is not clean (want %q)", name, filepath.Clean(name))
	case !filepath.IsLocal(name):
		return fmt.Errorf("%q has a \"..\" element", name)
	}
	return nil
}

// parseMode parses filePermission: a quoted octal string such as "0600" or
// "600", at most 0777. Absent, null or "" means defaultMode.
func parseMode(raw json.RawMessage, defaultMode os.FileMode) (os.FileMode, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return defaultMode, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("write it as a quoted octal string like \"0644\", not %s (YAML reads an unquoted 0644 as 420)", raw)
	}
	if s == "" {
		return defaultMode, nil
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not an octal mode like \"0644\"", s)
	}
	if n > uint64(os.ModePerm) {
		return 0, fmt.Errorf("%q is more than 0777", s)
	}
	return os.FileMode(n), nil
}

// checkAliases rejects two objects mounted at the same path, and an object
// mounted at a path another object needs as a directory ("a" and "a/b").
// Indexes in objs are the spec indexes: it is only called when every spec is
// valid.
func checkAliases(objs []object) error {
	at := make(map[string]int, len(objs))
	for i, o := range objs {
		if j, dup := at[o.alias]; dup {
			return invalidf("%s[%d].objectAlias: %q is already used by %s[%d]", objectsParameter, i, o.alias, objectsParameter, j)
		}
		at[o.alias] = i
	}
	for i, o := range objs {
		for dir := filepath.Dir(o.alias); dir != "."; dir = filepath.Dir(dir) {
			if j, clash := at[dir]; clash {
				return invalidf("%s[%d].objectAlias: %q needs %q to be a directory, but %s[%d] mounts a file there",
					objectsParameter, i, o.alias, dir, objectsParameter, j)
			}
		}
	}
	return nil
}
