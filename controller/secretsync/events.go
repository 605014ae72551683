package secretsync

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// keyList names the keys of data, sorted.
func keyList(data map[string][]byte) string {
	return strings.Join(slices.Sorted(maps.Keys(data)), ", ")
}

// describeChange names the keys a write added, changed and removed.
func describeChange(added, changed, removed []string) string {
	var parts []string
	if len(changed) > 0 {
		parts = append(parts, "changed keys "+strings.Join(changed, ", "))
	}
	if len(added) > 0 {
		parts = append(parts, "added keys "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		parts = append(parts, "removed keys "+strings.Join(removed, ", "))
	}
	if len(parts) == 0 {
		return "labels, annotations, type or owner restored; no key changed"
	}
	return strings.Join(parts, "; ")
}

// readyTrue reports whether st says Ready=True.
func readyTrue(st ss1.SecretSyncStatus) bool {
	return meta.IsStatusConditionPresentAndEqual(st.Conditions, ss1.ConditionReady, metav1.ConditionTrue)
}
