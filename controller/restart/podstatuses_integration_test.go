//go:build integration

package restart_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/podstatus"
	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/poll"
)

// report writes, as a node would, the pod status of pod's volume of class
// saying a refresh changed it to version, with an owner reference to the
// pod of uid (the pod's own when empty).
func report(t *testing.T, c client.Client, pod *corev1.Pod, class, version string, uid types.UID) {
	t.Helper()
	if uid == "" {
		uid = pod.UID
	}
	st := &secretsstorev1.SecretProviderClassPodStatus{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: podstatus.Name(pod.Name, pod.Namespace, class),
			Labels:          map[string]string{secretsstorev1.InternalNodeLabel: pod.Spec.NodeName},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: uid}},
		},
		Status: secretsstorev1.SecretProviderClassPodStatusStatus{
			PodName: pod.Name, SecretProviderClassName: class, Mounted: true,
			Objects: []secretsstorev1.SecretProviderClassObject{{ID: "db/password", Version: version}, {ID: "db/user", Version: "1"}},
			Conditions: []metav1.Condition{{
				Type: secretsstorev1.ConditionContentChanged, Status: metav1.ConditionTrue, Reason: podstatus.ReasonObjectsChanged,
				LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
			}},
		},
	}
	if err := c.Create(t.Context(), st); err != nil {
		t.Fatal(err)
	}
}

// TestControllerIgnoresForgedReports: pod statuses are written by nodes and
// owner references by pod authors. keymount-controller restarts nothing for
// a pod that claims the Deployment's ReplicaSet with labels its selector
// does not match (and tells the pod why), for a report whose owner
// reference names another pod UID, or for a pod that does not mount the
// class; a report without ContentChanged restarts nothing either. A pod
// the ReplicaSet selects, reporting a change, restarts the Deployment once.
func TestControllerIgnoresForgedReports(t *testing.T) {
	a := startAPIWithCRDs(t)
	ns := a.namespace(t)
	d, rs := a.deployment(t, ns)
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(a.env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), class(ns, "db", map[string]string{rotation.RestartAnnotation: "true"})); err != nil {
		t.Fatal(err)
	}
	startController(t, a.env.Config, restart.Options{})
	ref := controllerRef("ReplicaSet", rs.Name, rs)

	intruder := a.pod(t, ns, "intruder", "node-a", "db", &ref, nil)
	intruder.Labels = map[string]string{"app": "intruder"}
	if intruder, err = a.admin.CoreV1().Pods(ns).Update(t.Context(), intruder, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	report(t, c, intruder, "db", "evil-1", "")
	otherUID := a.pod(t, ns, "web-1-x", "node-a", "db", &ref, nil)
	report(t, c, otherUID, "db", "evil-2", "00000000-0000-0000-0000-000000000000")
	noVolume := a.pod(t, ns, "web-1-y", "node-a", "other-class", &ref, nil)
	report(t, c, noVolume, "db", "evil-3", "")
	poll.UntilTrue(t, "the skip event on the intruder", func() bool {
		list, err := a.admin.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.uid": string(intruder.UID), "reason": restart.ReasonRestartSkipped}.String(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items) == 1 && strings.Contains(list.Items[0].Message, "does not match the pod's labels")
	})

	member := a.pod(t, ns, "web-1-a", "node-a", "db", &ref, nil)
	report(t, c, member, "db", "2", "")
	key, want := restart.AnnotationKey("db"), restart.AnnotationValue([]secretsstorev1.SecretProviderClassObject{{ID: "db/password", Version: "2"}, {ID: "db/user", Version: "1"}})
	poll.UntilTrue(t, "the member's restart", func() bool { return a.getDeployment(t, ns, d.Name).Spec.Template.Annotations[key] == want })
	if got := a.getDeployment(t, ns, d.Name); got.Generation != d.Generation+1 {
		t.Errorf("generation %d, want %d: the forged reports wrote the Deployment (annotations %v)", got.Generation, d.Generation+1, got.Spec.Template.Annotations)
	}
}
