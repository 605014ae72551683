package reflector

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/controller/fanout"
)

// Prefix is reflector's annotation prefix.
const Prefix = "reflector.v1.k8s.emberstack.com/"

// reflector's annotations, as it reads and writes them.
const (
	// On a source.
	AnnotationAllowed                   = Prefix + "reflection-allowed"
	AnnotationAllowedNamespaces         = Prefix + "reflection-allowed-namespaces"
	AnnotationAllowedNamespacesSelector = Prefix + "reflection-allowed-namespaces-selector"
	AnnotationAutoEnabled               = Prefix + "reflection-auto-enabled"
	AnnotationAutoNamespaces            = Prefix + "reflection-auto-namespaces"
	AnnotationAutoNamespacesSelector    = Prefix + "reflection-auto-namespaces-selector"
	// On a mirror: the source "<namespace>/<name>" (set by hand on a
	// manual mirror; written on every copy).
	AnnotationReflects = Prefix + "reflects"
	// Written on every copy: "True" for an automatic copy, "False" for a
	// manual mirror (.NET's spelling of a bool), the source's resource
	// version, and the time of the write (ISO 8601, 7 fraction digits,
	// +00:00).
	AnnotationAutoReflects     = Prefix + "auto-reflects"
	AnnotationReflectedVersion = Prefix + "reflected-version"
	AnnotationReflectedAt      = Prefix + "reflected-at"
)

// keymount's additions on a source: label selectors separated by
// fanout.SelectorSeparator (";"), OR-ed with each other and with
// reflector's single selector of the same set — what External Secrets'
// ClusterExternalSecret namespaceSelectors say, which one selector cannot
// (keymount convert writes them). reflector ignores them.
const (
	AnnotationAllowedNamespacesSelectors = "keymount.io/reflection-allowed-namespaces-selectors"
	AnnotationAutoNamespacesSelectors    = "keymount.io/reflection-auto-namespaces-selectors"
)

// AnnotationCopyLabels "true" on a source gives its copies the source's
// labels too (reflector copies none): a ClusterExternalSecret's Secret
// carries its labels in every namespace (keymount convert writes it).
// Labels under secrets-store.sync.x-k8s.io, the SecretSync controller's,
// stay on the source.
const AnnotationCopyLabels = "keymount.io/reflection-copy-labels"

// syncLabelPrefix starts the labels of the SecretSync controller.
const syncLabelPrefix = "secrets-store.sync.x-k8s.io"

// copiedLabels are the labels a copy of src carries: none, or with
// AnnotationCopyLabels the source's but the SecretSync controller's.
func copiedLabels(src client.Object) map[string]string {
	if !parseBool(src.GetAnnotations()[AnnotationCopyLabels]) || len(src.GetLabels()) == 0 {
		return nil
	}
	out := make(map[string]string, len(src.GetLabels()))
	for k, v := range src.GetLabels() {
		if !strings.HasPrefix(k, syncLabelPrefix) {
			out[k] = v
		}
	}
	return out
}

// WriterName is the fanout.LabelCopy value of the copies this package
// writes.
const WriterName = "reflector"

// reflectedAtLayout is how reflector writes reflected-at (.NET's
// DateTimeOffset round-trip format, in UTC).
const reflectedAtLayout = "2006-01-02T15:04:05.0000000-07:00"

// ReflectedAt formats t as reflector writes reflected-at.
func ReflectedAt(t time.Time) string { return t.UTC().Format(reflectedAtLayout) }

// Properties are what an object's reflector annotations say.
type Properties struct {
	// Allowed: reflection-allowed is true; the object may be copied into
	// AllowedNamespaces.
	Allowed bool
	// AutoEnabled: reflection-auto-enabled is true; with Allowed, copies
	// are made into every namespace of both AllowedNamespaces and
	// AutoNamespaces.
	AutoEnabled       bool
	AllowedNamespaces fanout.NamespaceSet
	AutoNamespaces    fanout.NamespaceSet
	// Reflects is the source a mirror names; nil on a source (or when the
	// value is not "<namespace>/<name>").
	Reflects *types.NamespacedName
	// AutoReflects: auto-reflects is true (an automatic copy).
	AutoReflects bool
	// Err names the namespace patterns and selectors that do not parse
	// (they match nothing).
	Err error
}

// PropertiesOf reads an object's annotations as reflector does: booleans
// as .NET parses them ("true" in any case, spaces around allowed;
// anything else is false).
func PropertiesOf(a map[string]string) Properties {
	p := Properties{
		Allowed:      parseBool(a[AnnotationAllowed]),
		AutoEnabled:  parseBool(a[AnnotationAutoEnabled]),
		AutoReflects: parseBool(a[AnnotationAutoReflects]),
		Reflects:     parseRef(a[AnnotationReflects]),
	}
	var errs []error
	var err error
	if p.AllowedNamespaces, err = namespaceSet(a, AnnotationAllowedNamespaces, AnnotationAllowedNamespacesSelector, AnnotationAllowedNamespacesSelectors); err != nil {
		errs = append(errs, fmt.Errorf("reflection-allowed-namespaces: %w", err))
	}
	if p.AutoNamespaces, err = namespaceSet(a, AnnotationAutoNamespaces, AnnotationAutoNamespacesSelector, AnnotationAutoNamespacesSelectors); err != nil {
		errs = append(errs, fmt.Errorf("reflection-auto-namespaces: %w", err))
	}
	p.Err = errors.Join(errs...)
	return p
}

// namespaceSet reads one set: reflector's list and selector, and
// keymount's further selectors.
func namespaceSet(a map[string]string, list, selector, selectors string) (fanout.NamespaceSet, error) {
	s, err := fanout.ParseNamespaceSet(a[list], a[selector])
	more, merr := s.WithSelectors(a[selectors])
	return more, errors.Join(err, merr)
}

// IsAutoSource reports whether copies are made automatically.
func (p Properties) IsAutoSource() bool { return p.Allowed && p.AutoEnabled }

// CanReflectTo reports whether a mirror may live in the namespace (name,
// labels).
func (p Properties) CanReflectTo(ns string, labels map[string]string) bool {
	return p.Allowed && p.AllowedNamespaces.Matches(ns, labels)
}

// CanAutoReflectTo reports whether an automatic copy belongs in the
// namespace.
func (p Properties) CanAutoReflectTo(ns string, labels map[string]string) bool {
	return p.CanReflectTo(ns, labels) && p.AutoEnabled && p.AutoNamespaces.Matches(ns, labels)
}

// IsReflectorObject reports whether annotations carry any of reflector's
// annotations but auto-reflects: a source or a manual mirror. Automatic
// copies (keymount's or reflector's) are found through their source.
func IsReflectorObject(a map[string]string) bool {
	if parseBool(a[AnnotationAutoReflects]) {
		return false
	}
	for k := range a {
		if strings.HasPrefix(k, Prefix) {
			return true
		}
	}
	return false
}

func parseBool(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// formatBool writes a bool as reflector (.NET) does.
func formatBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// parseRef parses "<namespace>/<name>".
func parseRef(v string) *types.NamespacedName {
	ns, name, ok := strings.Cut(strings.TrimSpace(v), "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil
	}
	return &types.NamespacedName{Namespace: ns, Name: name}
}
