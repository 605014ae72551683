package spec

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/keymount/keymount/internal/classparams"
)

// Nothing unknown passes silently: a class written for a newer upstream
// ASCP may carry a key that changes what is read or as whom (3.2.0's
// assumeRoleArn names another role), and ignoring it would mount with the
// wrong identity and no error. So every attribute key and every field of
// `objects` that keymount does not read is refused, naming the key and,
// for a key of a newer upstream release, that release. A class lists in
// KeyIgnoreParameters the keys its author declares safe to ignore.

// knownKeys are the class parameters the AWS provider reads. What the
// drivers, kubelet and keymount-controller add (secretProviderClass and
// csi.storage.k8s.io/*: pod.name, pod.namespace, pod.uid,
// serviceAccount.name, serviceAccount.tokens, ephemeral) is no parameter
// and passes: classparams.DriverAdded.
var knownKeys = map[string]bool{
	KeyObjects: true, KeyRegion: true, KeyFailoverRegion: true, KeyPathTranslation: true,
	KeyUsePodIdentity: true, KeyPreferredAddressType: true, KeyAssumeRoleARN: true,
	KeyIgnoreParameters: true,
}

// newerKeys maps a class parameter of an upstream ASCP release that
// keymount does not implement to where upstream has it. Empty today: every
// parameter of ASCP up to 3.2.0 is implemented.
var newerKeys = map[string]string{}

// newerFields maps a field of an `objects` entry (folded to lower case, as
// fields match) that upstream has and keymount does not implement to where
// upstream has it.
var newerFields = map[string]string{
	"objecttemplate": "upstream ASCP's README describes it; no ASCP release keymount knows ships it",
}

// ignoreList is the class's KeyIgnoreParameters: parameter keys (matched
// exactly, as upstream reads them) and object fields (matched
// case-insensitively, as fields are decoded). Listing a key keymount reads
// changes nothing: it is still read, and means what it says.
type ignoreList map[string]bool

// param reports whether the class ignores parameter key k.
func (l ignoreList) param(k string) bool { return l[k] }

// field reports whether the class ignores object field k.
func (l ignoreList) field(k string) bool {
	for v := range l {
		if strings.EqualFold(v, k) {
			return true
		}
	}
	return false
}

// checkKeys refuses every key of attrs the AWS provider does not read and
// the class does not list in KeyIgnoreParameters, and returns that list.
func checkKeys(p *problems, attrs map[string]string) ignoreList {
	ignore := ignoreList(classparams.Ignored(attrs))
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		if knownKeys[k] || classparams.DriverAdded(k) || ignore.param(k) {
			continue
		}
		p.addf("%s: %s", keyName(k), unknownKey(k))
	}
	return ignore
}

// unknownKey says why class parameter k is refused and what to do.
func unknownKey(k string) string {
	if where, ok := newerKeys[k]; ok {
		return notKnown(where)
	}
	for _, known := range slices.Sorted(maps.Keys(knownKeys)) {
		if strings.EqualFold(known, k) {
			return fmt.Sprintf("not known to keymount's AWS provider; parameter keys are case-sensitive: did you mean %s?", known)
		}
	}
	return "not known to keymount's AWS provider, nor to any upstream ASCP release it knows of: check the spelling, " +
		"or list it in " + KeyIgnoreParameters + " if the class may mount without it"
}

// notKnown is the refusal of a key upstream has and keymount does not.
func notKnown(where string) string {
	return fmt.Sprintf("not known to keymount's AWS provider (%s); a mount without it may differ from upstream's: "+
		"remove it, or list it in %s if the class may mount without it", where, KeyIgnoreParameters)
}

// plainKey matches a key printed as it is in errors.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,80}$`)

// keyName prints a user-written key: as it is when plain, else quoted.
func keyName(k string) string {
	if plainKey.MatchString(k) {
		return k
	}
	return quote(k)
}
