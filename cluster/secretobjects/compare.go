package secretobjects

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// upToDate reports whether cur already holds everything d asks for, and
// nothing keymount applied before and d no longer asks for. Fields of other
// managers are not compared: they are not keymount's to change. Nor is the
// content stamp: it changes only with the content.
func upToDate(d *desired, cur *corev1.Secret) bool {
	if cur.Type != d.typ || !containsData(cur.Data, d.data) ||
		!containsStrings(cur.Labels, d.labels) || !containsStrings(cur.Annotations, d.annotations) {
		return false
	}
	owned := ownedFields(cur.ManagedFields, NodeFieldManager)
	annotations := maps.Clone(d.annotations)
	maps.Copy(annotations, map[string]string{ContentTimeAnnotation: "", ContentNodeAnnotation: ""})
	return !hasExtra(owned.data, d.data) && !hasExtra(owned.labels, d.labels) && !hasExtra(owned.annotations, annotations)
}

// dataChanged lists the keys of want whose value cur does not hold.
func dataChanged(cur *corev1.Secret, want map[string][]byte) []string {
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := cur.Data[k]; !ok || !bytes.Equal(v, want[k]) {
			keys = append(keys, k)
		}
	}
	return keys
}

func containsData(have, want map[string][]byte) bool {
	for k, v := range want {
		if h, ok := have[k]; !ok || !bytes.Equal(h, v) {
			return false
		}
	}
	return true
}

func containsStrings(have, want map[string]string) bool {
	for k, v := range want {
		if h, ok := have[k]; !ok || h != v {
			return false
		}
	}
	return true
}

// hasExtra reports whether owned names a key that want does not have.
func hasExtra[V any](owned []string, want map[string]V) bool {
	for _, k := range owned {
		if _, ok := want[k]; !ok {
			return true
		}
	}
	return false
}

// owned are the data keys, labels and annotations one manager applied.
type owned struct {
	data, labels, annotations []string
}

// ownedFields reads what manager owns through apply from managed fields,
// counting keymount's create entry (isCreation) as NodeFieldManager's: the
// first write to the Secret hands it over (relabel) before it applies.
// Without managed fields it returns nothing, and a key the class stopped
// listing is dropped with the next apply that happens for another reason.
func ownedFields(entries []metav1.ManagedFieldsEntry, manager string) owned {
	var o owned
	for _, e := range entries {
		applied := e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == ""
		created := manager == NodeFieldManager && isCreation(e)
		if (!applied && !created) || e.FieldsV1 == nil {
			continue
		}
		var root map[string]json.RawMessage
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &root) != nil {
			continue
		}
		o.data = append(o.data, fieldKeys(root["f:data"])...)
		var meta map[string]json.RawMessage
		if json.Unmarshal(root["f:metadata"], &meta) == nil {
			o.labels = append(o.labels, fieldKeys(meta["f:labels"])...)
			o.annotations = append(o.annotations, fieldKeys(meta["f:annotations"])...)
		}
	}
	return o
}

// fieldKeys returns the map keys of a FieldsV1 set: the "f:" members.
func fieldKeys(raw json.RawMessage) []string {
	var set map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &set) != nil {
		return nil
	}
	var keys []string
	for k := range set {
		if name, ok := strings.CutPrefix(k, "f:"); ok {
			keys = append(keys, name)
		}
	}
	slices.Sort(keys)
	return keys
}
