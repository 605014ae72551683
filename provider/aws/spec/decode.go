package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/keymount/keymount/internal/datafrom"
)

// The entries of `objects` are read the way the existing provider reads
// them: sigs.k8s.io/yaml.Unmarshal into JSON-tagged fields. So keys match
// their field case-insensitively (encoding/json: `objectname` and
// `ObjectName` are objectName), a key given twice
// keeps its last value, and a YAML number or boolean written for a string
// field becomes its text (`objectVersion: 3` is "3", `objectName: yes` is
// "true"). Only filePermission keeps its YAML type, to refuse an unquoted
// mode: YAML reads 0600 as the number 384. Unlike the existing provider,
// keymount refuses a key no field reads (checkFields).

// objectEntry is one entry of `objects`.
type objectEntry struct {
	ObjectName         string          `json:"objectName"`
	ObjectType         string          `json:"objectType"`
	ObjectAlias        string          `json:"objectAlias"`
	ObjectVersion      string          `json:"objectVersion"`
	ObjectVersionLabel string          `json:"objectVersionLabel"`
	FilePermission     modeText        `json:"filePermission"`
	JMESPath           []jmesPathEntry `json:"jmesPath"`
	FailoverObject     *failoverEntry  `json:"failoverObject"`
	// keymount's extensions (External Secrets' dataFrom): the upstream
	// provider ignores them.
	Extract *datafrom.Options `json:"extract"`
	Find    *findEntry        `json:"find"`
}

// findEntry is an object's find: the secrets or parameters it matches.
type findEntry struct {
	Path string `json:"path"`
	Name *struct {
		Regexp string `json:"regexp"`
	} `json:"name"`
	Tags map[string]string `json:"tags"`
	datafrom.Options
}

// jmesPathEntry is one entry of an object's jmesPath list.
type jmesPathEntry struct {
	Path           string   `json:"path"`
	ObjectAlias    string   `json:"objectAlias"`
	FilePermission modeText `json:"filePermission"`
}

// failoverEntry is an object's failoverObject.
type failoverEntry struct {
	ObjectName         string `json:"objectName"`
	ObjectVersion      string `json:"objectVersion"`
	ObjectVersionLabel string `json:"objectVersionLabel"`
}

// modeText is a filePermission as written: its text when it is a YAML
// string, else the kind of value it is ("number", "boolean", ...).
// Implementing json.Unmarshaler keeps sigs.k8s.io/yaml from turning a
// number into text.
type modeText struct {
	text string
	kind string
}

// UnmarshalJSON records a string's text or the kind of any other value.
func (m *modeText) UnmarshalJSON(b []byte) error {
	switch kind := jsonKind(b); kind {
	case "null":
		*m = modeText{}
	case "string":
		*m = modeText{}
		return json.Unmarshal(b, &m.text)
	default:
		*m = modeText{kind: kind}
	}
	return nil
}

// jsonKind names the kind of a JSON value in YAML's words.
func jsonKind(b []byte) string {
	s := strings.TrimSpace(string(b))
	switch {
	case s == "null":
		return "null"
	case strings.HasPrefix(s, `"`):
		return "string"
	case s == "true" || s == "false":
		return "boolean"
	case strings.HasPrefix(s, "["):
		return "list"
	case strings.HasPrefix(s, "{"):
		return "mapping"
	}
	return "number"
}

// decodeObjects reads the `objects` YAML into its entries. The error is
// one sentence about the document, never quoting its values.
func decodeObjects(src string) ([]objectEntry, error) {
	var entries []objectEntry
	err := yaml.Unmarshal([]byte(src), &entries)
	if err == nil {
		return entries, nil
	}
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return nil, fmt.Errorf("is not a YAML list of objects: %w", err)
	}
	got := yamlKindOf(te.Value)
	switch {
	case te.Field == "" && te.Type == reflect.TypeFor[[]objectEntry]():
		return nil, fmt.Errorf("is a YAML %s, not a list of objects", got)
	case te.Field == "":
		return nil, fmt.Errorf("an entry is a YAML %s, not a mapping with objectName and objectType", got)
	}
	return nil, fmt.Errorf("%s of an entry is a YAML %s, not a %s", te.Field, got, expectedKind(te.Type))
}

// yamlKindOf names encoding/json's kind of a value ("array", "number 3")
// in YAML's words.
func yamlKindOf(v string) string {
	switch kind, _, _ := strings.Cut(v, " "); kind {
	case "array":
		return "list"
	case "object":
		return "mapping"
	case "bool":
		return "boolean"
	default:
		return kind
	}
}

// expectedKind names what a field of type t is written as.
func expectedKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		return "list"
	case reflect.Struct, reflect.Map:
		return "mapping"
	default:
		return t.Kind().String()
	}
}

// mode returns a filePermission: a quoted octal string like "0600", def
// when unset.
func (m modeText) mode(p *problems, where string, def os.FileMode) os.FileMode {
	if m.kind != "" {
		p.addf("%s.filePermission: is a %s; write the mode as a quoted octal string like \"0600\"", where, m.kind)
		return def
	}
	if m.text == "" {
		return def
	}
	n, err := strconv.ParseUint(m.text, 8, 32)
	if err != nil || n > uint64(os.ModePerm) {
		p.addf("%s.filePermission: %s is not an octal file mode between \"0000\" and \"0777\" like \"0600\"", where, quote(m.text))
		return def
	}
	return os.FileMode(n)
}
