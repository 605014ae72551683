package secretobjects

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func sortedUIDs(uids ...types.UID) []types.UID {
	slices.Sort(uids)
	return uids
}

func TestAppliedOwnerUIDs(t *testing.T) {
	entries := []metav1.ManagedFieldsEntry{
		applied("keymount-node-a", `{"f:metadata":{"f:ownerReferences":{".":{},"k:{\"uid\":\"u1\"}":{"f:name":{}},"k:{\"uid\":\"u2\"}":{}}}}`),
		applied("keymount-node-b", `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"u3\"}":{}}}}`),
		{Manager: "keymount-node-a", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"u4\"}":{}}}}`)},
		applied("keymount-node-a", `{"f:metadata":{"f:ownerReferences":{"k:not json":{}}}}`),
	}
	got := appliedOwnerUIDs(entries, "keymount-node-a")
	if diff := cmp.Diff([]types.UID{"u1", "u2"}, sortedUIDs(got...)); diff != "" {
		t.Errorf("appliedOwnerUIDs (-want +got):\n%s", diff)
	}
}

// TestRelabelled: the create's update entry becomes keymount's apply entry
// (content) and the node's apply entry (owner references), merged into
// those entries when they exist; other entries stay as they are.
func TestRelabelled(t *testing.T) {
	created := metav1.NewTime(metav1.Now().Rfc3339Copy().Time)
	creation := metav1.ManagedFieldsEntry{
		Manager: NodeFieldManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:data":{".":{},"f:a":{}},"f:metadata":{"f:labels":{".":{},"f:l":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"u1\"}":{}}},"f:type":{}}`),
	}
	other := applied("other-tool", `{"f:data":{"f:x":{}}}`)
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    map[string]string // manager/operation → fields
	}{
		{"after a create", []metav1.ManagedFieldsEntry{creation, other}, map[string]string{
			"keymount/Apply":        `{"f:data":{".":{},"f:a":{}},"f:metadata":{"f:labels":{".":{},"f:l":{}}},"f:type":{}}`,
			"keymount-node-a/Apply": `{"f:metadata":{"f:ownerReferences":{".":{},"k:{\"uid\":\"u1\"}":{}}}}`,
			"other-tool/Apply":      `{"f:data":{"f:x":{}}}`,
		}},
		{"merged into later applies", []metav1.ManagedFieldsEntry{
			creation,
			applied(NodeFieldManager, `{"f:data":{"f:b":{}}}`),
			applied("keymount-node-a", `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"u2\"}":{}}}}`),
		}, map[string]string{
			"keymount/Apply":        `{"f:data":{".":{},"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{".":{},"f:l":{}}},"f:type":{}}`,
			"keymount-node-a/Apply": `{"f:metadata":{"f:ownerReferences":{".":{},"k:{\"uid\":\"u1\"}":{},"k:{\"uid\":\"u2\"}":{}}}}`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, ok, err := relabelled(tt.entries, "keymount-node-a")
			if err != nil || !ok {
				t.Fatalf("relabelled = %v, %v", ok, err)
			}
			got := map[string]string{}
			for _, e := range out {
				got[e.Manager+"/"+string(e.Operation)] = normalized(t, e.FieldsV1.GetRawBytes())
				if tt.name == "after a create" && e.Manager != "other-tool" && (e.Time == nil || !e.Time.Equal(&created) || e.APIVersion != "v1" || e.FieldsType != "FieldsV1") {
					t.Errorf("entry %s: time %v, apiVersion %q, fieldsType %q", e.Manager, e.Time, e.APIVersion, e.FieldsType)
				}
			}
			for k, v := range tt.want {
				tt.want[k] = normalized(t, []byte(v))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("managed fields (-want +got):\n%s", diff)
			}
		})
	}
	if _, ok, err := relabelled([]metav1.ManagedFieldsEntry{other}, "keymount-node-a"); ok || err != nil {
		t.Errorf("without a create entry: %v, %v; want nothing to do", ok, err)
	}
}

func normalized(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
