//go:build integration

package restart_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/poll"
)

// secretFixture is a namespace with synced Secrets and their consumers.
type secretFixture struct {
	a      *apps
	ns     string
	canary int
}

func (f *secretFixture) secret(t *testing.T, name string, synced bool, value string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"password": []byte(value)}}
	if synced {
		s.Labels = map[string]string{restart.SyncLabel: ""}
	}
	if _, err := f.a.admin.CoreV1().Secrets(f.ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *secretFixture) setSecret(t *testing.T, name, value string) {
	t.Helper()
	s, err := f.a.admin.CoreV1().Secrets(f.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"password": []byte(value)}
	if _, err := f.a.admin.CoreV1().Secrets(f.ns).Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// value is the annotation value of an Opaque Secret holding value.
func value(v string) string {
	return restart.SecretAnnotationValue(testHashKey, corev1.SecretTypeOpaque, map[string][]byte{"password": []byte(v)})
}

// consumer creates a Deployment whose pod template reads secret as spec
// says (envFrom, env or volume), opted in on the Deployment when optIn.
func (f *secretFixture) consumer(t *testing.T, name, secret, how string, optIn bool) *appsv1.Deployment {
	t.Helper()
	l := map[string]string{"app": name}
	c := corev1.Container{Name: "app", Image: "registry.example/app:1"}
	var volumes []corev1.Volume
	switch how {
	case "envFrom":
		c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}}
	case "env":
		c.Env = []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "password"}}}}
	case "volume":
		volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "s", MountPath: "/etc/s"}}
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: l}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: volumes},
		}},
	}
	if optIn {
		d.Annotations = map[string]string{rotation.RestartAnnotation: "true"}
	}
	d, err := f.a.admin.AppsV1().Deployments(f.ns).Create(t.Context(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *secretFixture) get(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	return f.a.getDeployment(t, f.ns, name)
}

// roundTrip changes the canary Secret until the canary Deployment is
// restarted for the new value: then the controller has synced its cache
// and handled the events queued before (one worker, in order).
func (f *secretFixture) roundTrip(t *testing.T) {
	t.Helper()
	key := restart.SecretAnnotationKey("canary")
	err := poll.Wait(t.Context(), 90*time.Second, func(ctx context.Context) (bool, error) {
		f.canary++
		v := fmt.Sprintf("canary-%d", f.canary)
		f.setSecret(t, "canary", v)
		// A change before the cache synced is its baseline: try again.
		_ = poll.Wait(ctx, 5*time.Second, func(context.Context) (bool, error) {
			return f.get(t, "canary").Spec.Template.Annotations[key] == value(v), nil
		})
		return f.get(t, "canary").Spec.Template.Annotations[key] == value(v), nil
	})
	if err != nil {
		t.Fatalf("the canary Deployment was never restarted: %v", err)
	}
}

// restarts counts the SecretRestarting events on d.
func (f *secretFixture) restarts(t *testing.T, d *appsv1.Deployment) int {
	t.Helper()
	list, err := f.a.admin.CoreV1().Events(f.ns).List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.uid": string(d.UID), "reason": restart.ReasonRestarting}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += int(max(e.Count, 1))
	}
	return n
}

// TestSecretRestartOncePerChange: a Secret a SecretSync wrote changes. An
// annotated Deployment that reads it through envFrom rolls once (its pod
// template gets keymount.io/rollout-secret-db-creds, a keyed digest of the
// content), one that reads it through a volume too; an unannotated one and
// one reading an unlabelled Secret do not; a write that changes no data
// restarts nothing; a Deployment created after the change is not restarted
// for it, but is for the next one, which rolls the first Deployment once
// more.
func TestSecretRestartOncePerChange(t *testing.T) {
	t.Run("own cache", func(t *testing.T) { testSecretRestartOncePerChange(t, false) })
	// As keymount-controller runs it: the SecretSync reconciler's cache.
	t.Run("shared cache", func(t *testing.T) { testSecretRestartOncePerChange(t, true) })
}

func testSecretRestartOncePerChange(t *testing.T, shared bool) {
	a := startAPIWithCRDs(t)
	f := &secretFixture{a: a, ns: a.namespace(t)}
	f.secret(t, "canary", true, "canary-0")
	f.secret(t, "db-creds", true, "v1")
	f.secret(t, "own", false, "o1")
	f.consumer(t, "canary", "canary", "env", true)
	annotated := f.consumer(t, "annotated", "db-creds", "envFrom", true)
	volume := f.consumer(t, "volume", "db-creds", "volume", true)
	plain := f.consumer(t, "plain", "db-creds", "envFrom", false)
	ignored := f.consumer(t, "ignored", "own", "envFrom", true)
	startControllerSharing(t, a.env.Config, restart.Options{HashKey: testHashKey}, shared)
	f.roundTrip(t)
	key := restart.SecretAnnotationKey("db-creds")
	if key != "keymount.io/rollout-secret-db-creds" {
		t.Errorf("annotation key %q", key)
	}
	if got := f.get(t, "annotated"); got.Generation != annotated.Generation || got.Spec.Template.Annotations[key] != "" {
		t.Fatalf("before any change: generation %d, annotations %v", got.Generation, got.Spec.Template.Annotations)
	}

	f.setSecret(t, "db-creds", "v2")
	for _, d := range []*appsv1.Deployment{annotated, volume} {
		poll.UntilTrue(t, d.Name+" restarted for v2", func() bool { return f.get(t, d.Name).Spec.Template.Annotations[key] == value("v2") })
	}
	// Writes that change no data, and a Secret without the label.
	s, err := a.admin.CoreV1().Secrets(f.ns).Get(t.Context(), "db-creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Labels["team"] = "db"
	if _, err := a.admin.CoreV1().Secrets(f.ns).Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.setSecret(t, "own", "o2")
	// A workload created in the second of a change is restarted for it
	// (either content may have started): late comes a second after v2.
	for _, m := range s.ManagedFields {
		afterSecond(t, "v2's write", m.Time.Time)
	}
	late := f.consumer(t, "late", "db-creds", "envFrom", true)
	f.roundTrip(t)
	for _, tc := range []struct {
		d          *appsv1.Deployment
		generation int64
	}{{annotated, annotated.Generation + 1}, {volume, volume.Generation + 1}, {plain, plain.Generation}, {ignored, ignored.Generation}, {late, late.Generation}} {
		if got := f.get(t, tc.d.Name); got.Generation != tc.generation {
			t.Errorf("%s: generation %d, want %d (template annotations %v)", tc.d.Name, got.Generation, tc.generation, got.Spec.Template.Annotations)
		}
	}
	if got := f.get(t, "plain").Spec.Template.Annotations; len(got) != 0 {
		t.Errorf("the unannotated Deployment's template got annotations %v", got)
	}

	// Changes are dated to the second (as creationTimestamp): v3 counts
	// for late however soon it comes.
	f.setSecret(t, "db-creds", "v3")
	for _, d := range []*appsv1.Deployment{annotated, late} {
		poll.UntilTrue(t, d.Name+" restarted for v3", func() bool { return f.get(t, d.Name).Spec.Template.Annotations[key] == value("v3") })
	}
	f.roundTrip(t)
	if got := f.get(t, "annotated").Generation; got != annotated.Generation+2 {
		t.Errorf("annotated: generation %d after two changes, want %d", got, annotated.Generation+2)
	}
	if got := f.get(t, "late").Generation; got != late.Generation+1 {
		t.Errorf("late: generation %d after one change of its life, want %d", got, late.Generation+1)
	}
	poll.UntilTrue(t, "two restart events on the annotated Deployment", func() bool { return f.restarts(t, annotated) >= 2 })
	if n := f.restarts(t, annotated); n != 2 {
		t.Errorf("%d restart events on the annotated Deployment, want 2", n)
	}
	if n := f.restarts(t, plain); n != 0 {
		t.Errorf("%d restart events on the unannotated Deployment", n)
	}
}
