//go:build integration

package restart_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/rotation"
)

// TestRestartForgedOwner: a pod author writes the pod's owner references.
// Pods that claim a workload they do not belong to — the real ReplicaSet of
// a Deployment with labels its selector does not match, a made-up UID, the
// Deployment itself, a StatefulSet or DaemonSet that selects other pods —
// restart nothing and are told why; the Deployment, StatefulSet and
// DaemonSet are not written. A pod the ReplicaSet does select restarts its
// Deployment.
func TestRestartForgedOwner(t *testing.T) {
	a := startAPI(t)
	ns := a.namespace(t)
	d, rs := a.deployment(t, ns)
	other := map[string]string{"app": "db"}
	otherTemplate := podTemplate()
	otherTemplate.Labels = other
	sts, err := a.admin.AppsV1().StatefulSets(ns).Create(t.Context(), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Spec:       appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: other}, Template: otherTemplate},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := a.admin.AppsV1().DaemonSets(ns).Create(t.Context(), &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: other}, Template: otherTemplate},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	optIn := map[string]string{rotation.RestartAnnotation: "true"}
	forgedUID := controllerRef("ReplicaSet", rs.Name, rs)
	forgedUID.UID = types.UID("00000000-0000-0000-0000-000000000000")
	intruderLabels := map[string]string{"app": "intruder"}
	tests := []struct {
		name   string
		ref    metav1.OwnerReference
		labels map[string]string
		reason string
	}{
		{
			name: "the Deployment's ReplicaSet, labels it does not select", ref: controllerRef("ReplicaSet", rs.Name, rs), labels: intruderLabels,
			reason: "names ReplicaSet web-1 as its controller, but its selector app=web does not match the pod's labels",
		},
		{name: "the ReplicaSet's name with a made-up UID", ref: forgedUID, labels: labels, reason: "the pod's ReplicaSet web-1 is gone"},
		{name: "the Deployment itself", ref: controllerRef("Deployment", d.Name, d), labels: labels, reason: "the pod's controller is Deployment web"},
		{
			name: "a StatefulSet that selects other pods", ref: controllerRef("StatefulSet", sts.Name, sts), labels: labels,
			reason: "names StatefulSet db as its controller, but its selector app=db does not match",
		},
		{
			name: "a DaemonSet that selects other pods", ref: controllerRef("DaemonSet", ds.Name, ds), labels: labels,
			reason: "names DaemonSet agent as its controller, but its selector app=db does not match",
		},
	}
	n := newNode(t, a.env.Config)
	spc := class(ns, "db", nil)
	before := map[string]string{"Deployment": d.ResourceVersion, "StatefulSet": sts.ResourceVersion, "DaemonSet": ds.ResourceVersion}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := a.pod(t, ns, "intruder-"+string(rune('a'+i)), "node-a", "db", &tc.ref, optIn)
			p.Labels = tc.labels
			p, err := a.admin.CoreV1().Pods(ns).Update(t.Context(), p, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := n.r.Restart(t.Context(), restart.Change{Pod: p, Class: spc, Objects: objects("2")})
			if err != nil || res.Patched || res.Workload != (restart.Workload{}) || !strings.Contains(res.Skipped, tc.reason) {
				t.Fatalf("Restart = %+v, %v; want nothing done because %q", res, err, tc.reason)
			}
			events := n.drain()
			if len(events) != 1 || !strings.Contains(events[0], "Normal "+restart.ReasonRestartSkipped) || !strings.Contains(events[0], tc.reason) {
				t.Errorf("events %q, want one on the pod saying %q", events, tc.reason)
			}
		})
	}
	after := map[string]string{"Deployment": a.getDeployment(t, ns, d.Name).ResourceVersion}
	if s, err := a.admin.AppsV1().StatefulSets(ns).Get(t.Context(), sts.Name, metav1.GetOptions{}); err == nil {
		after["StatefulSet"] = s.ResourceVersion
	}
	if s, err := a.admin.AppsV1().DaemonSets(ns).Get(t.Context(), ds.Name, metav1.GetOptions{}); err == nil {
		after["DaemonSet"] = s.ResourceVersion
	}
	for kind, rv := range before {
		if after[kind] != rv {
			t.Errorf("the %s was written: resourceVersion %s -> %s", kind, rv, after[kind])
		}
	}

	// The same ReplicaSet, a pod it selects: the Deployment restarts.
	ref := controllerRef("ReplicaSet", rs.Name, rs)
	member := a.pod(t, ns, "web-1-a", "node-a", "db", &ref, optIn)
	res, err := n.r.Restart(t.Context(), restart.Change{Pod: member, Class: spc, Objects: objects("2")})
	if err != nil || !res.Patched || res.Workload.UID != d.UID {
		t.Fatalf("Restart of a member = %+v, %v; want the Deployment patched", res, err)
	}
	if got := a.getDeployment(t, ns, d.Name).Spec.Template.Annotations[restart.AnnotationKey("db")]; got != restart.AnnotationValue(objects("2")) {
		t.Errorf("template annotation %q, want the change's value", got)
	}
}
