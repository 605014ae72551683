package secretobjects

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func applied(manager, fields string) metav1.ManagedFieldsEntry {
	f := metav1.NewFieldsV1(fields)
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: f}
}

func TestUpToDate(t *testing.T) {
	d := &desired{
		namespace: "ns", name: "db", class: "spc", typ: corev1.SecretTypeOpaque,
		data:        map[string][]byte{"password": []byte("p")},
		labels:      map[string]string{ManagedLabel: "true"},
		annotations: map[string]string{ClassAnnotation: "spc"},
	}
	current := func(edit func(s *corev1.Secret)) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{ManagedLabel: "true", "team": "a"},
				Annotations: map[string]string{ClassAnnotation: "spc", "other": "x"},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"password": []byte("p"), "extra": []byte("from someone else")},
		}
		if edit != nil {
			edit(s)
		}
		return s
	}
	tests := []struct {
		name string
		cur  *corev1.Secret
		want bool
	}{
		{"same, with other managers' fields", current(nil), true},
		{"value differs", current(func(s *corev1.Secret) { s.Data["password"] = []byte("q") }), false},
		{"key missing", current(func(s *corev1.Secret) { delete(s.Data, "password") }), false},
		{"type differs", current(func(s *corev1.Secret) { s.Type = corev1.SecretTypeTLS }), false},
		{"label missing", current(func(s *corev1.Secret) { delete(s.Labels, ManagedLabel) }), false},
		{"annotation names another class", current(func(s *corev1.Secret) { s.Annotations[ClassAnnotation] = "other" }), false},
		{"another manager owns the extra key", current(func(s *corev1.Secret) {
			s.ManagedFields = []metav1.ManagedFieldsEntry{applied("kubectl", `{"f:data":{"f:extra":{}}}`)}
		}), true},
		{"keymount applied a key the class dropped", current(func(s *corev1.Secret) {
			s.ManagedFields = []metav1.ManagedFieldsEntry{applied(NodeFieldManager, `{"f:data":{".":{},"f:extra":{},"f:password":{}}}`)}
		}), false},
		{"keymount created it with a key the class dropped (not relabelled yet)", current(func(s *corev1.Secret) {
			s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: NodeFieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{".":{},"f:extra":{},"f:password":{}}}`)}}
		}), false},
		{"keymount applied a label the class dropped", current(func(s *corev1.Secret) {
			s.ManagedFields = []metav1.ManagedFieldsEntry{applied(NodeFieldManager, `{"f:metadata":{"f:labels":{"f:team":{}}}}`)}
		}), false},
		{"keymount applied an annotation the class dropped", current(func(s *corev1.Secret) {
			s.ManagedFields = []metav1.ManagedFieldsEntry{applied(NodeFieldManager, `{"f:metadata":{"f:annotations":{"f:other":{}}}}`)}
		}), false},
		{"keymount owns exactly what it wants", current(func(s *corev1.Secret) {
			s.ManagedFields = []metav1.ManagedFieldsEntry{applied(NodeFieldManager,
				`{"f:data":{"f:password":{}},"f:metadata":{"f:annotations":{"f:keymount.io/secretproviderclass":{}},"f:labels":{"f:secrets-store.csi.k8s.io/managed":{}}},"f:type":{}}`)}
		}), true},
		{"keymount applied a content stamp, older than this volume's", current(func(s *corev1.Secret) {
			s.Annotations[ContentTimeAnnotation] = "2020-01-01T00:00:00Z"
			s.Annotations[ContentNodeAnnotation] = "node-b"
			s.ManagedFields = []metav1.ManagedFieldsEntry{applied(NodeFieldManager,
				`{"f:metadata":{"f:annotations":{"f:keymount.io/content-time":{},"f:keymount.io/content-node":{}}}}`)}
		}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := upToDate(d, tt.cur); got != tt.want {
				t.Errorf("upToDate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOwnedFields(t *testing.T) {
	entries := []metav1.ManagedFieldsEntry{
		applied(NodeFieldManager, `{"f:data":{".":{},"f:a":{},"f:tls.crt":{}},"f:metadata":{"f:labels":{"f:x/y":{}},"f:annotations":{"f:n":{}}},"f:type":{}}`),
		applied("someone", `{"f:data":{"f:b":{}}}`),
		// keymount's create, not relabelled yet: counts as its apply.
		{Manager: NodeFieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:c":{}}}`)},
		// Another manager's update, and keymount's update of a subresource: not keymount's apply.
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:d":{}}}`)},
		{Manager: NodeFieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:e":{}}}`)},
		applied(NodeFieldManager, `not json`),
	}
	got := ownedFields(entries, NodeFieldManager)
	want := owned{data: []string{"a", "tls.crt", "c"}, labels: []string{"x/y"}, annotations: []string{"n"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(owned{})); diff != "" {
		t.Errorf("ownedFields (-want +got):\n%s", diff)
	}
}

func TestDataChanged(t *testing.T) {
	cur := &corev1.Secret{Data: map[string][]byte{"a": []byte("1"), "b": []byte("2")}}
	got := dataChanged(cur, map[string][]byte{"a": []byte("1"), "b": []byte("3"), "c": []byte("4")})
	if diff := cmp.Diff([]string{"b", "c"}, got); diff != "" {
		t.Errorf("dataChanged (-want +got):\n%s", diff)
	}
}
