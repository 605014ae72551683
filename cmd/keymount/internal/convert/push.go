package convert

import (
	"strings"

	"github.com/keymount/keymount/provider/aws/spec"
)

// esoV1alpha1 is the apiVersion of External Secrets' PushSecret.
const esoV1alpha1 = esoGroup + "/v1alpha1"

// Fields of an ESO PushSecret that keymount convert reads.
var (
	pushSpecFields  = []string{"secretStoreRefs", "selector", "data", "updatePolicy", "deletionPolicy", "refreshInterval", "template"}
	pushRefFields   = []string{"name", "kind", "labelSelector"}
	pushDataFields  = []string{"match", "metadata", "conversionStrategy"}
	pushMatchFields = []string{"secretKey", "remoteRef"}
)

// pushSecret is the keymount.io/v1alpha1 PushSecret of one store of an ESO
// PushSecret; the conversion holding it has its class and identity.
type pushSecret struct {
	secretName                                    string
	refreshInterval, updatePolicy, deletionPolicy string
	labels, annotations                           map[string]string
	data                                          []pushData
}

// pushData is one value to push: a key of the Secret (every key, as JSON,
// when empty) to a remote key of the store.
type pushData struct {
	secretKey, remoteKey, property string
	objectType                     spec.ObjectType
}

// convertPush converts an external-secrets.io/v1alpha1 PushSecret: one
// keymount PushSecret and SecretProviderClass per store it names, named
// after the PushSecret, or <name>-<store> when it names several.
func (cv *converter) convertPush(d *document) []*conversion {
	meta := field(d.fields, "metadata")
	ns, name := str(cv.noIssues(), "", meta, "namespace"), str(cv.noIssues(), "", meta, "name")
	is := cv.issuesFor("PushSecret " + objectName(ns, name))
	s := field(d.fields, "spec")
	unknownFields(is, "spec", s, pushSpecFields...)
	common := pushCommon(is, s)
	common.labels = strMap(is, "metadata", meta, "labels")
	common.annotations = strMap(is, "metadata", meta, "annotations")
	if _, ok := common.annotations[lastApplied]; ok {
		delete(common.annotations, lastApplied)
		is.note("metadata.annotations", "%s is kubectl's record of the ESO PushSecret; it is left out", lastApplied)
	}
	refs := items(s, "secretStoreRefs")
	if len(refs) == 0 {
		is.invalid("spec.secretStoreRefs", "is required: name the SecretStore or ClusterSecretStore to push to")
		return nil
	}
	var out []*conversion
	for i, ref := range refs {
		if c := cv.pushToStore(is, index("spec.secretStoreRefs", i), ns, name, ref, len(refs) > 1, s, *common); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// pushCommon reads what every store's PushSecret shares: the Secret, the
// policies, the interval; it refuses a generator and a template.
func pushCommon(is issues, s map[string]any) *pushSecret {
	p := &pushSecret{}
	sel := field(s, "selector")
	unknownFields(is, "spec.selector", sel, "secret", "generatorRef")
	_, generator := sel["generatorRef"]
	if generator {
		is.unsupported("spec.selector.generatorRef", "a generator's value: keymount pushes the values of a Secret; generate it into a Secret first and push that Secret")
	}
	sec := field(sel, "secret")
	unknownFields(is, "spec.selector.secret", sec, "name")
	p.secretName = str(is, "spec.selector.secret", sec, "name")
	if p.secretName == "" && !generator {
		is.invalid("spec.selector.secret.name", "is required")
	}
	switch u := str(is, "spec", s, "updatePolicy"); u {
	case "", "Replace", "IfNotExists":
		p.updatePolicy = u
	default:
		is.invalid("spec.updatePolicy", "%q is not Replace or IfNotExists", u)
	}
	switch d := str(is, "spec", s, "deletionPolicy"); d {
	case "", "None", "Delete":
		p.deletionPolicy = d
	default:
		is.invalid("spec.deletionPolicy", "%q is not Delete or None", d)
	}
	if v := str(is, "spec", s, "refreshInterval"); v != "" {
		if _, err := isZeroDuration(v); err != nil {
			is.invalid("spec.refreshInterval", "%q is not a duration like \"1h\" or \"15m\": %v", v, err)
		} else {
			p.refreshInterval = v
		}
	}
	if _, ok := s["template"]; ok {
		is.unsupported("spec.template", "a template of the pushed values: keymount pushes the Secret's values as they are; template them into a Secret first (a SecretSync's keymount.io/template.<key>) and push that Secret")
	}
	return p
}

// pushToStore converts the PushSecret's push to the store ref names (at
// path): the class of the store, the identity, the data.
func (cv *converter) pushToStore(is issues, path, ns, name string, ref map[string]any, several bool, s map[string]any, p pushSecret) *conversion {
	unknownFields(is, path, ref, pushRefFields...)
	if _, ok := ref["labelSelector"]; ok {
		is.unsupported(path+".labelSelector", "stores chosen by their labels: a keymount PushSecret pushes through one SecretProviderClass; name each store (secretStoreRefs[].name)")
		return nil
	}
	switch kind := str(is, path, ref, "kind"); kind {
	case "", "SecretStore", "ClusterSecretStore":
	default:
		is.unsupported(path+".kind", "%q: keymount convert reads SecretStore and ClusterSecretStore", kind)
		return nil
	}
	st := cv.esoStore(is, path, ns, ref, false)
	if st == nil {
		return nil
	}
	if several {
		name += "-" + st.name
	}
	c := &conversion{source: is.object, namespace: ns, className: name, syncName: name, provider: "aws", region: st.region}
	if st.vault != nil {
		c.provider, c.vaultParams = "vault", st.vault.params
	}
	cv.identity(c, st)
	for i, e := range items(s, "data") {
		c.pushData(is, &p, st, index("spec.data", i), e)
	}
	c.push = &p
	return c
}

// pushData converts one spec.data entry for the store st: the remote key
// as the provider names it, and an object of the class that reads it back.
func (c *conversion) pushData(is issues, p *pushSecret, st *esoStoreInfo, path string, e map[string]any) {
	unknownFields(is, path, e, pushDataFields...)
	if _, ok := e["metadata"]; ok {
		is.unsupported(path+".metadata", "the provider's options for the pushed value (AWS tags, KMS key, description, resource policy; Vault custom metadata): keymount pushes the value alone")
		return
	}
	if cs := str(is, path, e, "conversionStrategy"); cs != "" && cs != "None" {
		is.unsupported(path+".conversionStrategy", "%q: keymount pushes the Secret's bytes as they are", cs)
		return
	}
	m := field(e, "match")
	mpath := path + ".match"
	unknownFields(is, mpath, m, pushMatchFields...)
	ref := field(m, "remoteRef")
	rpath := mpath + ".remoteRef"
	unknownFields(is, rpath, ref, "remoteKey", "property")
	d := pushData{secretKey: str(is, mpath, m, "secretKey"), property: str(is, rpath, ref, "property")}
	remote := str(is, rpath, ref, "remoteKey")
	if remote == "" {
		is.invalid(rpath+".remoteKey", "is required")
		return
	}
	if st.vault != nil {
		d.remoteKey = st.vault.secretPath(remote, "")
		c.addVaultPushObject(d)
	} else {
		d.remoteKey, d.objectType = st.prefix+remote, st.service
		c.addPushObject(d)
	}
	p.data = append(p.data, d)
}

// addPushObject lists the pushed AWS value in the class (once): the
// provider parses a class's objects, and the class then reads back what
// keymount pushed.
func (c *conversion) addPushObject(d pushData) {
	for _, o := range c.objects {
		if o.Name == d.remoteKey && o.Type == d.objectType {
			return
		}
	}
	c.objects = append(c.objects, &awsObject{Name: d.remoteKey, Type: d.objectType, Alias: pushFileName(d.remoteKey, "")})
}

// addVaultPushObject lists the pushed Vault value in the class (once): a
// field (secretKey) for a property, every field (extract) for the whole
// secret.
func (c *conversion) addVaultPushObject(d pushData) {
	for _, o := range c.vaultObjects {
		if o.Path == d.remoteKey && o.SecretKey == d.property {
			return
		}
	}
	o := &vaultObject{Name: pushFileName(d.remoteKey, d.property), Path: d.remoteKey, SecretKey: d.property}
	if d.property == "" {
		o.Extract = &awsExtract{}
	}
	c.vaultObjects = append(c.vaultObjects, o)
}

// pushFileName is the class's file of a pushed value: the remote key with
// '/' as '_', and the property after a '.'.
func pushFileName(remoteKey, property string) string {
	f := strings.ReplaceAll(strings.Trim(remoteKey, "/"), "/", "_")
	if property != "" {
		f += "." + property
	}
	return f
}

// finishPush checks what every converted PushSecret needs.
func (cv *converter) finishPush(c *conversion) {
	is := cv.issuesFor(c.source)
	c.writable = c.serviceAccount != "" && c.push.secretName != "" && len(c.push.data) > 0
	checkIdentity(is, c, "PushSecret")
	if len(c.push.data) == 0 {
		is.unsupported("spec.data", "no value could be converted; the PushSecret needs at least one")
	}
	checkClass(is, c)
}

// pushAPIVersion is the apiVersion of keymount's PushSecret
// (apis/push/v1alpha1).
const pushAPIVersion = "keymount.io/v1alpha1"

type outPush struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Metadata   outMeta     `yaml:"metadata"`
	Spec       outPushSpec `yaml:"spec"`
}

type outPushSpec struct {
	SecretProviderClassName string          `yaml:"secretProviderClassName"`
	ServiceAccountName      string          `yaml:"serviceAccountName"`
	RefreshInterval         string          `yaml:"refreshInterval,omitempty"`
	UpdatePolicy            string          `yaml:"updatePolicy,omitempty"`
	DeletionPolicy          string          `yaml:"deletionPolicy,omitempty"`
	Selector                outPushSelector `yaml:"selector"`
	Data                    []outPushData   `yaml:"data"`
}

type outPushSelector struct {
	Secret struct {
		Name string `yaml:"name"`
	} `yaml:"secret"`
}

type outPushData struct {
	Match struct {
		SecretKey string `yaml:"secretKey,omitempty"`
		RemoteRef struct {
			RemoteKey string `yaml:"remoteKey"`
			Property  string `yaml:"property,omitempty"`
		} `yaml:"remoteRef"`
	} `yaml:"match"`
	ObjectType string `yaml:"objectType,omitempty"`
}

// pushObject is the keymount PushSecret of c.
func (c *conversion) pushObject() *outPush {
	p := c.push
	o := &outPush{APIVersion: pushAPIVersion, Kind: "PushSecret",
		Metadata: outMeta{Name: c.syncName, Namespace: c.namespace, Labels: p.labels, Annotations: p.annotations},
		Spec: outPushSpec{SecretProviderClassName: c.className, ServiceAccountName: c.serviceAccount,
			RefreshInterval: p.refreshInterval, UpdatePolicy: p.updatePolicy, DeletionPolicy: p.deletionPolicy}}
	o.Spec.Selector.Secret.Name = p.secretName
	for _, d := range p.data {
		var od outPushData
		od.Match.SecretKey, od.Match.RemoteRef.RemoteKey, od.Match.RemoteRef.Property = d.secretKey, d.remoteKey, d.property
		od.ObjectType = string(d.objectType)
		o.Spec.Data = append(o.Spec.Data, od)
	}
	return o
}
