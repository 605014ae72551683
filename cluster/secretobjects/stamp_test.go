package secretobjects

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMayReplace(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const settle = 2 * time.Minute
	tests := []struct {
		name      string
		mine, rec stamp
		want      bool
	}{
		{"no stamp on the Secret", stamp{"a", t0}, stamp{}, true},
		{"no stamp on the Secret, answer time unknown", stamp{"a", time.Time{}}, stamp{}, true},
		{"answer time unknown", stamp{"a", time.Time{}}, stamp{"b", t0}, false},
		{"same node, newer", stamp{"a", t0.Add(time.Second)}, stamp{"a", t0}, true},
		{"same node, same answer", stamp{"a", t0}, stamp{"a", t0}, true},
		{"same node, older (a refresh that failed)", stamp{"a", t0.Add(-time.Second)}, stamp{"a", t0}, false},
		{"other node, older (a refresh that failed)", stamp{"b", t0.Add(-time.Hour)}, stamp{"a", t0}, false},
		{"other node, later within settle (maybe a cache)", stamp{"b", t0.Add(settle - time.Nanosecond)}, stamp{"a", t0}, false},
		{"other node, settle later", stamp{"b", t0.Add(settle)}, stamp{"a", t0}, true},
		{"other node, much later", stamp{"b", t0.Add(time.Hour)}, stamp{"a", t0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.mine.mayReplace(tt.rec, settle); got != tt.want {
				t.Errorf("mayReplace = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRecordedStamp(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	written := metav1.NewTime(t0.Add(-time.Hour).Truncate(time.Second))
	secret := func(annotations map[string]string, entries ...metav1.ManagedFieldsEntry) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: annotations, ManagedFields: entries}}
	}
	stamped := stamp{"node-a", t0}.annotations()
	tests := []struct {
		name string
		cur  *corev1.Secret
		want stamp
	}{
		{"none", secret(nil), stamp{}},
		{"does not parse", secret(map[string]string{ContentTimeAnnotation: "yesterday", ContentNodeAnnotation: "a"}), stamp{}},
		{"stamped", secret(stamped), stamp{"node-a", t0}},
		{"stamped before keymount's last write", secret(stamped,
			metav1.ManagedFieldsEntry{Manager: NodeFieldManager, Operation: metav1.ManagedFieldsOperationApply, Time: new(metav1.NewTime(t0.Add(time.Minute)))}),
			stamp{"node-a", t0}},
		{"stamped after keymount's last write: a clock ahead", secret(stamped,
			metav1.ManagedFieldsEntry{Manager: "someone", Operation: metav1.ManagedFieldsOperationApply, Time: new(metav1.NewTime(t0.Add(-2 * time.Hour)))},
			metav1.ManagedFieldsEntry{Manager: NodeFieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Time: new(metav1.NewTime(t0.Add(-3 * time.Hour)))},
			metav1.ManagedFieldsEntry{Manager: NodeFieldManager, Operation: metav1.ManagedFieldsOperationApply, Time: &written}),
			stamp{"node-a", written.Add(time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := recordedStamp(tt.cur)
			if got.node != tt.want.node || !got.at.Equal(tt.want.at) {
				t.Errorf("recordedStamp = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStampAnnotations(t *testing.T) {
	at := time.Date(2026, 3, 1, 13, 0, 0, 5, time.FixedZone("CET", 3600))
	got := stamp{"node-a", at}.annotations()
	if got[ContentTimeAnnotation] != "2026-03-01T12:00:00.000000005Z" || got[ContentNodeAnnotation] != "node-a" {
		t.Errorf("annotations = %v", got)
	}
	if got := (stamp{node: "node-a"}).annotations(); got != nil {
		t.Errorf("an unknown time is recorded: %v", got)
	}
}
