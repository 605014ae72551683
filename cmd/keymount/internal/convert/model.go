package convert

import (
	"cmp"
	"strings"

	"github.com/keymount/keymount/provider/aws/spec"
)

// conversion is what one ExternalSecret becomes: a SecretProviderClass and
// a SecretSync of the same namespace.
type conversion struct {
	// source names the ExternalSecret: "ExternalSecret team-a/db".
	source    string
	namespace string
	// className is the SecretProviderClass's name (the ExternalSecret's),
	// syncName the SecretSync's (the Secret's).
	className, syncName string
	// provider is the class's spec.provider: aws, or vault.
	provider string
	region   string
	objects  []*awsObject
	// vaultObjects and vaultParams are a vault class's objects and other
	// parameters.
	vaultObjects   []*vaultObject
	vaultParams    map[string]string
	serviceAccount string
	// The Secret.
	secretType          string
	labels, annotations map[string]string
	keys                []secretKey
	// dataFrom are the provider directories whose every file is a key
	// (the SecretSync's keymount.io/data-from).
	dataFrom []string
	// syncAnnotations are keymount's annotations on the SecretSync:
	// refresh policy and templates.
	syncAnnotations map[string]string
	// writable is false when no SecretSync can be written, even partially.
	writable bool
	// newServiceAccount is the ServiceAccount the output writes for the
	// SecretSync (identity.go), nil for one that exists; podIdentity: the
	// class reads with EKS Pod Identity.
	newServiceAccount *serviceAccount
	podIdentity       bool
	// cluster: a ClusterExternalSecret's, in the cluster namespace (the
	// output writes the Namespace); syncLabels are the SecretSync's labels.
	cluster    bool
	syncLabels map[string]string
	// push is set for an ESO PushSecret's conversion (push.go): the class
	// and a keymount PushSecret named syncName instead of a SecretSync.
	push *pushSecret
}

// secretKey is one key of the Secret: a provider file, or a template.
type secretKey struct {
	targetKey, sourcePath string
}

// awsObject is one entry of the class's objects parameter.
type awsObject struct {
	Name         string          `yaml:"objectName,omitempty"`
	Type         spec.ObjectType `yaml:"objectType"`
	Alias        string          `yaml:"objectAlias,omitempty"`
	Version      string          `yaml:"objectVersion,omitempty"`
	VersionLabel string          `yaml:"objectVersionLabel,omitempty"`
	JMESPath     []jmesPath      `yaml:"jmesPath,omitempty"`
	// keymount's extensions for External Secrets' dataFrom.
	Extract *awsExtract `yaml:"extract,omitempty"`
	Find    *awsFind    `yaml:"find,omitempty"`
}

type jmesPath struct {
	Path  string `yaml:"path"`
	Alias string `yaml:"objectAlias"`
}

// storeRef says which store value a Secret key reads.
type storeRef struct {
	typ                   spec.ObjectType
	name                  string
	version, versionLabel string
	// jmesPath is "" for the whole value.
	jmesPath string
}

func (o *awsObject) same(r storeRef) bool {
	return o.Type == r.typ && o.Name == r.name && o.Version == r.version && o.VersionLabel == r.versionLabel
}

// addRef makes the store value r a provider file named file (a Secret
// key): the whole value as an object's alias, a JSON field as a jmesPath
// entry of the object. A value read whole twice is two objects (one file
// each); JSON fields of one value share its object.
func (c *conversion) addRef(file string, r storeRef) {
	if r.jmesPath == "" {
		for _, o := range c.objects {
			if o.same(r) && o.Alias == "" {
				o.Alias = file
				return
			}
		}
		c.objects = append(c.objects, &awsObject{Name: r.name, Type: r.typ, Alias: file, Version: r.version, VersionLabel: r.versionLabel})
		return
	}
	for _, o := range c.objects {
		if o.same(r) {
			o.JMESPath = append(o.JMESPath, jmesPath{Path: r.jmesPath, Alias: file})
			return
		}
	}
	o := &awsObject{Name: r.name, Type: r.typ, Version: r.version, VersionLabel: r.versionLabel,
		JMESPath: []jmesPath{{Path: r.jmesPath, Alias: file}}}
	if v := cmp.Or(r.versionLabel, r.version); v != "" {
		// The whole value is a file too: name it apart from the same
		// object's other versions.
		o.Alias = strings.ReplaceAll(strings.TrimLeft(r.name, "/"), "/", "_") + "." + v
	}
	c.objects = append(c.objects, o)
}

// secretTemplate reads the Secret template t at path (of the fields known):
// the Secret's type, labels and annotations.
func (c *conversion) secretTemplate(is issues, path string, t map[string]any, known ...string) {
	unknownFields(is, path, t, known...)
	c.secretType = str(is, path, t, "type")
	md := field(t, "metadata")
	unknownFields(is, path+".metadata", md, "labels", "annotations")
	c.labels = strMap(is, path+".metadata", md, "labels")
	c.annotations = strMap(is, path+".metadata", md, "annotations")
}
