package secretmirror

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	mirrorsv1alpha2 "github.com/keymount/keymount/apis/mirrors/v1alpha2"
)

// spec is a SecretMirror's spec with mirrors' defaults applied and its
// destination compiled.
type spec struct {
	sourceName string
	// vaultSource: source.type vault, read by the vaultReader.
	vaultSource bool
	// vaultDestination: destination.type vault, the KV secret at
	// destination.vault.path.
	vaultDestination bool
	deletePolicy     mirrorsv1alpha2.DeletePolicy
	period           time.Duration
	match            matcher
}

// matcher reports whether a namespace receives a copy.
type matcher []*regexp.Regexp

func (m matcher) matches(namespace string) bool {
	for _, re := range m {
		if re.MatchString(namespace) {
			return true
		}
	}
	return false
}

// errNoDestination: a namespaces destination without a regular expression.
var errNoDestination = errors.New("spec.destination.namespaces is empty: list at least one regular expression of namespace names")

// parseSpec applies mirrors' defaults (source.name the SecretMirror's name,
// pollPeriodSeconds 180, deletePolicy delete, retain for a Vault
// destination) and compiles the destination. A Vault destination is
// checked for its address and path.
func parseSpec(m *mirrorsv1alpha2.SecretMirror) (spec, error) {
	s := spec{
		sourceName:   m.Spec.Source.Name,
		deletePolicy: m.Spec.DeletePolicy,
		period:       time.Duration(m.Spec.PollPeriodSeconds) * time.Second,
	}
	if s.sourceName == "" {
		s.sourceName = m.Name
	}
	if m.Spec.PollPeriodSeconds <= 0 {
		s.period = mirrorsv1alpha2.DefaultPollPeriodSeconds * time.Second
	}
	if s.deletePolicy == "" {
		s.deletePolicy = mirrorsv1alpha2.DeletePolicyDelete
	}
	s.vaultSource = m.Spec.Source.Type == mirrorsv1alpha2.SourceTypeVault
	if m.Spec.Destination.Type == mirrorsv1alpha2.DestinationTypeVault {
		s.vaultDestination = true
		s.deletePolicy = mirrorsv1alpha2.DeletePolicyRetain
		if v := m.Spec.Destination.Vault; v == nil || v.Addr == "" || v.Path == "" {
			return s, errors.New("spec.destination.vault.addr and spec.destination.vault.path are required with destination.type vault: give Vault's address and the KV path to write (<mount>/data/<name> for KV version 2)")
		}
		return s, nil
	}
	var err error
	s.match, err = compile(m.Spec.Destination)
	return s, err
}

// compile turns the destination into a matcher: each entry of namespaces
// and v1alpha1's namespaceRegex as an unanchored Go regular expression (as
// mirrors matches them), v1alpha1's namespace as an exact name.
func compile(d mirrorsv1alpha2.SecretMirrorDestination) (matcher, error) {
	exprs := d.Namespaces
	if d.NamespaceRegex != "" {
		exprs = append(exprs[:len(exprs):len(exprs)], d.NamespaceRegex)
	}
	var m matcher
	for i, expr := range exprs {
		if expr == "" {
			return nil, fmt.Errorf("spec.destination.namespaces[%d] is empty: give a regular expression of namespace names", i)
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("spec.destination.namespaces[%d] %q: %w", i, expr, err)
		}
		m = append(m, re)
	}
	if d.Namespace != "" {
		m = append(m, regexp.MustCompile("^"+regexp.QuoteMeta(d.Namespace)+"$"))
	}
	if len(m) == 0 {
		return nil, errNoDestination
	}
	return m, nil
}
