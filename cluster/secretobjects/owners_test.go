package secretobjects

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOwnersOf: every owner reference of the pod, flags dropped, as the
// upstream driver copies them; the pod itself when it has none.
func TestOwnersOf(t *testing.T) {
	pod := func(refs ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", UID: "pod-uid", OwnerReferences: refs}}
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []metav1.OwnerReference
	}{
		{"bare pod", pod(), []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: "pod-uid"}}},
		{"StatefulSet pod", pod(metav1.OwnerReference{
			APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "sts-uid", Controller: new(true), BlockOwnerDeletion: new(true),
		}), []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "sts-uid"}}},
		{"static pod, owned by its node", pod(metav1.OwnerReference{
			APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "node-uid", Controller: new(true),
		}), []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "node-uid"}}},
		{"a controller and another owner", pod(
			metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "migrate", UID: "job-uid", Controller: new(true)},
			metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Run", Name: "r", UID: "run-uid"},
		), []metav1.OwnerReference{
			{APIVersion: "batch/v1", Kind: "Job", Name: "migrate", UID: "job-uid"},
			{APIVersion: "example.com/v1", Kind: "Run", Name: "r", UID: "run-uid"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ownerReferences(ownersOf(tt.pod))); diff != "" {
				t.Errorf("owners (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKeptOwners(t *testing.T) {
	cur := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "old", UID: "u1"},
			{APIVersion: "v1", Kind: "ConfigMap", Name: "theirs", UID: "u2"},
		},
		ManagedFields: []metav1.ManagedFieldsEntry{
			applied("keymount-node-a", `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"u1\"}":{},"k:{\"uid\":\"gone\"}":{}}}}`),
			applied("other-tool", `{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"u2\"}":{}}}}`),
		},
	}}
	want := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "old", UID: "u1"}}
	if diff := cmp.Diff(want, ownerReferences(keptOwners(cur, "keymount-node-a"))); diff != "" {
		t.Errorf("keptOwners (-want +got):\n%s", diff)
	}
}
