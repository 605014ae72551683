//go:build integration

package secretobjects

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/poll"
)

// replicaSet creates a ReplicaSet of no pods (no controller runs here: the
// tests create its pods themselves).
func (cl *cluster) replicaSet(t *testing.T, ns, name string) *appsv1.ReplicaSet {
	t.Helper()
	labels := map[string]string{"app": name}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: new(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
	if err := cl.admin.Create(t.Context(), rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// podOf creates a pod of rs on nodeName with a volume of class, owned by rs
// as the ReplicaSet controller owns its pods.
func (cl *cluster) podOf(t *testing.T, rs *appsv1.ReplicaSet, name, nodeName, class string) *corev1.Pod {
	t.Helper()
	p := cl.pod(t, rs.Namespace, name, nodeName, class)
	patch := client.MergeFrom(p.DeepCopy())
	p.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID,
		Controller: new(true), BlockOwnerDeletion: new(true),
	}}
	if err := cl.admin.Patch(t.Context(), p, patch); err != nil {
		t.Fatal(err)
	}
	return p
}

func rsRef(rs *appsv1.ReplicaSet) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID}
}

// goneAfterGC deletes p and waits until the garbage collector has handled
// its deletion: a ConfigMap the pod owns is gone.
func goneAfterGC(t *testing.T, cl *cluster, p *corev1.Pod) {
	t.Helper()
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: p.Namespace, Name: "gc-probe-" + p.Name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}},
	}}
	if err := cl.admin.Create(t.Context(), probe); err != nil {
		t.Fatal(err)
	}
	deleteNow(t, cl, p)
	poll.Until(t, "the garbage collector to handle pod "+p.Name+"'s deletion", func(ctx context.Context) (bool, error) {
		err := cl.admin.Get(ctx, client.ObjectKeyFromObject(probe), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// testOwnedByPodsOwners: a Secret is owned by the owner of the pods that
// use it, as upstream: scaling the ReplicaSet to zero keeps it, a Recreate
// rollout adds the new ReplicaSet and keeps the old one (a node never drops
// an owner), and the Secret goes with the last ReplicaSet.
func testOwnedByPodsOwners(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	spc := dbClass(t, cl, ns)
	rs1 := cl.replicaSet(t, ns, "app-1")
	pod1 := cl.podOf(t, rs1, "app-1-a", "node-a", "db")
	vol := newVolume(t, map[string]string{"db/password": "pw", "user": "admin"})
	n := cl.node("node-a", nil)

	n.sync(t, outcome(pod1, spc, vol))
	if diff := cmp.Diff([]metav1.OwnerReference{rsRef(rs1)}, cl.secret(t, ns, "db").OwnerReferences); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}

	// Scaled to zero: the pod goes, the ReplicaSet stays, so does the Secret.
	goneAfterGC(t, cl, pod1)
	if diff := cmp.Diff([]metav1.OwnerReference{rsRef(rs1)}, cl.secret(t, ns, "db").OwnerReferences); diff != "" {
		t.Errorf("owners after the ReplicaSet scaled to zero (-want +got):\n%s", diff)
	}

	// A Recreate rollout: a new ReplicaSet, its pod on the same node.
	rs2 := cl.replicaSet(t, ns, "app-2")
	pod2 := cl.podOf(t, rs2, "app-2-a", "node-a", "db")
	n.sync(t, outcome(pod2, spc, vol))
	s := cl.secret(t, ns, "db")
	if diff := cmp.Diff(sortedUIDs(rs1.UID, rs2.UID), secretOwners(s)); diff != "" {
		t.Errorf("owners after the rollout (-want +got):\n%s", diff)
	}
	for _, r := range s.OwnerReferences {
		if r.Controller != nil || r.BlockOwnerDeletion != nil {
			t.Errorf("owner %s has controller %v, blockOwnerDeletion %v; upstream sets neither", r.Name, r.Controller, r.BlockOwnerDeletion)
		}
	}

	// The old ReplicaSet is deleted: the garbage collector drops it.
	if err := cl.admin.Delete(t.Context(), rs1); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the garbage collector to drop the old ReplicaSet", func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		err := cl.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &s)
		return err == nil && cmp.Equal(secretOwners(&s), []types.UID{rs2.UID}), err
	})
	// The Deployment is deleted: its last ReplicaSet, then the Secret go.
	goneAfterGC(t, cl, pod2)
	if err := cl.admin.Delete(t.Context(), rs2); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the garbage collector to delete the Secret", func(ctx context.Context) (bool, error) {
		err := cl.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &corev1.Secret{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// failingClient fails every write but creates, as an API server that goes
// away right after a Secret was created.
type failingClient struct {
	kube.Client
}

var errUnavailable = errors.New("the API server went away")

func (c failingClient) Apply(context.Context, kube.Object, []byte, string) error {
	return errUnavailable
}

func (c failingClient) Patch(context.Context, kube.Object, types.PatchType, []byte, string) error {
	return errUnavailable
}

// testCreateCarriesOwner: a Secret is created with its owner in one request,
// its only write, so even when every later write fails and the volume is
// unpublished before another sync (the reporter then drops the sync), the
// Secret goes with its pod: it cannot be orphaned. The next sync that writes
// it hands the create's fields to the apply managers first, so that a key the
// class drops is removed.
func testCreateCarriesOwner(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	spc := dbClass(t, cl, ns)
	pod := cl.pod(t, ns, "app", "node-a", "db")
	vol := newVolume(t, map[string]string{"db/password": "pw", "user": "admin"})
	broken := cl.nodeAs(failingClient{Client: cl.api}, "node-a", cl.api)

	c, err := broken.syncer.Sync(t.Context(), outcome(pod, spc, vol))
	if err != nil {
		t.Fatalf("Sync = %v, want the create alone, which the failing client lets through", err)
	}
	checkCondition(t, c, metav1.ConditionTrue, ReasonSynced, `"db"`)
	s := cl.secret(t, ns, "db")
	if diff := cmp.Diff([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "app", UID: pod.UID}}, s.OwnerReferences); diff != "" {
		t.Errorf("owners of the created Secret (-want +got):\n%s", diff)
	}
	if got := managers(s); !cmp.Equal(got, []string{"keymount/Update"}) {
		t.Errorf("field managers = %v, want the create's only", got)
	}

	// A second pod keeps the Secret for the rest of the test; a sync that
	// works hands the create's fields over.
	other := cl.pod(t, ns, "other", "node-a", "db")
	n := cl.node("node-a", nil)
	n.sync(t, outcome(other, spc, vol))
	s = cl.secret(t, ns, "db")
	if diff := cmp.Diff([]string{"keymount-node-node-a/Apply", "keymount/Apply"}, managers(s)); diff != "" {
		t.Errorf("field managers after the next sync (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sortedUIDs(pod.UID, other.UID), secretOwners(s)); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}
	spc.Spec.SecretObjects[0].Data = data("db/password", "password")
	if err := cl.admin.Update(t.Context(), spc); err != nil {
		t.Fatal(err)
	}
	n.sync(t, outcome(other, spc, vol))
	if _, ok := cl.secret(t, ns, "db").Data["username"]; ok {
		t.Error("the key the class dropped is still there: the create still owns it")
	}

	// Both pods go without another sync: so does the Secret.
	deleteNow(t, cl, pod)
	deleteNow(t, cl, other)
	poll.Until(t, "the garbage collector to delete the Secret", func(ctx context.Context) (bool, error) {
		err := cl.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &corev1.Secret{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// managers lists the managed fields entries of s as manager/operation,
// sorted.
func managers(s *corev1.Secret) []string {
	var out []string
	for _, e := range s.ManagedFields {
		out = append(out, fmt.Sprintf("%s/%s", e.Manager, e.Operation))
	}
	slices.Sort(out)
	return out
}
