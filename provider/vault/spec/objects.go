package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/keymount/keymount/internal/datafrom"

	"sigs.k8s.io/yaml"
)

// Methods of an object's request.
const (
	MethodGet  = "GET"
	MethodPut  = "PUT"
	MethodPost = "POST"
)

// Encodings of an object's value.
const (
	EncodingUTF8   = "utf-8"
	EncodingBase64 = "base64"
	EncodingHex    = "hex"
)

// Object is one entry of the class's objects YAML.
type Object struct {
	// Name is objectName: the file name, and the object's id.
	Name string
	// Path is secretPath, as given (a KV v2 path names its data/ part; it
	// may end in ?version=N).
	Path string
	// Key is secretKey: the key of the secret's data to write; empty
	// writes Vault's whole JSON answer.
	Key string
	// Method is GET, PUT or POST.
	Method string
	// Args is secretArgs: the body of a PUT or POST, or the query of a GET.
	Args map[string]any
	// Encoding is how the value is stored in Vault: it is decoded before
	// it is written (utf-8: as is).
	Encoding string
	// Mode is filePermission; 0 means the mount's default.
	Mode os.FileMode
	// Extract, when set (keymount's extract, External Secrets'
	// dataFrom.extract), writes every field of the secret's data as its
	// own file under Name, keyed as the options say.
	Extract *datafrom.Compiled
}

// rawObject is the YAML of one object. Unlike vault-csi-provider, which
// ignores unknown fields, ParseObjects refuses them (checkFields).
type rawObject struct {
	ObjectName     string          `json:"objectName"`
	SecretPath     string          `json:"secretPath"`
	SecretKey      string          `json:"secretKey"`
	SecretArgs     map[string]any  `json:"secretArgs"`
	Method         string          `json:"method"`
	Encoding       string          `json:"encoding"`
	FilePermission json.RawMessage `json:"filePermission"`
	// Extract is keymount's own key.
	Extract *datafrom.Options `json:"extract"`
}

// ParseObjects parses the objects parameter. Errors name the entry and
// its field. An unknown field is refused.
func ParseObjects(s string) ([]Object, error) {
	return parseObjects(s, nil)
}

// parseObjects parses the objects parameter; an unknown field is refused
// unless ignored lists it (the class's keymount.io/ignore-parameters).
func parseObjects(s string, ignored map[string]bool) ([]Object, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%s is empty: list at least one object (objectName, secretPath)", KeyObjects)
	}
	var raw []rawObject
	if err := yaml.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("%s is not a YAML list of objects (objectName, secretPath, secretKey, secretArgs, method, encoding, filePermission): %w", KeyObjects, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s lists no object: list at least one (objectName, secretPath)", KeyObjects)
	}
	var fields []map[string]json.RawMessage
	_ = yaml.Unmarshal([]byte(s), &fields) // the same YAML as raw: cannot fail where raw did not
	out := make([]Object, 0, len(raw))
	seen := map[string]bool{}
	var errs []error
	for i := range raw {
		if i < len(fields) {
			if err := checkFields(i, slices.Sorted(maps.Keys(fields[i])), ignored); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		o, err := raw[i].object()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", KeyObjects, i, err))
			continue
		}
		if seen[o.Name] {
			errs = append(errs, fmt.Errorf("%s[%d]: objectName %q is listed twice: each object needs its own file name", KeyObjects, i, o.Name))
			continue
		}
		seen[o.Name] = true
		out = append(out, o)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func (r *rawObject) object() (Object, error) {
	o := Object{Name: r.ObjectName, Path: strings.TrimPrefix(r.SecretPath, "/"), Key: r.SecretKey, Args: r.SecretArgs}
	if o.Name == "" {
		return o, errors.New("objectName is empty: set the file name to write")
	}
	if o.Name != path.Clean(o.Name) || path.IsAbs(o.Name) || o.Name == ".." || strings.HasPrefix(o.Name, "../") {
		return o, fmt.Errorf("objectName %q is not a clean relative file name", o.Name)
	}
	if o.Path == "" {
		return o, fmt.Errorf("object %q: secretPath is empty: set the Vault path to read", o.Name)
	}
	var ok bool
	if o.Method, ok = oneOf(strings.ToUpper(r.Method), MethodGet, MethodPut, MethodPost); !ok {
		return o, fmt.Errorf("object %q: method %q: use GET, PUT or POST", o.Name, r.Method)
	}
	if o.Encoding, ok = oneOf(strings.ToLower(r.Encoding), EncodingUTF8, EncodingBase64, EncodingHex); !ok {
		return o, fmt.Errorf("object %q: encoding %q: use utf-8, base64 or hex", o.Name, r.Encoding)
	}
	mode, err := parseMode(r.FilePermission)
	if err != nil {
		return o, fmt.Errorf("object %q: filePermission: %w", o.Name, err)
	}
	o.Mode = mode
	if r.Extract != nil {
		switch {
		case o.Key != "":
			return o, fmt.Errorf("object %q: extract writes every field of the secret's data: leave secretKey out", o.Name)
		case o.Method != MethodGet || o.Encoding != EncodingUTF8:
			return o, fmt.Errorf("object %q: extract reads a secret's fields as they are: only with method GET and encoding utf-8 (use decodingStrategy)", o.Name)
		}
		if o.Extract, err = r.Extract.Compile(fmt.Sprintf("object %q: extract", o.Name)); err != nil {
			return o, err
		}
	}
	return o, nil
}

// oneOf returns v when it is one of allowed, the first of allowed (the
// default) when v is empty; false for any other value.
func oneOf(v string, allowed ...string) (string, bool) {
	if v == "" {
		return allowed[0], true
	}
	if slices.Contains(allowed, v) {
		return v, true
	}
	return "", false
}

// parseMode reads filePermission: a YAML number (0600 is octal in YAML, as
// vault-csi-provider reads it) or a string of octal digits.
func parseMode(raw json.RawMessage) (os.FileMode, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var n uint64
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0"), 8, 32)
		if err != nil && strings.Trim(s, "0o") != "" {
			return 0, fmt.Errorf("%q is not an octal file mode such as 0600", s)
		}
		n = v
	} else if err := json.Unmarshal(raw, &n); err != nil {
		return 0, errors.New("not a file mode such as 0600")
	}
	if n > 0o777 {
		return 0, fmt.Errorf("%#o is more than 0777", n)
	}
	return os.FileMode(n), nil
}
