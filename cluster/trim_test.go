package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

const testDriver = "secrets-store.csi.k8s.io"

func fullMeta() metav1.ObjectMeta {
	now := metav1.Now()
	return metav1.ObjectMeta{
		Name: "app", Namespace: "ns", UID: "u1", ResourceVersion: "7", Generation: 3,
		Labels: map[string]string{"app": "web"},
		Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": "{...}",
			"keymount.io/refresh":                              "2026-11-23T10:00:00Z",
		},
		OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs"}},
		DeletionTimestamp: &now, CreationTimestamp: now,
		Finalizers:    []string{"x"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
}

func TestPodTrimmerKeepsWhatTheDriverReads(t *testing.T) {
	attrs := map[string]string{"secretProviderClass": "db"}
	always := corev1.ContainerRestartPolicyAlways // a sidecar
	pod := &corev1.Pod{
		ObjectMeta: fullMeta(),
		Spec: corev1.PodSpec{
			NodeName: "node-a", ServiceAccountName: "web",
			Containers: []corev1.Container{
				{Name: "app", Image: "app:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}, VolumeMounts: []corev1.VolumeMount{
					{Name: "secrets", MountPath: "/etc/db.conf", SubPath: "db.conf", ReadOnly: true},
					{Name: "secrets", MountPath: "/mnt/secrets"},
					{Name: "cache", MountPath: "/cache", SubPath: "x"},
				}},
				{Name: "sidecar", Image: "s:1", VolumeMounts: []corev1.VolumeMount{{Name: "secrets", MountPath: "/s"}}},
			},
			InitContainers: []corev1.Container{
				{Name: "init", VolumeMounts: []corev1.VolumeMount{
					{Name: "secrets", MountPath: "/i", SubPathExpr: "$(POD)"},
				}},
				{Name: "proxy", Image: "p:1", RestartPolicy: &always, VolumeMounts: []corev1.VolumeMount{
					{Name: "secrets", MountPath: "/p/cert", SubPath: "cert"},
				}},
			},
			Volumes: []corev1.Volume{
				{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: testDriver, VolumeAttributes: attrs}}},
				{Name: "other-csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "other.csi.example.com"}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Message: "long"},
	}
	got, err := podTrimmer(testDriver)(pod)
	if err != nil {
		t.Fatal(err)
	}
	m := fullMeta()
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
			Labels: m.Labels, OwnerReferences: m.OwnerReferences, DeletionTimestamp: pod.DeletionTimestamp,
			CreationTimestamp: pod.CreationTimestamp,
			Annotations:       map[string]string{"keymount.io/refresh": "2026-11-23T10:00:00Z"},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-a", ServiceAccountName: "web",
			Volumes: []corev1.Volume{
				{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: testDriver, VolumeAttributes: attrs}}},
			},
			Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{
				{Name: "secrets", MountPath: "/etc/db.conf", SubPath: "db.conf"},
			}}},
			InitContainers: []corev1.Container{
				{Name: "init", VolumeMounts: []corev1.VolumeMount{
					{Name: "secrets", MountPath: "/i", SubPathExpr: "$(POD)"},
				}},
				{Name: "proxy", RestartPolicy: &always, VolumeMounts: []corev1.VolumeMount{
					{Name: "secrets", MountPath: "/p/cert", SubPath: "cert"},
				}},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed pod (-want +got):\n%s", diff)
	}
	tomb := toolscache.DeletedFinalStateUnknown{Key: "ns/app"}
	if got, err := podTrimmer(testDriver)(tomb); err != nil || got != tomb {
		t.Errorf("a tombstone: %v, %v; want it passed through", got, err)
	}
}

func TestTrimClassKeepsTheSpec(t *testing.T) {
	spec := secretsstorev1.SecretProviderClassSpec{
		Provider:      "aws",
		Parameters:    map[string]string{"objects": "- objectName: db"},
		SecretObjects: []*secretsstorev1.SecretObject{{SecretName: "db", Type: "Opaque"}},
	}
	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: fullMeta(), Spec: spec,
		Status: secretsstorev1.SecretProviderClassStatus{ByPod: []*secretsstorev1.ByPodStatus{{ID: "pod-1"}}},
	}
	got, err := trimClass(spc)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := got.(*secretsstorev1.SecretProviderClass)
	if !ok {
		t.Fatalf("trimClass returned %T", got)
	}
	if diff := cmp.Diff(spec, c.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if c.Generation != 3 || c.ResourceVersion != "7" || c.UID != "u1" || c.Name != "app" || c.Namespace != "ns" {
		t.Errorf("identity not kept: %+v", c.ObjectMeta)
	}
	if diff := cmp.Diff(map[string]string{"keymount.io/refresh": "2026-11-23T10:00:00Z"}, c.Annotations); diff != "" {
		t.Errorf("annotations (-want +got), want only keymount's:\n%s", diff)
	}
	if c.ManagedFields != nil || c.Status.ByPod != nil {
		t.Errorf("managed fields or status kept: %+v, %+v", c.ObjectMeta, c.Status)
	}
}
