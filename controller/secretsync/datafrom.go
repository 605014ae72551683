package secretsync

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// AnnotationDataFrom on a SecretSync lists, comma-separated, directories
// of the provider's answer (the AWS provider's extract and find objects
// answer with one): every file directly under each becomes a key of the
// Secret named by the file's name, so a field or secret that appears in
// the store later arrives with the next refresh and one that disappears
// is removed. Each directory D needs the marker entry
// {sourcePath: D, targetKey: D} in spec.secretObject.data (the CRD wants at
// least one entry, and such a Secret may have no fixed key); the marker
// writes no key D.
const AnnotationDataFrom = "keymount.io/data-from"

// errDataFrom marks an invalid keymount.io/data-from configuration: the
// sync fails before the provider is called.
var errDataFrom = errors.New("invalid " + AnnotationDataFrom)

// dataFromDirs returns the directories of the SecretSync's
// keymount.io/data-from annotation, in its order, each once; none without the
// annotation. It checks that each is a valid Secret key with its marker
// entry in spec.secretObject.data, and that no other entry reads it.
func dataFromDirs(ss *ss1.SecretSync) ([]string, error) {
	v, ok := ss.Annotations[AnnotationDataFrom]
	if !ok {
		return nil, nil
	}
	var dirs []string
	for d := range strings.SplitSeq(v, ",") {
		if d = strings.TrimSpace(d); d == "" || slices.Contains(dirs, d) {
			continue
		}
		if msgs := validation.IsConfigMapKey(d); len(msgs) > 0 {
			return nil, fmt.Errorf("%w: annotation %s: %q is not a usable directory name (%s): list top-level directories of the provider's answer (object aliases), comma-separated",
				errDataFrom, AnnotationDataFrom, d, strings.Join(msgs, "; "))
		}
		dirs = append(dirs, d)
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: annotation %s lists no directory: list the directories of the provider's answer, comma-separated, or remove it",
			errDataFrom, AnnotationDataFrom)
	}
	for _, d := range dirs {
		if err := checkMarker(ss, d); err != nil {
			return nil, err
		}
	}
	return dirs, nil
}

// checkMarker checks that spec.secretObject.data reads directory d by its
// marker entry only.
func checkMarker(ss *ss1.SecretSync, d string) error {
	found := false
	for i, e := range ss.Spec.SecretObject.Data {
		if path.Clean(e.SourcePath) != d {
			continue
		}
		if e.TargetKey != d {
			return fmt.Errorf("%w: spec.secretObject.data[%d] has sourcePath %q, a directory annotation %s lists, but targetKey %q: set its targetKey to %q "+
				"(the marker entry, which writes no key: the directory's files become the keys)", errDataFrom, i, e.SourcePath, AnnotationDataFrom, e.TargetKey, d)
		}
		found = true
	}
	if !found {
		return fmt.Errorf("%w: annotation %s lists %q, but spec.secretObject.data has no entry with sourcePath %q: add {sourcePath: %s, targetKey: %s} "+
			"(the marker entry, which writes no key: the directory's files become the keys)", errDataFrom, AnnotationDataFrom, d, d, d, d)
	}
	return nil
}

// isMarker reports whether e is the marker entry of one of dirs.
func isMarker(e ss1.SecretObjectData, dirs []string) bool {
	return e.TargetKey == path.Clean(e.SourcePath) && slices.Contains(dirs, e.TargetKey)
}

// expandDirs adds to data a key for every file directly under one of dirs,
// named by the file's name below it, with External Secrets' precedence
// (dataFrom entries in order, each overriding the ones before, then
// spec.data overriding them all): a key of spec.data (explicit, named in
// sources) keeps its value, and a directory's key replaces the same key of
// a directory listed before it. Its errors name files and keys, never
// contents.
func expandDirs(typ corev1.SecretType, value valuer, dirs []string, byPath map[string][]byte, data map[string][]byte, explicit map[string]string) error {
	if len(dirs) == 0 {
		return nil
	}
	paths := slices.Sorted(maps.Keys(byPath))
	for _, dir := range dirs {
		for _, p := range paths {
			name, ok := strings.CutPrefix(p, dir+"/")
			if !ok {
				continue
			}
			if strings.Contains(name, "/") {
				return fmt.Errorf("file %q is more than one level below directory %q of annotation %s: only the files directly under it become keys",
					p, dir, AnnotationDataFrom)
			}
			if msgs := validation.IsConfigMapKey(name); len(msgs) > 0 {
				return fmt.Errorf("file %q of directory %q (annotation %s): %q is not a valid Secret key: %s", p, dir, AnnotationDataFrom, name, strings.Join(msgs, "; "))
			}
			if _, ok := explicit[name]; ok {
				continue // spec.data's key wins, as ESO's data wins over dataFrom
			}
			b, err := value(name, byPath[p])
			if err != nil {
				return fmt.Errorf("file %q of directory %q (annotation %s) for key %q of a %s Secret: %w", p, dir, AnnotationDataFrom, name, typ, err)
			}
			data[name] = b
		}
	}
	return nil
}

// foreignKeysMark records in a cached Secret (an annotation no real one
// can carry: its key holds a ':') the data keys that another field manager
// wrote and FieldManager does not own, comma-separated (a Secret key holds
// no ','). Only Secrets with such keys carry it.
const foreignKeysMark = "keymount:foreign-keys"

// markForeignKeys sets foreignKeysMark on s from its managedFields; it does
// nothing to a Secret without managedFields (a trimmed one: the mark is
// set already) or without data.
func markForeignKeys(s *corev1.Secret) {
	if len(s.ManagedFields) == 0 || len(s.Data) == 0 {
		return
	}
	// The common case, a Secret only the controller wrote, costs no
	// decoding: every key is its own.
	if !slices.ContainsFunc(s.ManagedFields, func(m metav1.ManagedFieldsEntry) bool { return m.Manager != FieldManager }) {
		return
	}
	ours := map[string]bool{}
	for _, m := range s.ManagedFields {
		if m.Manager != FieldManager {
			continue
		}
		var fields struct {
			Data map[string]json.RawMessage `json:"f:data"`
		}
		if err := json.NewDecoder(m.FieldsV1.GetRawReader()).Decode(&fields); err != nil {
			return // unknown: every key counts as the controller's
		}
		for k := range fields.Data {
			if name, ok := strings.CutPrefix(k, "f:"); ok {
				ours[name] = true
			}
		}
	}
	var foreign []string
	for k := range s.Data {
		if !ours[k] {
			foreign = append(foreign, k)
		}
	}
	if len(foreign) == 0 {
		return
	}
	slices.Sort(foreign)
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[foreignKeysMark] = strings.Join(foreign, ",")
}

// ownedData is the data of a cached Secret the controller wrote: every
// key but those foreignKeysMark names.
func ownedData(s *corev1.Secret) map[string][]byte {
	foreign := strings.Split(s.Annotations[foreignKeysMark], ",")
	out := make(map[string][]byte, len(s.Data))
	for k, v := range s.Data {
		if !slices.Contains(foreign, k) {
			out[k] = v
		}
	}
	return out
}
