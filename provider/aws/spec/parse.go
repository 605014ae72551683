package spec

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/keymount/keymount/internal/classparams"
)

// ErrInvalid is wrapped by every error Parse and SetDefaultRegion return.
var ErrInvalid = errors.New("invalid parameters")

// Keys of the mount attributes: the class's parameters, then what the driver
// adds to the volume context.
const (
	KeyObjects              = "objects"
	KeyRegion               = "region"
	KeyFailoverRegion       = "failoverRegion"
	KeyPathTranslation      = "pathTranslation"
	KeyUsePodIdentity       = "usePodIdentity"
	KeyPreferredAddressType = "preferredAddressType"
	// KeyAssumeRoleARN is upstream ASCP 3.2's role to assume with the
	// pod's credentials (role chaining).
	KeyAssumeRoleARN = "assumeRoleArn"
	// KeyIgnoreParameters is keymount's opt-out: keys of newer upstream
	// releases, comma-separated, that the class's author declares safe to
	// ignore.
	KeyIgnoreParameters = classparams.IgnoreKey
	// KeyClass is the pod volume's attribute naming its class; the driver
	// passes it on with the volume context.
	KeyClass = classparams.ClassKey

	KeyPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	KeyPodName        = "csi.storage.k8s.io/pod.name"
	KeyPodUID         = "csi.storage.k8s.io/pod.uid"
	KeyServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	KeyTokens         = "csi.storage.k8s.io/serviceAccount.tokens" //nolint:gosec // G101: an attribute key, not a credential
)

// defaultPathTranslation replaces "/" when the class does not say otherwise.
const defaultPathTranslation = "_"

// Parse builds a Spec from the mount attributes (class parameters and volume
// context keys, all strings) and the request's default file mode. Other keys
// of attrs are ignored: the driver adds its own. Every problem found is
// reported, joined into one error that wraps ErrInvalid. Errors never contain
// service account tokens.
//
// When the class sets no region, Spec.Region is "" and the checks that need
// it wait for SetDefaultRegion.
func Parse(attrs map[string]string, defaultMode os.FileMode) (*Spec, error) {
	return parse(attrs, defaultMode, true)
}

// ParsePush is Parse for a push (keymount's push extension): the same keys
// with the same checks (region, failover region, pod identity, tokens, the
// namespace and service account), but the class's objects are neither
// required nor read: a push names its objects per item.
func ParsePush(attrs map[string]string) (*Spec, error) {
	return parse(attrs, 0, false)
}

func parse(attrs map[string]string, defaultMode os.FileMode, objects bool) (*Spec, error) {
	var p problems
	ignore := checkKeys(&p, attrs)
	s := &Spec{
		Region:         attrs[KeyRegion],
		FailoverRegion: attrs[KeyFailoverRegion],
		AddressType:    AddressAuto,
		Namespace:      attrs[KeyPodNamespace],
		ServiceAccount: attrs[KeyServiceAccount],
		PodName:        attrs[KeyPodName],
		PodUID:         attrs[KeyPodUID],
	}
	checkRegionName(&p, KeyRegion, s.Region)
	checkRegionName(&p, KeyFailoverRegion, s.FailoverRegion)
	s.PathTranslation = parsePathTranslation(&p, attrs[KeyPathTranslation])
	s.UsePodIdentity, s.AddressType = parsePodIdentity(&p, attrs[KeyUsePodIdentity], attrs[KeyPreferredAddressType])
	s.Tokens = parseTokens(&p, attrs[KeyTokens])
	s.AssumeRoleARN = parseRoleARN(&p, attrs[KeyAssumeRoleARN])
	if defaultMode&^os.ModePerm != 0 {
		p.addf("default file mode %#o: has bits other than permissions", uint32(defaultMode))
	}
	if objects {
		s.Objects = parseObjects(&p, attrs[KeyObjects], s.PathTranslation, s.FailoverRegion != "", defaultMode&os.ModePerm, ignore)
	}
	if s.Region != "" {
		checkRegions(&p, s)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// SetDefaultRegion sets Region to region (the node's region) when the class
// did not set one, then runs the checks that need it: the failover region
// differs from the region and every ARN names its object's region.
func (s *Spec) SetDefaultRegion(region string) error {
	if s.Region != "" {
		return nil
	}
	var p problems
	if region == "" {
		p.addf("%s: is not set and the node's region is unknown; set %s in the SecretProviderClass", KeyRegion, KeyRegion)
		return p.err()
	}
	checkRegionName(&p, "node region", region)
	s.Region = region
	checkRegions(&p, s)
	return p.err()
}

// checkRegionName rejects a region that could not be an AWS region name, so
// that it never reaches an endpoint host name.
func checkRegionName(p *problems, key, region string) {
	if region == "" {
		return
	}
	ok := len(region) <= 32 && strings.Trim(region, "abcdefghijklmnopqrstuvwxyz0123456789-") == "" &&
		!strings.HasPrefix(region, "-") && !strings.HasSuffix(region, "-")
	if !ok {
		p.addf("%s: %s is not an AWS region name like \"us-east-1\"", key, quote(region))
	}
}

// checkRegions runs the checks that need s.Region.
func checkRegions(p *problems, s *Spec) {
	if s.FailoverRegion != "" && s.FailoverRegion == s.Region {
		p.addf("%s: %s is the same as %s; use another region or remove %s", KeyFailoverRegion, quote(s.FailoverRegion), KeyRegion, KeyFailoverRegion)
	}
	for i := range s.Objects {
		o := &s.Objects[i]
		where := objectWhere(i, o.Name)
		checkARNRegion(p, where+".objectName", o.Name, KeyRegion, s.Region)
		if o.Failover != nil {
			checkARNRegion(p, where+".failoverObject.objectName", o.Failover.Name, KeyFailoverRegion, s.FailoverRegion)
		}
	}
}

func checkARNRegion(p *problems, where, name, regionKey, region string) {
	a, isARN := parseARN(name)
	if isARN && a.valid() && a.region != region {
		p.addf("%s: the ARN is in region %s but %s is %s; use an ARN in %s", where, quote(a.region), regionKey, quote(region), quote(region))
	}
}

// parsePathTranslation returns the character that replaces "/" in file
// names, "" when translation is off.
func parsePathTranslation(p *problems, v string) string {
	switch {
	case v == "":
		return defaultPathTranslation
	case strings.EqualFold(v, "false"):
		return ""
	case len(v) != 1:
		p.addf("%s: %s is neither \"False\" nor a single character", KeyPathTranslation, quote(v))
	case v[0] < 0x20 || v[0] >= 0x7f || v[0] == '\\':
		p.addf("%s: %s cannot appear in a file name; use a printable character such as \"_\"", KeyPathTranslation, quote(v))
	default:
		return v
	}
	return defaultPathTranslation
}

func parsePodIdentity(p *problems, use, addr string) (bool, AddressType) {
	on := false
	if use != "" {
		var err error
		if on, err = strconv.ParseBool(use); err != nil {
			p.addf("%s: %s is not \"true\" or \"false\"", KeyUsePodIdentity, quote(use))
		}
	}
	at := AddressAuto
	switch AddressType(strings.ToLower(addr)) {
	case "", AddressAuto:
	case AddressIPv4:
		at = AddressIPv4
	case AddressIPv6:
		at = AddressIPv6
	default:
		p.addf("%s: %s is not ipv4, ipv6 or auto", KeyPreferredAddressType, quote(addr))
	}
	if !on {
		// Only the Pod Identity agent has an address to choose; the existing
		// provider ignores the setting without it, and so do we.
		at = AddressAuto
	}
	return on, at
}
