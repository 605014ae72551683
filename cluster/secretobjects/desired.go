package secretobjects

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/keymount/keymount/internal/tlsbundle"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/atomicwrite"
)

// listedNames bounds how many file names a message lists.
const listedNames = 20

// desired is the Secret one secretObject asks for.
type desired struct {
	namespace, name string
	class           string
	typ             corev1.SecretType
	data            map[string][]byte
	labels          map[string]string
	annotations     map[string]string
}

// volumeFiles are the files of a volume by path.
type volumeFiles map[string][]byte

// newVolumeFiles indexes the files atomicwrite.Read returned.
func newVolumeFiles(files []atomicwrite.File) volumeFiles {
	vf := make(volumeFiles, len(files))
	for _, f := range files {
		vf[f.Path] = f.Contents
	}
	return vf
}

// describe lists the file names, never the contents, for a message.
func (vf volumeFiles) describe() string {
	if len(vf) == 0 {
		return "the volume has no files"
	}
	names := slices.Sorted(maps.Keys(vf))
	more := ""
	if len(names) > listedNames {
		more = fmt.Sprintf(" and %d more", len(names)-listedNames)
		names = names[:listedNames]
	}
	return "files in the volume: " + strings.Join(names, ", ") + more
}

// validate checks what a secretObject asks for without looking at files. It
// returns a message naming the problem and the fix, "" when it is valid.
func validate(class string, index int, so *secretsstorev1.SecretObject) string {
	where := fmt.Sprintf("class %q secretObjects[%d]", class, index)
	if so.SecretName == "" {
		return where + " has no secretName"
	}
	if errs := validation.IsDNS1123Subdomain(so.SecretName); len(errs) > 0 {
		return fmt.Sprintf("%s: secretName %q is not a valid Secret name: %s", where, so.SecretName, strings.Join(errs, "; "))
	}
	where = fmt.Sprintf("Secret %q (%s)", so.SecretName, where)
	if len(so.Data) == 0 {
		return where + " lists no data: add data[]{objectName, key}"
	}
	keys := map[string]bool{}
	for i, d := range so.Data {
		switch {
		case d == nil || d.ObjectName == "":
			return fmt.Sprintf("%s: data[%d] has no objectName", where, i)
		case d.Key == "":
			return fmt.Sprintf("%s: data[%d] has no key", where, i)
		}
		if errs := validation.IsConfigMapKey(d.Key); len(errs) > 0 {
			return fmt.Sprintf("%s: data[%d].key %q is not a valid Secret key: %s", where, i, d.Key, strings.Join(errs, "; "))
		}
		keys[d.Key] = true
	}
	if secretType(so) == corev1.SecretTypeTLS && (!keys[corev1.TLSCertKey] || !keys[corev1.TLSPrivateKeyKey]) {
		return fmt.Sprintf("%s: a %s Secret needs the keys %s and %s in data", where, corev1.SecretTypeTLS, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	if msg := validateMeta(so.Labels, true); msg != "" {
		return fmt.Sprintf("%s: labels: %s", where, msg)
	}
	if msg := validateMeta(so.Annotations, false); msg != "" {
		return fmt.Sprintf("%s: annotations: %s", where, msg)
	}
	return ""
}

// validateMeta checks label or annotation keys, and label values.
func validateMeta(m map[string]string, labels bool) string {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Sprintf("key %q: %s", k, strings.Join(errs, "; "))
		}
		if !labels {
			continue
		}
		if errs := validation.IsValidLabelValue(m[k]); len(errs) > 0 {
			return fmt.Sprintf("value of %q: %s", k, strings.Join(errs, "; "))
		}
	}
	return ""
}

// secretType is the type a secretObject asks for; Opaque when it names none,
// as upstream does.
func secretType(so *secretsstorev1.SecretObject) corev1.SecretType {
	if t := strings.TrimSpace(so.Type); t != "" {
		return corev1.SecretType(t)
	}
	return corev1.SecretTypeOpaque
}

// tlsSplit is one object split for a TLS Secret.
type tlsSplit struct {
	pair tlsbundle.Pair
	err  error
}

func (sp tlsSplit) part(key string) ([]byte, error) {
	if sp.err != nil {
		return nil, sp.err
	}
	return sp.pair.Part(key)
}

// desiredSecret builds the Secret a valid secretObject asks for from the
// volume's files. It returns a message naming the problem and the fix, ""
// when every object was found and converted.
func desiredSecret(namespace, class string, so *secretsstorev1.SecretObject, files volumeFiles) (*desired, string) {
	d := &desired{
		namespace:   namespace,
		name:        so.SecretName,
		class:       class,
		typ:         secretType(so),
		data:        make(map[string][]byte, len(so.Data)),
		labels:      map[string]string{},
		annotations: map[string]string{},
	}
	split := map[string]tlsSplit{} // by object: tls.crt and tls.key usually share one
	for _, item := range so.Data {
		name := path.Clean(item.ObjectName)
		content, ok := files[name]
		if !ok {
			return nil, fmt.Sprintf("Secret %q: object %q (key %q) is not mounted; check data[].objectName in class %q (%s)",
				so.SecretName, item.ObjectName, item.Key, class, files.describe())
		}
		if d.typ == corev1.SecretTypeTLS && (item.Key == corev1.TLSCertKey || item.Key == corev1.TLSPrivateKeyKey) {
			sp, done := split[name]
			if !done {
				sp.pair, sp.err = tlsbundle.Split(content)
				split[name] = sp
			}
			var err error
			if content, err = sp.part(item.Key); err != nil {
				return nil, fmt.Sprintf("Secret %q: object %q for key %q: %v", so.SecretName, item.ObjectName, item.Key, err)
			}
		}
		d.data[item.Key] = content
	}
	maps.Copy(d.labels, so.Labels)
	d.labels[ManagedLabel] = "true"
	maps.Copy(d.annotations, so.Annotations)
	d.annotations[ClassAnnotation] = class
	return d, ""
}
