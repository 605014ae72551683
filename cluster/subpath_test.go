package cluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/rotation"
)

func csiVolume(name, driver, class string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
		Driver: driver, VolumeAttributes: map[string]string{"secretProviderClass": class},
	}}}
}

func subPathPod() *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1-abc", UID: "p1"},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				csiVolume("db", testDriver, "db"),
				csiVolume("db-again", testDriver, "db"),
				csiVolume("cache", testDriver, "cache"),
				csiVolume("other-driver", "other.csi.example.com", "db"),
			},
			InitContainers: []corev1.Container{
				{Name: "setup", VolumeMounts: []corev1.VolumeMount{{Name: "db", MountPath: "/setup/db.conf", SubPath: "db.conf"}}},
				{Name: "proxy", RestartPolicy: &always, VolumeMounts: []corev1.VolumeMount{{Name: "db", MountPath: "/proxy/cert", SubPath: "cert"}}},
			},
			Containers: []corev1.Container{
				{Name: "app", VolumeMounts: []corev1.VolumeMount{
					{Name: "db", MountPath: "/etc/db.conf", SubPath: "db.conf"},
					{Name: "db", MountPath: "/mnt/db"},
					{Name: "db-again", MountPath: "/etc/$(POD)", SubPathExpr: "$(POD)"},
					{Name: "cache", MountPath: "/etc/cache.conf", SubPath: "cache.conf"},
					{Name: "other-driver", MountPath: "/etc/other", SubPath: "x"},
				}},
				{Name: "whole", VolumeMounts: []corev1.VolumeMount{{Name: "db", MountPath: "/db"}}},
			},
		},
	}
}

func TestSubPathMounts(t *testing.T) {
	tests := []struct {
		class string
		want  []Mount
	}{
		{class: "db", want: []Mount{{"proxy", "/proxy/cert"}, {"app", "/etc/db.conf"}, {"app", "/etc/$(POD)"}}},
		{class: "cache", want: []Mount{{"app", "/etc/cache.conf"}}},
		{class: "none"},
	}
	for _, tc := range tests {
		t.Run(tc.class, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SubPathMounts(subPathPod(), testDriver, tc.class)); diff != "" {
				t.Errorf("SubPathMounts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWarnSubPath(t *testing.T) {
	class := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
	rec := record.NewFakeRecorder(10)
	if got := WarnSubPath(rec, testDriver, subPathPod(), class); len(got) != 3 {
		t.Fatalf("WarnSubPath = %v, want 3 mounts", got)
	}
	ev := <-rec.Events
	for _, want := range []string{
		"Warning " + ReasonSubPathNotRefreshed, "SecretProviderClass db changed",
		"proxy (/proxy/cert), app (/etc/db.conf), app (/etc/$(POD))", "old content until restarted",
		rotation.RestartAnnotation + `: "true"`,
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("event %q does not say %q", ev, want)
		}
	}

	class.Annotations = map[string]string{rotation.RestartAnnotation: "true"}
	WarnSubPath(rec, testDriver, subPathPod(), class)
	if ev := <-rec.Events; !strings.Contains(ev, rotation.RestartAnnotation+": keymount-controller restarts the workload") {
		t.Errorf("with the opt-in, event %q does not say the workload restarts", ev)
	}

	if got := WarnSubPath(rec, testDriver, subPathPod(), &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Name: "none"}}); got != nil {
		t.Errorf("a class no container mounts through subPath: %v", got)
	}
	select {
	case ev := <-rec.Events:
		t.Errorf("an event without subPath mounts: %q", ev)
	default:
	}
}
