package convert

import (
	"github.com/keymount/keymount/provider/aws/spec"
)

// Fields of a KES ExternalSecret that keymount convert reads.
var (
	kesSpecFields     = []string{"backendType", "region", "roleArn", "data", "dataFrom", "dataFromWithOptions", "template"}
	kesDataFields     = []string{"key", "name", "property", "versionStage", "versionId", "isBinary", "path", "recursive"}
	kesTemplateFields = []string{"metadata", "type", "data", "stringData"}
)

// convertKES converts a kubernetes-client.io/v1 ExternalSecret. KES writes
// a Secret named after the ExternalSecret, reads with the controller's
// identity (or roleArn) and refreshes every POLLER_INTERVAL_MILLISECONDS.
func (cv *converter) convertKES(d *document) *conversion {
	meta := field(d.fields, "metadata")
	ns, name := str(cv.noIssues(), "", meta, "namespace"), str(cv.noIssues(), "", meta, "name")
	is := cv.issuesFor("ExternalSecret " + objectName(ns, name) + " (" + kesVersion + ")")
	s := field(d.fields, "spec")
	unknownFields(is, "spec", s, kesSpecFields...)
	c := &conversion{source: is.object, namespace: ns, className: name, syncName: name,
		region: str(is, "spec", s, "region"), serviceAccount: cv.opts.ServiceAccount}
	var typ spec.ObjectType
	switch b := str(is, "spec", s, "backendType"); b {
	case "secretsManager":
		typ = spec.SecretsManager
	case "systemManager":
		typ = spec.SSMParameter
	default:
		is.unsupported("spec.backendType", "%q: keymount converts secretsManager and systemManager", b)
		return nil
	}
	if role := str(is, "spec", s, "roleArn"); role != "" {
		is.unsupported("spec.roleArn", "keymount does not assume roles for a controller: it reads as a ServiceAccount; annotate the ServiceAccount you pass with --service-account with eks.amazonaws.com/role-arn: %s", role)
	}
	for _, k := range []string{"dataFrom", "dataFromWithOptions"} {
		if _, ok := s[k]; ok {
			is.unsupported("spec."+k, "every field of a JSON value as its own key; list each field in spec.data with property instead")
		}
	}
	for i, e := range items(s, "data") {
		cv.kesData(is, c, typ, index("spec.data", i), e)
	}
	kesTemplate(is, c, field(s, "template"))
	// KES polls every ExternalSecret at the controller's interval:
	// keymount-controller's --rotation-poll-interval.
	c.syncAnnotations = map[string]string{annotationPolicy: "Periodic"}
	return c
}

// kesData converts one spec.data entry.
func (cv *converter) kesData(is issues, c *conversion, typ spec.ObjectType, path string, e map[string]any) {
	unknownFields(is, path, e, kesDataFields...)
	if _, ok := e["path"]; ok {
		is.unsupported(path+".path", "every parameter under a path; list each parameter in spec.data instead")
		return
	}
	key, name := str(is, path, e, "key"), str(is, path, e, "name")
	if key == "" || name == "" {
		is.invalid(path, "key and name are required")
		return
	}
	r := storeRef{typ: typ, name: key}
	r.version, r.versionLabel = str(is, path, e, "versionId"), str(is, path, e, "versionStage")
	if typ != spec.SecretsManager && r.version+r.versionLabel != "" {
		is.unsupported(path, "versionId and versionStage are Secrets Manager's")
		return
	}
	if r.version != "" && r.versionLabel != "" {
		is.unsupported(path, "both versionId and versionStage; keep one")
		return
	}
	if prop := str(is, path, e, "property"); prop != "" {
		if b, _ := e["isBinary"].(bool); b {
			is.unsupported(path+".property", "a property of a binary value")
			return
		}
		// KES reads a top-level key of the JSON value, dots included.
		r.jmesPath = quoteIdentifier(prop)
	}
	if !cv.checkKey(is, path+".name", c, name) {
		return
	}
	c.addRef(name, r)
	c.keys = append(c.keys, secretKey{targetKey: name, sourcePath: name})
}

// kesTemplate reads spec.template: the Secret's type and metadata. Its
// data and stringData are lodash templates, not Go templates.
func kesTemplate(is issues, c *conversion, t map[string]any) {
	const path = "spec.template"
	c.secretTemplate(is, path, t, kesTemplateFields...)
	for _, k := range []string{"data", "stringData"} {
		if _, ok := t[k]; ok {
			is.unsupported(path+"."+k, "KES's lodash templates; rewrite them as Go templates in keymount.io/template.<key> annotations of the SecretSync")
		}
	}
}
