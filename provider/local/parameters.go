package local

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/keymount/keymount/internal/classparams"
)

// parameters are the class parameters the provider reads.
var parameters = []string{objectsParameter}

// objectFields are the fields of an object the provider reads.
var objectFields = []string{"objectName", "objectAlias", "filePermission"}

// ignoreHint is how a class keeps a key the provider does not read.
var ignoreHint = fmt.Sprintf("remove it, or list it in the class's %s if it is safe to ignore", classparams.IgnoreKey)

// checkParameters refuses every class parameter the provider does not read,
// the keys the driver adds and those the class lists under
// keymount.io/ignore-parameters aside. It names the keys, never a value.
func checkParameters(attrs map[string]string) error {
	unknown := classparams.Unknown(attrs, func(k string) bool { return slices.Contains(parameters, k) })
	if len(unknown) == 0 {
		return nil
	}
	return invalidf("parameter %s is unknown to keymount-provider-local, which reads only %s (beside the keys the driver adds and %s): %s",
		quoteAll(unknown), quoteAll(parameters), classparams.IgnoreKey, ignoreHint)
}

// checkFields refuses every field of the objects in list (text, decoded)
// the provider does not read. It returns the text to decode: text itself,
// or, when an object holds fields ignored lists, the list without them.
func checkFields(text string, list []any, ignored map[string]bool) (string, error) {
	dropped := false
	for i, e := range list {
		m, _ := e.(map[string]any) // checkShape checked
		for _, f := range slices.Sorted(maps.Keys(m)) {
			switch {
			case slices.Contains(objectFields, f):
			case ignored[f]:
				delete(m, f)
				dropped = true
			default:
				return "", invalidf("%s[%d]: field %q is unknown to keymount-provider-local, which reads %s: %s",
					objectsParameter, i, f, quoteAll(objectFields), ignoreHint)
			}
		}
	}
	if !dropped {
		return text, nil
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "", invalidf("%s: %v", objectsParameter, err)
	}
	return string(b), nil
}

// quoteAll quotes keys and joins them with commas.
func quoteAll(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}
