package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/keymount/keymount/provider/v1alpha1"
)

// defaultPermission is the file mode when the request carries none, as
// upstream drivers send it ("420").
const defaultPermission os.FileMode = 0o644

// MountRequest is a wire MountRequest parsed once. It holds secrets: it
// redacts itself when printed.
type MountRequest struct {
	// Attributes are the class parameters merged with the volume context.
	Attributes map[string]string
	// Secrets is the data of the volume's nodePublishSecretRef Secret.
	Secrets map[string]string
	// TargetPath is the absolute path of the volume on the node.
	TargetPath string
	// Permission is the default mode of the mounted files.
	Permission os.FileMode
	// CurrentVersions maps the id of every object mounted now to its version.
	CurrentVersions map[string]string
}

// String prints the request without any value that may be secret: attribute
// keys only, and only the number of secrets.
func (r MountRequest) String() string {
	return fmt.Sprintf("MountRequest{TargetPath: %q, Permission: %#o, AttributeKeys: %q, Secrets: <%d redacted>, CurrentVersions: %d}",
		r.TargetPath, uint32(r.Permission), slices.Sorted(maps.Keys(r.Attributes)), len(r.Secrets), len(r.CurrentVersions))
}

// GoString redacts %#v the same way as %v.
func (r MountRequest) GoString() string { return r.String() }

// parseRequest decodes a wire request. Errors name the field at fault and
// never quote its contents.
func parseRequest(req *v1alpha1.MountRequest) (*MountRequest, error) {
	attrs, err := parseStringMap("attributes", req.GetAttributes(), false)
	if err != nil {
		return nil, err
	}
	secrets, err := parseStringMap("secrets", req.GetSecrets(), true)
	if err != nil {
		return nil, err
	}
	perm, err := parsePermission(req.GetPermission())
	if err != nil {
		return nil, err
	}
	current := make(map[string]string, len(req.GetCurrentObjectVersion()))
	for _, ov := range req.GetCurrentObjectVersion() {
		current[ov.GetId()] = ov.GetVersion()
	}
	return &MountRequest{
		Attributes:      attrs,
		Secrets:         secrets,
		TargetPath:      req.GetTargetPath(),
		Permission:      perm,
		CurrentVersions: current,
	}, nil
}

// parseStringMap decodes a JSON object of strings. The error deliberately
// leaves out the JSON error text, which can quote the input.
func parseStringMap(field, s string, emptyOK bool) (map[string]string, error) {
	m := map[string]string{}
	if emptyOK && strings.TrimSpace(s) == "" {
		return m, nil
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		where := ""
		if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
			where = fmt.Sprintf(" (syntax error at byte %d)", se.Offset)
		}
		return nil, fmt.Errorf("%s is not a JSON object of strings%s", field, where)
	}
	if m == nil { // "null"
		m = map[string]string{}
	}
	return m, nil
}

// parsePermission decodes the JSON of a file mode: a decimal number of
// permission bits, "420" for 0644.
func parsePermission(s string) (os.FileMode, error) {
	if s == "" {
		return defaultPermission, nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || os.FileMode(n)&^os.ModePerm != 0 {
		return 0, fmt.Errorf("permission %q is not a decimal file mode between 0 and 511 (0777)", s)
	}
	return os.FileMode(n), nil
}
