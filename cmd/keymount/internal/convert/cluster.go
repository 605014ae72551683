package convert

import (
	"cmp"
	"encoding/json"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations keymount-controller's fan-out reads on a source Secret
// (controller/reflector's constants, kept here so the CLI does not link
// the controller; TestClusterAnnotationsMatchController checks them):
// reflector's, and keymount's OR-ed label selectors separated by ";".
const (
	reflectorPrefix             = "reflector.v1.k8s.emberstack.com/"
	annotationReflectionAllowed = reflectorPrefix + "reflection-allowed"
	annotationAllowedNamespaces = reflectorPrefix + "reflection-allowed-namespaces"
	annotationAutoEnabled       = reflectorPrefix + "reflection-auto-enabled"
	annotationAutoNamespaces    = reflectorPrefix + "reflection-auto-namespaces"
	annotationAllowedSelectors  = "keymount.io/reflection-allowed-namespaces-selectors"
	annotationAutoSelectors     = "keymount.io/reflection-auto-namespaces-selectors"
	selectorSeparator           = ";"
)

// DefaultClusterNamespace is where a ClusterExternalSecret's SecretSync
// goes unless --cluster-namespace says otherwise.
const DefaultClusterNamespace = "keymount-cluster-secrets"

// Fields of an ESO ClusterExternalSecret that keymount convert reads.
var esoClusterFields = []string{"externalSecretSpec", "externalSecretName", "externalSecretMetadata",
	"namespaceSelectors", "namespaceSelector", "namespaces", "refreshTime"}

// convertCES converts a ClusterExternalSecret: its externalSecretSpec
// becomes one SecretProviderClass and SecretSync in the cluster namespace
// (Options.ClusterNamespace), and the Secret they write carries
// reflector's annotations (with keymount's OR-ed selectors) so that
// keymount-controller's fan-out copies it into every namespace the
// ClusterExternalSecret selects, and deletes its copies from those that
// stop matching.
func (cv *converter) convertCES(d *document) *conversion {
	meta := field(d.fields, "metadata")
	name := str(cv.noIssues(), "", meta, "name")
	is := cv.issuesFor("ClusterExternalSecret " + name)
	s := field(d.fields, "spec")
	unknownFields(is, "spec", s, esoClusterFields...)
	ns := cv.clusterNamespace()
	esName := name
	if n := str(is, "spec", s, "externalSecretName"); n != "" {
		esName = n
	}
	esSpec := field(s, "externalSecretSpec")
	if kind := str(is, "spec.externalSecretSpec.secretStoreRef", field(esSpec, "secretStoreRef"), "kind"); kind != "ClusterSecretStore" {
		is.unsupported("spec.externalSecretSpec.secretStoreRef.kind", "%q: each namespace's own SecretStore; keymount writes one SecretSync in %q that reads through a ClusterSecretStore and copies the Secret; convert each namespace's ExternalSecret instead", cmp.Or(kind, "SecretStore"), ns)
		return nil
	}
	storeName := str(cv.noIssues(), "", field(esSpec, "secretStoreRef"), "name")
	targets, ok := cesNamespaces(is, s, cv.stores[storeKey("ClusterSecretStore", "", storeName)])
	if !ok {
		return nil
	}
	// The externalSecretSpec's issues are named with their full path.
	inner := cv.issuesFor(is.object + " spec.externalSecretSpec")
	c := cv.convertESOSpec(inner, ns, esName, esSpec, true)
	if c == nil {
		return nil
	}
	c.source, c.cluster = is.object, true
	md := field(s, "externalSecretMetadata")
	unknownFields(is, "spec.externalSecretMetadata", md, "labels", "annotations")
	c.syncLabels = strMap(is, "spec.externalSecretMetadata", md, "labels")
	// The ExternalSecrets' metadata reaches their Secrets without a
	// template.
	esoMetadataToSecret(is, c, esSpec, c.syncLabels, strMap(is, "spec.externalSecretMetadata", md, "annotations"))
	for k, v := range strMap(is, "spec.externalSecretMetadata", md, "annotations") {
		if _, taken := c.syncAnnotations[k]; taken {
			is.unsupported("spec.externalSecretMetadata.annotations", "%s: keymount sets it on the SecretSync", k)
			continue
		}
		if c.syncAnnotations == nil {
			c.syncAnnotations = map[string]string{}
		}
		c.syncAnnotations[k] = v
	}
	if c.annotations == nil {
		c.annotations = map[string]string{}
	}
	for k, v := range targets {
		if _, taken := c.annotations[k]; taken {
			is.unsupported("spec.externalSecretSpec.target.template.metadata.annotations", "%s: keymount sets it to copy the Secret into the selected namespaces", k)
		}
		c.annotations[k] = v
	}
	if len(c.labels) > 0 {
		// External Secrets gives every namespace's Secret these labels.
		c.annotations[annotationCopyLabels] = "true"
	}
	is.note("", "keymount-controller copies the Secret %s into the selected namespaces (and removes its copies from those that stop matching) when it runs with --enable-fanout (chart: controller.fanout.enabled=true)", objectName(ns, c.syncName))
	if str(is, "spec", s, "refreshTime") != "" {
		is.note("spec.refreshTime", "not needed: keymount-controller watches namespaces and serves a new or relabelled one at once")
	}
	return c
}

// annotationCopyLabels (controller/reflector.AnnotationCopyLabels) "true"
// gives the copies the source Secret's labels.
const annotationCopyLabels = "keymount.io/reflection-copy-labels"

// clusterNamespace is the namespace of the ClusterExternalSecrets'
// SecretSyncs.
func (cv *converter) clusterNamespace() string {
	if cv.opts.ClusterNamespace != "" {
		return cv.opts.ClusterNamespace
	}
	return DefaultClusterNamespace
}

// cesNamespaces turns namespaces, namespaceSelectors and namespaceSelector
// (all OR-ed, as External Secrets reads them) into the source Secret's
// reflector annotations: the names as whole-name patterns, each selector
// one item of keymount's selector list. A selector that selects every
// namespace makes the whole set every namespace (no annotation but
// reflection-allowed and reflection-auto-enabled). ok is false when the
// set cannot be expressed or selects nothing.
//
// store is the ClusterSecretStore (nil when not in the input, reported
// later): its spec.conditions say which namespaces' ExternalSecrets may use
// it, and External Secrets writes no Secret in another. A listed namespace
// they leave out gets no copy either (a note); selectors with conditions
// are refused, since the copies follow the selectors alone.
func cesNamespaces(is issues, s map[string]any, store *document) (map[string]string, bool) {
	conditions := store != nil && len(items(field(store.fields, "spec"), "conditions")) > 0
	var names []string
	for i, v := range listOf(s, "namespaces") {
		n, isStr := v.(string)
		if !isStr || n == "" {
			is.invalid(index("spec.namespaces", i), "not a namespace name")
			return nil, false
		}
		if conditions {
			admitted, selector := storeAdmits(store, n)
			switch {
			case selector != "" && !admitted:
				is.unsupported(index("spec.namespaces", i), "%s: the namespaces' labels are not in the input, so keymount convert cannot tell whether External Secrets lets namespace %q use the store; name it in the condition's namespaces or namespaceRegexes", selector, n)
				return nil, false
			case !admitted:
				is.note(index("spec.namespaces", i), "the ClusterSecretStore's spec.conditions do not let namespace %q use it, so External Secrets writes no Secret there; keymount copies none there either", n)
				continue
			}
		}
		names = append(names, regexp.QuoteMeta(n))
	}
	var sels []map[string]any
	var paths []string
	for i, sel := range items(s, "namespaceSelectors") {
		sels, paths = append(sels, sel), append(paths, index("spec.namespaceSelectors", i))
	}
	if sel, ok := s["namespaceSelector"].(map[string]any); ok {
		sels, paths = append(sels, sel), append(paths, "spec.namespaceSelector")
	}
	if conditions && len(sels) > 0 {
		is.unsupported(paths[0], "the ClusterSecretStore's spec.conditions limit which namespaces may use it, but keymount's copies follow the selectors alone, so a selected namespace the conditions leave out would get the Secret; list the namespaces in spec.namespaces (each is checked against the conditions)")
		return nil, false
	}
	if len(names) == 0 && len(sels) == 0 {
		is.unsupported("spec", "no namespaces, namespaceSelectors or namespaceSelector the store admits: it selects no namespace")
		return nil, false
	}
	out := map[string]string{annotationReflectionAllowed: "true", annotationAutoEnabled: "true"}
	var selectors []string
	for i, sel := range sels {
		text, ok := selectorString(is, paths[i], sel)
		if !ok {
			return nil, false
		}
		if text == "" {
			return out, true // every namespace
		}
		selectors = append(selectors, text)
	}
	if len(names) > 0 {
		list := strings.Join(names, ",")
		out[annotationAllowedNamespaces], out[annotationAutoNamespaces] = list, list
	}
	if len(selectors) > 0 {
		list := strings.Join(selectors, selectorSeparator+" ")
		out[annotationAllowedSelectors], out[annotationAutoSelectors] = list, list
	}
	return out, true
}

// selectorString writes a metav1.LabelSelector as a label selector string
// ("" for one that selects every namespace).
func selectorString(is issues, path string, m map[string]any) (string, bool) {
	raw, err := json.Marshal(m)
	var ls metav1.LabelSelector
	if err == nil {
		err = json.Unmarshal(raw, &ls)
	}
	if err != nil {
		is.invalid(path, "not a label selector: %v", err)
		return "", false
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		is.invalid(path, "not a label selector: %v", err)
		return "", false
	}
	return sel.String(), true
}

// listOf returns m[key] as a list.
func listOf(m map[string]any, key string) []any {
	l, _ := m[key].([]any)
	return l
}
