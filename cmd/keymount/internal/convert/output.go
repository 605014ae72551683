package convert

import (
	"bytes"
	"cmp"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/keymount/keymount/provider/aws/spec"
)

// API versions written.
const (
	classAPIVersion = "secrets-store.csi.x-k8s.io/v1"
	syncAPIVersion  = "secret-sync.x-k8s.io/v1alpha1"
	// defaultFileMode is the file mode the parameters are checked with.
	defaultFileMode = 0o644
)

type outMeta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// outNamespace is the cluster namespace, written with the first
// ClusterExternalSecret's objects.
type outNamespace struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   outMeta `yaml:"metadata"`
}

type outClass struct {
	APIVersion string       `yaml:"apiVersion"`
	Kind       string       `yaml:"kind"`
	Metadata   outMeta      `yaml:"metadata"`
	Spec       outClassSpec `yaml:"spec"`
}

type outClassSpec struct {
	Provider   string            `yaml:"provider"`
	Parameters map[string]string `yaml:"parameters"`
}

type outSync struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Metadata   outMeta     `yaml:"metadata"`
	Spec       outSyncSpec `yaml:"spec"`
}

type outSyncSpec struct {
	SecretProviderClassName string          `yaml:"secretProviderClassName"`
	ServiceAccountName      string          `yaml:"serviceAccountName"`
	SecretObject            outSecretObject `yaml:"secretObject"`
}

type outSecretObject struct {
	Type        string            `yaml:"type"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
	Data        []outData         `yaml:"data"`
}

type outData struct {
	SourcePath string `yaml:"sourcePath"`
	TargetKey  string `yaml:"targetKey"`
}

// parameters are the class's spec.parameters.
func (c *conversion) parameters() (map[string]string, error) {
	if c.provider == "vault" {
		p, err := c.vaultParameters()
		if err != nil {
			return nil, fmt.Errorf("%s: objects: %w", c.source, err)
		}
		return p, nil
	}
	objects, err := yaml.Marshal(c.objects)
	if err != nil {
		return nil, fmt.Errorf("%s: objects: %w", c.source, err)
	}
	p := map[string]string{spec.KeyObjects: string(objects)}
	if c.region != "" {
		p[spec.KeyRegion] = c.region
	}
	if c.podIdentity {
		p[spec.KeyUsePodIdentity] = "true"
	}
	return p, nil
}

// checkClass parses the class's parameters as keymount's AWS provider does,
// so that the output is refused here rather than at the first sync.
func checkClass(is issues, c *conversion) {
	if len(c.objects) == 0 || c.provider == "vault" {
		return
	}
	p, err := c.parameters()
	if err == nil {
		_, err = spec.Parse(p, defaultFileMode)
	}
	if err != nil {
		is.invalid("", "keymount's AWS provider would refuse the converted SecretProviderClass: %v", err)
	}
}

func (c *conversion) class() (*outClass, error) {
	p, err := c.parameters()
	if err != nil {
		return nil, err
	}
	return &outClass{
		APIVersion: classAPIVersion, Kind: "SecretProviderClass",
		Metadata: outMeta{Name: c.className, Namespace: c.namespace},
		Spec:     outClassSpec{Provider: cmp.Or(c.provider, "aws"), Parameters: p},
	}, nil
}

func (c *conversion) sync() *outSync {
	typ := c.secretType
	if typ == "" {
		typ = "Opaque"
	}
	data := make([]outData, 0, len(c.keys))
	for _, k := range c.keys {
		data = append(data, outData{SourcePath: k.sourcePath, TargetKey: k.targetKey})
	}
	return &outSync{
		APIVersion: syncAPIVersion, Kind: "SecretSync",
		Metadata: outMeta{Name: c.syncName, Namespace: c.namespace, Labels: c.syncLabels, Annotations: c.syncAnnotations},
		Spec: outSyncSpec{
			SecretProviderClassName: c.className, ServiceAccountName: c.serviceAccount,
			SecretObject: outSecretObject{Type: typ, Labels: c.labels, Annotations: c.annotations, Data: data},
		},
	}
}

// Write writes the SecretProviderClass and the SecretSync of every
// converted ExternalSecret (the SecretProviderClass and the keymount
// PushSecret of every store of a PushSecret), in input order, as YAML
// documents; before
// them, once each, the Namespace of ClusterExternalSecrets' SecretSyncs
// and the ServiceAccounts convert writes.
func (r *Result) Write(w io.Writer) error {
	var buf bytes.Buffer
	written := map[string]bool{}
	for _, c := range r.conversions {
		if !c.writable {
			continue
		}
		class, err := c.class()
		if err != nil {
			return err
		}
		var objs []any
		if c.cluster && !written["Namespace "+c.namespace] {
			written["Namespace "+c.namespace] = true
			objs = append(objs, &outNamespace{APIVersion: "v1", Kind: "Namespace", Metadata: outMeta{Name: c.namespace}})
		}
		if sa := c.newServiceAccount; sa != nil && !written["ServiceAccount "+sa.key()] {
			written["ServiceAccount "+sa.key()] = true
			objs = append(objs, sa.object())
		}
		var last any = c.sync()
		if c.push != nil {
			last = c.pushObject()
		}
		for _, obj := range append(objs, class, last) {
			fmt.Fprintf(&buf, "---\n# converted by keymount convert from %s\n", c.source)
			enc := yaml.NewEncoder(&buf)
			enc.SetIndent(2)
			if err := enc.Encode(obj); err != nil {
				return fmt.Errorf("%s: %w", c.source, err)
			}
			if err := enc.Close(); err != nil {
				return fmt.Errorf("%s: %w", c.source, err)
			}
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}
