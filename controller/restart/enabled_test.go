package restart

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
)

func TestEnabled(t *testing.T) {
	pod := func(v string) *corev1.Pod {
		p := &corev1.Pod{}
		if v != "" {
			p.Annotations = map[string]string{rotation.RestartAnnotation: v}
		}
		return p
	}
	class := func(v string) *secretsstorev1.SecretProviderClass {
		c := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
		if v != "" {
			c.Annotations = map[string]string{rotation.RestartAnnotation: v}
		}
		return c
	}
	tests := []struct {
		name       string
		pod, class string
		want       bool
	}{
		{name: "neither", want: false},
		{name: "the class", class: "true", want: true},
		{name: "the pod", pod: "true", want: true},
		{name: "both", pod: "true", class: "true", want: true},
		{name: "the pod opts out of its class's", pod: "false", class: "true", want: false},
		{name: "the pod opts in against its class", pod: "true", class: "false", want: true},
		{name: "a pod value that is no boolean leaves it to the class", pod: "yes", class: "true", want: true},
		{name: "a class value that is no boolean is off", class: "on", want: false},
		{name: "the class says false", class: "false", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Enabled(pod(tc.pod), class(tc.class)); got != tc.want {
				t.Errorf("Enabled(pod %q, class %q) = %t, want %t", tc.pod, tc.class, got, tc.want)
			}
		})
	}
	if Enabled(nil, nil) || !Enabled(pod("true"), nil) || !Enabled(nil, class("true")) {
		t.Error("a missing pod or class must count as one without the annotation")
	}
}

// TestRestartWithoutOptInAsksNothing: a pod that did not opt in costs no
// API request, whatever its owner.
func TestRestartWithoutOptInAsksNothing(t *testing.T) {
	s := &appsServer{status: 500}
	r := restarterFor(t, s)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p",
		OwnerReferences: []metav1.OwnerReference{controller("apps/v1", "ReplicaSet", "web-1", "rs1")}}}
	res, err := r.Restart(t.Context(), Change{Pod: pod, Class: &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Name: "db"}}})
	if err != nil || res != (Result{}) {
		t.Errorf("Restart = %+v, %v; want nothing done", res, err)
	}
	if asked := s.requests(); len(asked) != 0 {
		t.Errorf("requests %q, want none", asked)
	}
}
