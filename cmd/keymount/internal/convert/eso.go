package convert

import (
	"fmt"
	"maps"
	"strings"

	"github.com/keymount/keymount/provider/aws/spec"
)

// Fields of an ESO ExternalSecret that keymount convert reads.
var (
	esoSpecFields     = []string{"secretStoreRef", "target", "refreshInterval", "refreshPolicy", "data", "dataFrom"}
	esoTargetFields   = []string{"name", "creationPolicy", "deletionPolicy", "template", "immutable"}
	esoTemplateFields = []string{"type", "engineVersion", "metadata", "data", "templateFrom", "mergePolicy"}
	esoDataFields     = []string{"secretKey", "remoteRef", "sourceRef"}
	esoRemoteRefs     = []string{"key", "property", "version", "conversionStrategy", "decodingStrategy", "metadataPolicy", "nullBytePolicy"}
)

// esoDefaultRefresh is ESO's refreshInterval when the field is not set.
const esoDefaultRefresh = "1h"

// convertESO converts an external-secrets.io/v1 ExternalSecret.
func (cv *converter) convertESO(d *document) *conversion {
	meta := field(d.fields, "metadata")
	ns, name := str(cv.noIssues(), "", meta, "namespace"), str(cv.noIssues(), "", meta, "name")
	is := cv.issuesFor("ExternalSecret " + objectName(ns, name))
	c := cv.convertESOSpec(is, ns, name, field(d.fields, "spec"), false)
	if c != nil {
		esoMetadataToSecret(is, c, field(d.fields, "spec"), strMap(is, "metadata", meta, "labels"), strMap(is, "metadata", meta, "annotations"))
	}
	return c
}

// lastApplied is kubectl's annotation of an applied manifest.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// esoMetadataToSecret gives the Secret the ExternalSecret's own labels and
// annotations when it has no target.template, as External Secrets does (a
// template's metadata replaces them). kubectl's last-applied annotation
// describes the ExternalSecret, not the Secret: it is left out.
func esoMetadataToSecret(is issues, c *conversion, spec map[string]any, labels, annotations map[string]string) {
	if field(field(spec, "target"), "template") != nil {
		return
	}
	if len(labels) > 0 && c.labels == nil {
		c.labels = map[string]string{}
	}
	maps.Copy(c.labels, labels)
	for k, v := range annotations {
		if k == lastApplied {
			is.note("metadata.annotations", "%s is kubectl's record of the ExternalSecret; External Secrets copies it onto the Secret, keymount does not", lastApplied)
			continue
		}
		if c.annotations == nil {
			c.annotations = map[string]string{}
		}
		c.annotations[k] = v
	}
}

// convertESOSpec converts the spec of the ExternalSecret ns/name (also a
// ClusterExternalSecret's externalSecretSpec: cluster, whose target
// namespaces convertCES checks against the store's conditions); is names
// the object.
func (cv *converter) convertESOSpec(is issues, ns, name string, specFields map[string]any, cluster bool) *conversion {
	unknownFields(is, "spec", specFields, esoSpecFields...)
	c := &conversion{source: is.object, namespace: ns, className: name, syncName: name}
	st := cv.esoStore(is, "spec.secretStoreRef", ns, field(specFields, "secretStoreRef"), cluster)
	if st == nil {
		return nil
	}
	c.region, c.provider = st.region, "aws"
	if st.vault != nil {
		c.provider, c.vaultParams = "vault", st.vault.params
	}
	cv.identity(c, st)
	cv.esoTarget(is, c, field(specFields, "target"))
	c.syncAnnotations = esoRefresh(is, specFields)
	esoPolicies(is, c, field(specFields, "target"))
	for i, e := range items(specFields, "data") {
		cv.esoData(is, c, st, index("spec.data", i), e)
	}
	for i, e := range items(specFields, "dataFrom") {
		cv.esoDataFromEntry(is, c, st, index("spec.dataFrom", i), e)
	}
	if len(c.dataFrom) > 0 {
		if c.syncAnnotations == nil {
			c.syncAnnotations = map[string]string{}
		}
		c.syncAnnotations[annotationDataFrom] = strings.Join(c.dataFrom, ",")
	}
	tmpl := field(field(specFields, "target"), "template")
	esoTemplate(is, c, "spec.target.template", tmpl)
	return c
}

// esoTarget reads spec.target: the Secret's name, type and metadata.
func (cv *converter) esoTarget(is issues, c *conversion, t map[string]any) {
	const path = "spec.target"
	unknownFields(is, path, t, esoTargetFields...)
	if n := str(is, path, t, "name"); n != "" {
		c.syncName = n
	}
	if v, ok := t["immutable"].(bool); ok && v {
		is.unsupported(path+".immutable", "keymount writes mutable Secrets")
	}
	c.secretTemplate(is, path+".template", field(t, "template"), esoTemplateFields...)
}

// Annotations of a SecretSync that say who owns its Secret
// (controller/secretsync): ESO's target.creationPolicy and deletionPolicy,
// with the same values and defaults.
const (
	annotationCreationPolicy = "keymount.io/creation-policy"
	annotationDeletionPolicy = "keymount.io/deletion-policy"
)

// esoPolicies maps target.creationPolicy and target.deletionPolicy to
// keymount's annotations (the defaults, Owner and Retain, write none),
// refusing the combinations External Secrets refuses too.
func esoPolicies(is issues, c *conversion, t map[string]any) {
	const path = "spec.target"
	creation, deletion := str(is, path, t, "creationPolicy"), str(is, path, t, "deletionPolicy")
	switch creation {
	case "", "Owner", "Orphan", "Merge", "None":
	default:
		is.invalid(path+".creationPolicy", "%q is not Owner, Orphan, Merge or None", creation)
		return
	}
	switch deletion {
	case "", "Retain", "Delete", "Merge":
	default:
		is.invalid(path+".deletionPolicy", "%q is not Retain, Delete or Merge", deletion)
		return
	}
	switch {
	case deletion == "Delete" && (creation == "Merge" || creation == "None"):
		is.invalid(path+".deletionPolicy", "Delete with creationPolicy %s: External Secrets refuses it too (only a Secret the controller created is deleted); use Retain or Merge", creation)
		return
	case deletion == "Merge" && creation == "None":
		is.invalid(path+".deletionPolicy", "Merge with creationPolicy None: External Secrets refuses it too (there is no Secret to merge into); use Retain")
		return
	}
	// Policies beyond v0.0.5's guard rails: a note naming the switch.
	switch creation {
	case "Orphan", "Merge":
		value := strings.ToLower(creation)
		is.note(path+".creationPolicy", "%s needs, where keymount-controller's guard rails are installed, the chart value controller.secretPolicies.%s: true "+
			"(kustomize: variable %sAllowed of keymount-controller-secret-owner); see docs/secrets-without-pods.md", creation, value, value)
	}
	if deletion == "Delete" {
		is.note(path+".deletionPolicy", "Delete needs, where keymount-controller's guard rails are installed, the chart value controller.secretPolicies.delete: true "+
			"(kustomize: variable deleteAllowed of keymount-controller-no-secret-deletes and delete on Secrets); see docs/secrets-without-pods.md")
	}
	if creation != "" && creation != "Owner" {
		if c.syncAnnotations == nil {
			c.syncAnnotations = map[string]string{}
		}
		c.syncAnnotations[annotationCreationPolicy] = creation
	}
	if deletion != "" && deletion != "Retain" {
		if c.syncAnnotations == nil {
			c.syncAnnotations = map[string]string{}
		}
		c.syncAnnotations[annotationDeletionPolicy] = deletion
	}
}

// esoRefresh maps refreshPolicy and refreshInterval to keymount's refresh
// annotations.
func esoRefresh(is issues, s map[string]any) map[string]string {
	policy := str(is, "spec", s, "refreshPolicy")
	interval := esoDefaultRefresh
	if v, ok := s["refreshInterval"]; ok && v != nil {
		interval = str(is, "spec", s, "refreshInterval")
	}
	switch policy {
	case "CreatedOnce":
		return createdOnce()
	case "OnChange":
		return map[string]string{annotationPolicy: "OnDemand"}
	case "", "Periodic":
	default:
		is.unsupported("spec.refreshPolicy", "%q is not Periodic, CreatedOnce or OnChange", policy)
		return nil
	}
	zero, err := isZeroDuration(interval)
	switch {
	case err != nil:
		is.invalid("spec.refreshInterval", "%q is not a duration like \"1h\" or \"15m\": %v", interval, err)
		return nil
	case zero:
		return createdOnce()
	}
	return map[string]string{annotationPolicy: "Periodic", annotationInterval: interval}
}

// esoData converts one spec.data entry into a Secret key.
func (cv *converter) esoData(is issues, c *conversion, st *esoStoreInfo, path string, e map[string]any) {
	unknownFields(is, path, e, esoDataFields...)
	if _, ok := e["sourceRef"]; ok {
		is.unsupported(path+".sourceRef", "a per-key store or generator; keymount reads every key of a SecretSync through its one class")
		return
	}
	key := str(is, path, e, "secretKey")
	ref := field(e, "remoteRef")
	rpath := path + ".remoteRef"
	unknownFields(is, rpath, ref, esoRemoteRefs...)
	esoStrategies(is, rpath, ref)
	remote := str(is, rpath, ref, "key")
	if key == "" || remote == "" {
		is.invalid(path, "secretKey and remoteRef.key are required")
		return
	}
	if st.vault != nil {
		if cv.checkKey(is, path+".secretKey", c, key) && cv.esoVaultData(is, c, st.vault, rpath, key, ref) {
			c.keys = append(c.keys, secretKey{targetKey: key, sourcePath: key})
		}
		return
	}
	r := storeRef{typ: st.service, name: st.prefix + remote}
	remoteVersion(&r, str(is, rpath, ref, "version"))
	if prop := str(is, rpath, ref, "property"); prop != "" {
		jp, ok := gjsonToJMESPath(is, rpath+".property", prop)
		if !ok {
			return
		}
		r.jmesPath = jp
	}
	if !cv.checkKey(is, path+".secretKey", c, key) {
		return
	}
	c.addRef(key, r)
	c.keys = append(c.keys, secretKey{targetKey: key, sourcePath: key})
}

// remoteVersion maps remoteRef.version: for Secrets Manager "uuid/<id>" is a
// version ID and anything else a staging label, as ESO reads it; for
// Parameter Store a number is a version and anything else a label.
func remoteVersion(r *storeRef, v string) {
	switch {
	case v == "":
	case r.typ == spec.SecretsManager && strings.HasPrefix(v, "uuid/"):
		r.version = strings.TrimPrefix(v, "uuid/")
	case r.typ == spec.SecretsManager:
		r.versionLabel = v
	case isDigits(v):
		r.version = v
	default:
		r.versionLabel = v
	}
}

// esoStrategies refuses the remoteRef options that change the value.
func esoStrategies(is issues, path string, ref map[string]any) {
	defaults := map[string][]string{
		"conversionStrategy": {"Default"},
		"decodingStrategy":   {"None"},
		"metadataPolicy":     {"None"},
		"nullBytePolicy":     {"Ignore"},
	}
	for _, k := range sortedKeys(defaults) {
		if v := str(is, path, ref, k); v != "" && v != defaults[k][0] {
			is.unsupported(path+"."+k, "%q: keymount writes the store value as it is", v)
		}
	}
}

func createdOnce() map[string]string {
	return map[string]string{annotationPolicy: "CreatedOnce"}
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// isZeroDuration parses a Kubernetes duration ("1h", "0", "0s").
func isZeroDuration(s string) (bool, error) {
	d, err := parseDuration(s)
	if err != nil {
		return false, err
	}
	if d < 0 {
		return false, fmt.Errorf("negative")
	}
	return d == 0, nil
}
