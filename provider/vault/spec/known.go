package spec

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/keymount/keymount/internal/classparams"
)

// KeyIgnore is the class's opt-out: the comma-separated parameter keys and
// object fields its author declares safe to ignore (keys of a newer
// vault-csi-provider). Anything else unknown is refused.
const KeyIgnore = classparams.IgnoreKey

// upstreamKeys are the class parameters of vault-csi-provider v1.7, as
// keymount reads them.
var upstreamKeys = []string{
	KeyAddress, KeyRole, KeyAuthMount, KeyKubeMount, KeyNamespace, KeyCACert, KeyCADir, KeyTLSServerName,
	KeyClientCert, KeyClientKey, KeySkipVerify, KeyAudience, KeyObjects,
}

// ownKeys are keymount's own class parameters.
var ownKeys = []string{KeyCACertPEM, KeyShare, KeyRevoke, KeyIgnore}

// newerKeys are parameters of vault-csi-provider releases keymount does not
// follow yet, with where they come from.
var newerKeys = map[string]string{
	"auth": "the auth block (type kubernetes, jwt or aws, mouthPath, aws: AWS IAM login) of vault-csi-provider releases after v1.7.4",
}

// droppedKeys are parameters vault-csi-provider stopped reading, with
// what became of them.
var droppedKeys = map[string]string{
	"kubernetesServiceAccountPath": "ignored by vault-csi-provider since v0.1.0 (it logs in with the pod's own token, as keymount does)",
	"vaultCAPem":                   "ignored by vault-csi-provider since v0.1.0 (keymount's " + KeyCACertPEM + " takes the CA's PEM text)",
}

// upstreamFields are the fields of an object of vault-csi-provider v1.7.
var upstreamFields = []string{"objectName", "secretPath", "secretKey", "secretArgs", "method", "encoding", "filePermission"}

// ownFields are keymount's own object fields.
var ownFields = []string{"extract"}

// droppedFields are object fields vault-csi-provider stopped reading.
var droppedFields = map[string]string{
	"objectPath":    "renamed secretPath by vault-csi-provider v0.1.0",
	"objectVersion": "ignored by vault-csi-provider since v0.1.0",
	"array":         "vault-csi-provider v0.0.x's wrapper list, gone since v0.1.0: objects is the list itself",
}

// isKnownKey reports whether keymount-provider-vault reads key.
func isKnownKey(key string) bool {
	return slices.Contains(upstreamKeys, key) || slices.Contains(ownKeys, key)
}

// checkKeys refuses every class parameter keymount-provider-vault does not
// read, the keys the driver adds and those the class lists under
// keymount.io/ignore-parameters aside. Errors name the key, never its value.
func checkKeys(attrs map[string]string) error {
	var errs []error
	for _, k := range classparams.Unknown(attrs, isKnownKey) {
		if c := caseOf(k, upstreamKeys, ownKeys); c != "" {
			errs = append(errs, fmt.Errorf("parameter %q is unknown to keymount-provider-vault: keys are case-sensitive: did you mean %q?", k, c))
			continue
		}
		errs = append(errs, unknownError(fmt.Sprintf("parameter %q", k), newerKeys[k], droppedKeys[k],
			"vault-csi-provider v1.7's parameters ("+strings.Join(upstreamKeys, ", ")+") and keymount's ("+
				strings.Join(ownKeys, ", ")+")"))
	}
	return errors.Join(errs...)
}

// checkFields refuses every field of object i (its keys as written) that
// keymount-provider-vault does not read, the fields listed under
// keymount.io/ignore-parameters aside.
func checkFields(i int, fields []string, ignored map[string]bool) error {
	var errs []error
	for _, f := range fields {
		if slices.Contains(upstreamFields, f) || slices.Contains(ownFields, f) || ignored[f] {
			continue
		}
		if c := caseOf(f, upstreamFields, ownFields); c != "" {
			errs = append(errs, fmt.Errorf("%s[%d]: field %q is unknown to keymount-provider-vault: fields are case-sensitive: did you mean %q?", KeyObjects, i, f, c))
			continue
		}
		errs = append(errs, unknownError(fmt.Sprintf("%s[%d]: field %q", KeyObjects, i, f), "", droppedFields[f],
			"vault-csi-provider v1.7's object fields ("+strings.Join(upstreamFields, ", ")+") and keymount's ("+
				strings.Join(ownFields, ", ")+")"))
	}
	return errors.Join(errs...)
}

// unknownError says what is wrong with what (a parameter or an object
// field) that keymount-provider-vault does not read: newer names the
// vault-csi-provider release that knows it, dropped what became of it,
// known what is read instead.
func unknownError(what, newer, dropped, known string) error {
	fix := fmt.Sprintf("remove it, or list it in the class's %s if ignoring it is safe", KeyIgnore)
	switch {
	case newer != "":
		return fmt.Errorf("%s is not supported by keymount-provider-vault: it is %s; %s", what, newer, fix)
	case dropped != "":
		return fmt.Errorf("%s is not read by keymount-provider-vault: it was %s; %s", what, dropped, fix)
	}
	return fmt.Errorf("%s is unknown to keymount-provider-vault, which reads %s: check its spelling, or, for a key of a newer vault-csi-provider that is safe to ignore, list it in the class's %s",
		what, known, KeyIgnore)
}

// caseOf returns the key of known that key spells in another case, "" for
// none: keys are case-sensitive, and a near miss deserves its name.
func caseOf(key string, known ...[]string) string {
	for _, ks := range known {
		for _, k := range ks {
			if strings.EqualFold(k, key) {
				return k
			}
		}
	}
	return ""
}
