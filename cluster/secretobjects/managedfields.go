package secretobjects

import (
	"encoding/json"
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Field paths of managed fields (FieldsV1).
const (
	fieldMetadata        = "f:metadata"
	fieldOwnerReferences = "f:ownerReferences"
	fieldKeyPrefix       = "k:"
)

// fieldSet is a FieldsV1 set: a tree of JSON objects.
type fieldSet map[string]any

func decodeFields(f *metav1.FieldsV1) fieldSet {
	var set fieldSet
	if f == nil || json.Unmarshal(f.GetRawBytes(), &set) != nil {
		return nil
	}
	return set
}

func (set fieldSet) encode() (*metav1.FieldsV1, error) {
	raw, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	f := &metav1.FieldsV1{}
	f.SetRawBytes(raw)
	return f, nil
}

// union adds every path of other to set.
func (set fieldSet) union(other fieldSet) {
	for k, v := range other {
		mine, ok1 := set[k].(map[string]any)
		theirs, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			fieldSet(mine).union(theirs)
			continue
		}
		set[k] = v
	}
}

// splitOwnerReferences returns the ownerReferences part of set and the
// rest, either nil when empty.
func (set fieldSet) splitOwnerReferences() (refs, rest fieldSet) {
	rest = maps.Clone(set)
	meta, _ := set[fieldMetadata].(map[string]any)
	if r, ok := meta[fieldOwnerReferences]; ok {
		refs = fieldSet{fieldMetadata: map[string]any{fieldOwnerReferences: r}}
		meta = maps.Clone(meta)
		delete(meta, fieldOwnerReferences)
		if len(meta) == 0 {
			delete(rest, fieldMetadata)
		} else {
			rest[fieldMetadata] = meta
		}
	}
	if len(rest) == 0 {
		rest = nil
	}
	return refs, rest
}

// appliedOwnerUIDs returns the uids of the owner references manager
// applied, read from managed fields; none when the entries are missing (a
// cache may strip them).
func appliedOwnerUIDs(entries []metav1.ManagedFieldsEntry, manager string) []types.UID {
	var uids []types.UID
	for _, e := range entries {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" {
			continue
		}
		meta, _ := decodeFields(e.FieldsV1)[fieldMetadata].(map[string]any)
		refs, _ := meta[fieldOwnerReferences].(map[string]any)
		for k := range refs {
			var key struct {
				UID types.UID `json:"uid"`
			}
			if s, ok := strings.CutPrefix(k, fieldKeyPrefix); ok && json.Unmarshal([]byte(s), &key) == nil && key.UID != "" {
				uids = append(uids, key.UID)
			}
		}
	}
	return uids
}

// isCreation reports whether e is the entry keymount's create left: an
// update by NodeFieldManager.
func isCreation(e metav1.ManagedFieldsEntry) bool {
	return e.Manager == NodeFieldManager && e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == ""
}

// relabelled returns the managed fields of a Secret keymount created, as if
// it had been written by applies: what the create's entry (isCreation)
// holds goes to NodeFieldManager's apply entry, except the owner references,
// which go to the node's manager's apply entry. Every other entry is kept
// as it is. It returns false when there is no create entry.
func relabelled(entries []metav1.ManagedFieldsEntry, nodeManager string) ([]metav1.ManagedFieldsEntry, bool, error) {
	var refs, rest fieldSet
	var created *metav1.Time
	var out []metav1.ManagedFieldsEntry
	for _, e := range entries {
		if !isCreation(e) {
			out = append(out, e)
			continue
		}
		r, o := decodeFields(e.FieldsV1).splitOwnerReferences()
		refs, rest = unionOf(refs, r), unionOf(rest, o)
		if created == nil {
			created = e.Time
		}
	}
	if created == nil {
		return entries, false, nil
	}
	var err error
	if out, err = mergeApplied(out, NodeFieldManager, rest, created); err != nil {
		return nil, false, err
	}
	if out, err = mergeApplied(out, nodeManager, refs, created); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

func unionOf(a, b fieldSet) fieldSet {
	if b == nil {
		return a
	}
	if a == nil {
		a = fieldSet{}
	}
	a.union(b)
	return a
}

// mergeApplied adds set to manager's apply entry, making one if needed.
func mergeApplied(entries []metav1.ManagedFieldsEntry, manager string, set fieldSet, at *metav1.Time) ([]metav1.ManagedFieldsEntry, error) {
	if set == nil {
		return entries, nil
	}
	for i, e := range entries {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" {
			continue
		}
		merged := decodeFields(e.FieldsV1)
		if merged == nil {
			merged = fieldSet{}
		}
		merged.union(set)
		f, err := merged.encode()
		if err != nil {
			return nil, err
		}
		entries[i].FieldsV1 = f
		return entries, nil
	}
	f, err := set.encode()
	if err != nil {
		return nil, err
	}
	return append(entries, metav1.ManagedFieldsEntry{
		Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
		Time: at, FieldsType: "FieldsV1", FieldsV1: f,
	}), nil
}
