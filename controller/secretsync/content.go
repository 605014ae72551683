package secretsync

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	secretsyncv1alpha1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/synchash"
	"github.com/keymount/keymount/internal/template"
	"github.com/keymount/keymount/internal/tlsbundle"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// content is what the Secret of a SecretSync holds: everything the
// controller writes but its owner reference.
type content struct {
	typ         corev1.SecretType
	data        map[string][]byte
	labels      map[string]string
	annotations map[string]string
}

// digestPrefix starts every data value of a Secret in the controller's
// cache: the cache holds a SHA-256 digest of each value, not the value
// (trimSecret), so that 10,000 synced Secrets cost their metadata only. A
// digest is compared with digests only.
var digestPrefix = []byte("\x00keymount-sha256:")

// digest is the cached form of a Secret data value.
func digest(v []byte) []byte {
	if isDigest(v) {
		return v
	}
	sum := sha256.Sum256(v)
	return append(bytes.Clone(digestPrefix), sum[:]...)
}

func isDigest(v []byte) bool {
	return len(v) == len(digestPrefix)+sha256.Size && bytes.HasPrefix(v, digestPrefix)
}

// digested is c with every data value replaced by its digest: the form to
// compare with a cached Secret's content and to hash into syncHash.
func (c *content) digested() *content {
	d := *c
	d.data = make(map[string][]byte, len(c.data))
	for k, v := range c.data {
		d.data[k] = digest(v)
	}
	return &d
}

// trimSecret is the cache's transform of Secrets: no managedFields (the
// data keys only another field manager owns are named by foreignKeysMark
// first), and every data value replaced by its digest. Idempotent (the informer may
// hand it an object it already trimmed). A Secret from the cache must
// never be written back: the controller writes Secrets by server-side
// apply of the content it builds.
func trimSecret(obj any) (any, error) {
	return secretTransform(nil)(obj)
}

// secretTransform is trimSecret, calling annotate first on a Secret not
// trimmed yet (one whose data values are not all digests).
func secretTransform(annotate func(*corev1.Secret)) func(any) (any, error) {
	return func(obj any) (any, error) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return obj, nil
		}
		if annotate != nil && !trimmed(s) {
			annotate(s)
		}
		markForeignKeys(s)
		digestSecret(s)
		internSecret(s)
		return s, nil
	}
}

// trimmed reports whether s went through trimSecret: it has data, all
// digests. (A Secret without data is the same trimmed or not.)
func trimmed(s *corev1.Secret) bool {
	for _, v := range s.Data {
		if !isDigest(v) {
			return false
		}
	}
	return len(s.Data) > 0
}

func digestSecret(s *corev1.Secret) {
	s.ManagedFields = nil
	for k, v := range s.Data {
		s.Data[k] = digest(v)
	}
}

// secretType is spec.secretObject.type; Opaque when empty (the CRD requires
// it, so only a fake API server leaves it out).
func secretType(ss *secretsyncv1alpha1.SecretSync) corev1.SecretType {
	if t := strings.TrimSpace(ss.Spec.SecretObject.Type); t != "" {
		return corev1.SecretType(t)
	}
	return corev1.SecretTypeOpaque
}

// errMissingObject: a sourcePath the provider did not return.
var errMissingObject = errors.New("the provider returned no file of that path")

// desiredContent builds the Secret's content from the provider's files. Its
// errors name sourcePaths, targetKeys and file names, never contents.
func desiredContent(ss *secretsyncv1alpha1.SecretSync, files []*v1alpha1.File) (*content, error) {
	byPath := make(map[string][]byte, len(files))
	for _, f := range files {
		byPath[path.Clean(f.GetPath())] = f.GetContents()
	}
	dirs, err := dataFromDirs(ss)
	if err != nil {
		return nil, err
	}
	c := &content{
		typ:  secretType(ss),
		data: make(map[string][]byte, len(ss.Spec.SecretObject.Data)),
	}
	value, err := valuerOf(ss, c.typ)
	if err != nil {
		return nil, err
	}
	sources := make(map[string]string, len(ss.Spec.SecretObject.Data))
	for _, d := range ss.Spec.SecretObject.Data {
		if isMarker(d, dirs) {
			continue // the directory's files are expanded below
		}
		b, ok := byPath[path.Clean(d.SourcePath)]
		if !ok {
			return nil, fmt.Errorf("sourcePath %q (targetKey %q): %w (%s)", d.SourcePath, d.TargetKey, errMissingObject, describe(byPath))
		}
		b, err = value(d.TargetKey, b)
		if err != nil {
			return nil, fmt.Errorf("sourcePath %q for targetKey %q of a %s Secret: %w", d.SourcePath, d.TargetKey, corev1.SecretTypeTLS, err)
		}
		c.data[d.TargetKey] = b
		sources[d.TargetKey] = fmt.Sprintf("spec.secretObject.data sourcePath %q", d.SourcePath)
	}
	if err := expandDirs(c.typ, value, dirs, byPath, c.data, sources); err != nil {
		return nil, err
	}
	if err := renderTemplates(ss, byPath, c.data); err != nil {
		return nil, err
	}
	m := metaContent(ss)
	c.labels, c.annotations = m.labels, m.annotations
	return c, nil
}

// metaContent is the content's labels and annotations: spec.secretObject's,
// and the label secrets-store.sync.x-k8s.io: "".
func metaContent(ss *secretsyncv1alpha1.SecretSync) *content {
	c := &content{labels: map[string]string{}, annotations: map[string]string{}}
	maps.Copy(c.labels, ss.Spec.SecretObject.Labels)
	c.labels[secretsyncv1alpha1.LabelSecretSync] = ""
	maps.Copy(c.annotations, ss.Spec.SecretObject.Annotations)
	return c
}

// secretValue is the value of key in a Secret of type typ made from the
// file content b: a kubernetes.io/tls Secret's tls.crt and tls.key are
// split from a PEM bundle or a PKCS#12 archive, as the driver's
// secretObjects split them.
func secretValue(typ corev1.SecretType, key string, b []byte) ([]byte, error) {
	if typ == corev1.SecretTypeTLS && (key == corev1.TLSCertKey || key == corev1.TLSPrivateKeyKey) {
		return tlsbundle.Part(b, key)
	}
	return b, nil
}

// AnnotationTLSSplit "false" on a SecretSync of type kubernetes.io/tls
// writes tls.crt and tls.key as the provider returns them, byte for byte,
// as External Secrets and KES do (keymount convert sets it), instead of
// split from a PEM bundle or a PKCS#12 archive, the sync controller's and
// the driver's way and the default ("true").
const AnnotationTLSSplit = "keymount.io/tls-split"

// valuer turns the provider's value for a Secret key into the key's value.
type valuer func(key string, b []byte) ([]byte, error)

// valuerOf is secretValue for ss: a key a template writes keeps its source
// value (the template replaces it; the source is often a placeholder), and
// AnnotationTLSSplit "false" turns the TLS split off.
func valuerOf(ss *secretsyncv1alpha1.SecretSync, typ corev1.SecretType) (valuer, error) {
	split := true
	if v, ok := ss.Annotations[AnnotationTLSSplit]; ok {
		switch strings.TrimSpace(v) {
		case "true":
		case "false":
			split = false
		default:
			return nil, fmt.Errorf("annotation %s is %q: set it to true (the default: split a PEM bundle or PKCS#12 archive into tls.crt and tls.key) or false (write both as returned)", AnnotationTLSSplit, v)
		}
	}
	if !split || typ != corev1.SecretTypeTLS {
		return func(_ string, b []byte) ([]byte, error) { return b, nil }, nil
	}
	templated := templateTargets(ss)
	return func(key string, b []byte) ([]byte, error) {
		if slices.Contains(templated, key) {
			return b, nil
		}
		return secretValue(typ, key, b)
	}, nil
}

// errTemplate marks a template annotation that is invalid or does not
// render: the sync fails with ReasonTemplateError.
var errTemplate = errors.New("template")

// renderTemplates renders the SecretSync's keymount.io/template.<targetKey>
// annotations from every file the provider returned, into data (a template
// overrides spec data of the same key). Its errors name the annotation,
// the line and the missing key, never a value.
func renderTemplates(ss *secretsyncv1alpha1.SecretSync, byPath map[string][]byte, data map[string][]byte) error {
	tmpls, err := template.FromAnnotations(ss.Annotations)
	if err != nil {
		return fmt.Errorf("%w: %w", errTemplate, err)
	}
	out, err := template.RenderAll(tmpls, byPath)
	if err != nil {
		return fmt.Errorf("%w: %w (%s)", errTemplate, err, describe(byPath))
	}
	maps.Copy(data, out)
	return nil
}

// templateTargets are the data keys the SecretSync's template annotations
// write, and templateTexts the annotations themselves.
func templateTargets(ss *secretsyncv1alpha1.SecretSync) []string {
	var out []string
	for k := range ss.Annotations {
		if t, ok := strings.CutPrefix(k, template.AnnotationPrefix); ok {
			out = append(out, t)
		}
	}
	return out
}

func templateTexts(ss *secretsyncv1alpha1.SecretSync) map[string]string {
	var out map[string]string
	for k, v := range ss.Annotations {
		if strings.HasPrefix(k, template.AnnotationPrefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// describe lists the returned file names for a message, at most 20.
func describe(byPath map[string][]byte) string {
	if len(byPath) == 0 {
		return "the provider returned no files"
	}
	names := slices.Sorted(maps.Keys(byPath))
	more := ""
	if len(names) > 20 {
		more = fmt.Sprintf(" and %d more", len(names)-20)
		names = names[:20]
	}
	return "files returned: " + strings.Join(names, ", ") + more
}

// currentContent is the part of an existing Secret that spec.secretObject
// describes: its type, the target keys, the labels and annotations the
// spec names, and the keys its template annotations write (others' keys
// are not the controller's business); with keymount.io/data-from, every key
// the controller wrote (ownedData: the directories' keys are whatever the
// last answer held). A key the Secret lacks is left out, so the hash
// differs. s is trimmed (trimSecret): its data values, and so
// the content's, are digests.
func currentContent(ss *secretsyncv1alpha1.SecretSync, s *corev1.Secret) *content {
	c := &content{typ: s.Type, data: map[string][]byte{}, labels: map[string]string{}, annotations: map[string]string{}}
	dirs, _ := dataFromDirs(ss) // an invalid annotation fails the sync whatever the hash
	if len(dirs) > 0 {
		maps.Copy(c.data, ownedData(s))
	}
	for _, d := range ss.Spec.SecretObject.Data {
		if isMarker(d, dirs) {
			continue
		}
		if b, ok := s.Data[d.TargetKey]; ok {
			c.data[d.TargetKey] = b
		}
	}
	for _, k := range templateTargets(ss) {
		if b, ok := s.Data[k]; ok {
			c.data[k] = b
		}
	}
	pick := func(dst, src, want map[string]string) {
		for k := range want {
			if v, ok := src[k]; ok {
				dst[k] = v
			}
		}
	}
	pick(c.labels, s.Labels, ss.Spec.SecretObject.Labels)
	if v, ok := s.Labels[secretsyncv1alpha1.LabelSecretSync]; ok {
		c.labels[secretsyncv1alpha1.LabelSecretSync] = v
	}
	pick(c.annotations, s.Annotations, ss.Spec.SecretObject.Annotations)
	return c
}

// equal reports whether c and o hold the same content.
func (c *content) equal(o *content) bool {
	return c.typ == o.typ && maps.EqualFunc(c.data, o.data, func(a, b []byte) bool { return string(a) == string(b) }) &&
		maps.Equal(c.labels, o.labels) && maps.Equal(c.annotations, o.annotations)
}

// changedKeys names the data keys added, changed and removed from old to c.
func (c *content) changedKeys(old *content) (added, changed, removed []string) {
	for k, v := range c.data {
		ov, ok := old.data[k]
		switch {
		case !ok:
			added = append(added, k)
		case string(ov) != string(v):
			changed = append(changed, k)
		}
	}
	for k := range old.data {
		if _, ok := c.data[k]; !ok {
			removed = append(removed, k)
		}
	}
	slices.Sort(added)
	slices.Sort(changed)
	slices.Sort(removed)
	return added, changed, removed
}

// hashContent is what status.syncHash covers: the content, the SecretSync's
// UID, generation and forceSynchronization, the class's UID and generation.
func hashContent(ss *secretsyncv1alpha1.SecretSync, class *secretsstorev1.SecretProviderClass, c *content) *synchash.Content {
	return &synchash.Content{
		Type: string(c.typ), Data: c.data, Labels: c.labels, Annotations: c.annotations,
		ClassUID: string(class.UID), ClassGeneration: class.Generation,
		SyncUID: string(ss.UID), SyncGeneration: ss.Generation,
		ForceSynchronization: ss.Spec.ForceSynchronization,
		Templates:            hashedAnnotations(ss),
	}
}

// hashedAnnotations are the annotations of the SecretSync that syncHash
// covers: its templates and its non-default Secret policies (an invalid
// policy fails the sync whatever the hash).
func hashedAnnotations(ss *secretsyncv1alpha1.SecretSync) map[string]string {
	out := templateTexts(ss)
	p, _ := policiesOf(ss)
	for k, v := range p.hashed() {
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}
