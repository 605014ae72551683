package restart

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/rotation"
)

func secretRef(name string) corev1.LocalObjectReference {
	return corev1.LocalObjectReference{Name: name}
}

// consumingSpec reads a, b, c, d, e and a again, each in another way.
func consumingSpec() corev1.PodSpec {
	return corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: secretRef("e")}}}}},
		Containers: []corev1.Container{{
			Name:  "app",
			Image: "registry.example/app:1",
			Env: []corev1.EnvVar{
				{Name: "PLAIN", Value: "x"},
				{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: secretRef("a"), Key: "k"}}},
				{Name: "CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: secretRef("cm"), Key: "k"}}},
			},
			EnvFrom: []corev1.EnvFromSource{
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: secretRef("b")}},
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: secretRef("cm")}},
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: secretRef("a")}},
			},
		}},
		Volumes: []corev1.Volume{
			{Name: "c", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "c"}}},
			{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: secretRef("d")}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: secretRef("cm")}},
			}}}},
			{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}
}

func TestConsumedSecrets(t *testing.T) {
	spec := consumingSpec()
	if diff := cmp.Diff([]string{"e", "a", "b", "c", "d"}, consumedSecrets(&spec)); diff != "" {
		t.Errorf("consumedSecrets (-want +got):\n%s", diff)
	}
}

// TestTrimWorkload: the cache keeps what a restart needs, nothing of the
// spec but the names of the Secrets an opted-in workload consumes.
func TestTrimWorkload(t *testing.T) {
	optIn := map[string]string{rotation.RestartAnnotation: "true", "kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1000)}
	meta := func(annotations map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: "7", Annotations: annotations,
			Labels: map[string]string{"app": "web"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
	}
	tests := []struct {
		name string
		obj  any
		want []string
	}{
		{name: "annotated Deployment", obj: &appsv1.Deployment{ObjectMeta: meta(optIn), Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: consumingSpec()}}},
			want: []string{"e", "a", "b", "c", "d"}},
		{name: "StatefulSet opted in on its pod template", obj: &appsv1.StatefulSet{ObjectMeta: meta(nil), Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{rotation.RestartAnnotation: "true"}}, Spec: consumingSpec()}}},
			want: []string{"e", "a", "b", "c", "d"}},
		{name: "DaemonSet without opt-in", obj: &appsv1.DaemonSet{ObjectMeta: meta(nil), Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: consumingSpec()}}}},
		{name: "opted out", obj: &appsv1.Deployment{ObjectMeta: meta(map[string]string{rotation.RestartAnnotation: "false"}),
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: consumingSpec()}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := trimWorkload(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			o, ok := got.(client.Object)
			if !ok {
				t.Fatalf("trimWorkload returned %T", got)
			}
			if o.GetName() != "web" || o.GetNamespace() != "ns" || o.GetUID() != "u1" || o.GetResourceVersion() != "7" {
				t.Errorf("identity lost: %s/%s %s %s", o.GetNamespace(), o.GetName(), o.GetUID(), o.GetResourceVersion())
			}
			if len(o.GetAnnotations())+len(o.GetLabels())+len(o.GetManagedFields()) != 0 {
				t.Errorf("kept annotations %v, labels %v, managedFields %v", o.GetAnnotations(), o.GetLabels(), o.GetManagedFields())
			}
			if diff := cmp.Diff(tc.want, secretsOf(o), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("secretsOf (-want +got):\n%s", diff)
			}
			var spec corev1.PodSpec
			switch w := o.(type) {
			case *appsv1.Deployment:
				spec = w.Spec.Template.Spec
			case *appsv1.StatefulSet:
				spec = w.Spec.Template.Spec
			case *appsv1.DaemonSet:
				spec = w.Spec.Template.Spec
			}
			if len(spec.Containers)+len(spec.InitContainers) != 0 {
				t.Errorf("kept containers: %+v", spec.Containers)
			}
		})
	}
}

// TestSecretAnnotation: the value moves with the data and type only, in any
// key order, depends on the key, and never shows a value; long names hash.
func TestSecretAnnotation(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	data := map[string][]byte{"user": []byte("admin"), "password": []byte("hunter22")}
	v := secretAnnotationValue(key, corev1.SecretTypeOpaque, data)
	if len(v) != 32 || strings.Contains(v, "hunter22") {
		t.Errorf("value %q", v)
	}
	same := map[string][]byte{"password": []byte("hunter22"), "user": []byte("admin")}
	if secretAnnotationValue(key, corev1.SecretTypeOpaque, same) != v {
		t.Error("the same data in another order gives another value")
	}
	for name, other := range map[string]string{
		"another value":   secretAnnotationValue(key, corev1.SecretTypeOpaque, map[string][]byte{"user": []byte("admin"), "password": []byte("hunter23")}),
		"another type":    secretAnnotationValue(key, corev1.SecretTypeBasicAuth, data),
		"another key":     secretAnnotationValue([]byte("another key, 32 bytes long......"), corev1.SecretTypeOpaque, data),
		"shifted lengths": secretAnnotationValue(key, corev1.SecretTypeOpaque, map[string][]byte{"user": []byte("adminpassword"), "": []byte("hunter22")}),
	} {
		if other == v {
			t.Errorf("%s gives the same value", name)
		}
	}
	if got := SecretAnnotationKey("db-creds"); got != "keymount.io/rollout-secret-db-creds" {
		t.Errorf("SecretAnnotationKey = %q", got)
	}
	long := SecretAnnotationKey(strings.Repeat("a", 60))
	if len(long) != len(SecretRolloutPrefix)+16 || !strings.HasPrefix(long, SecretRolloutPrefix) {
		t.Errorf("long name: %q", long)
	}
}

// TestSecretTrimmerKeepsNoData: the cache's copy of a Secret holds its
// digest and write time, never its data.
func TestSecretTrimmerKeepsNoData(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	written := metav1.NewTime(metav1.Now().Truncate(1e9))
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "u", Labels: map[string]string{SyncLabel: ""},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "keymount-controller", Time: &written}}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("hunter22")},
	}
	d := NewSecretDigests(key)
	got, err := secretTrimmer(d)(s)
	if err != nil {
		t.Fatal(err)
	}
	trimmed, ok := got.(*corev1.Secret)
	if !ok {
		t.Fatalf("secretTrimmer returned %T", got)
	}
	if len(trimmed.Data)+len(trimmed.StringData)+len(trimmed.ManagedFields)+len(trimmed.Annotations) != 0 {
		t.Errorf("the cached Secret keeps data or annotations: %+v", trimmed)
	}
	e := d.m[types.NamespacedName{Namespace: "ns", Name: "db"}]
	if hex.EncodeToString(e.sum[:]) != secretAnnotationValue(key, s.Type, s.Data) || e.written != written.Unix() {
		t.Errorf("recorded %x written %d, want %s written %d", e.sum, e.written, secretAnnotationValue(key, s.Type, s.Data), written.Unix())
	}
}
