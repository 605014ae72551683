//go:build integration

package secretobjects

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/poll"
)

// testOwnersPerNode: two nodes sync one Secret for their own pods; each
// node's references survive the other's apply, and the garbage collector
// drops a deleted pod's reference, then the Secret with the last pod.
func testOwnersPerNode(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	spc := dbClass(t, cl, ns)
	podA := cl.pod(t, ns, "a", "node-a", "db")
	podB := cl.pod(t, ns, "b", "node-b", "db")
	cl.pod(t, ns, "other-class", "node-a", "other")
	leaving := cl.pod(t, ns, "leaving", "node-a", "db", "example.com/hold")
	t.Cleanup(func() { release(t, cl, leaving) })
	if err := cl.admin.Delete(t.Context(), leaving); err != nil {
		t.Fatal(err)
	}
	vol := newVolume(t, map[string]string{"db/password": "pw", "user": "admin"})
	na, nb := cl.node("node-a", nil), cl.node("node-b", nil)

	na.sync(t, outcome(podA, spc, vol))
	nb.sync(t, outcome(podB, spc, vol))
	s := cl.secret(t, ns, "db")
	if diff := cmp.Diff(sortedUIDs(podA.UID, podB.UID), secretOwners(s)); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}
	checkOwnedBy(t, s, "keymount-node-node-a", podA.UID, podB.UID)
	checkOwnedBy(t, s, "keymount-node-node-b", podB.UID, podA.UID)
	checkWrites(t, na, 1) // the create
	// The content was current: node-a's create handed to the apply
	// managers (its references to node-a's), then node-b's references.
	checkWrites(t, nb, 2)

	na.sync(t, outcome(podA, spc, vol))
	nb.sync(t, outcome(podB, spc, vol))
	checkWrites(t, na, 0)
	checkWrites(t, nb, 0)

	deleteNow(t, cl, podB)
	poll.Until(t, "the garbage collector to drop pod b's reference", func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		if err := cl.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &s); err != nil {
			return false, err
		}
		return cmp.Equal(secretOwners(&s), []types.UID{podA.UID}), nil
	})
	deleteNow(t, cl, podA)
	poll.Until(t, "the garbage collector to delete the Secret", func(ctx context.Context) (bool, error) {
		err := cl.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &corev1.Secret{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// checkOwnedBy checks that manager owns the reference to mine and not the one
// to theirs.
func checkOwnedBy(t *testing.T, s *corev1.Secret, manager string, mine, theirs types.UID) {
	t.Helper()
	for _, e := range s.ManagedFields {
		if e.Manager != manager {
			continue
		}
		fields := string(e.FieldsV1.GetRawBytes())
		if !strings.Contains(fields, string(mine)) || strings.Contains(fields, string(theirs)) {
			t.Errorf("%s owns %s, want the reference to %s only", manager, fields, mine)
		}
		return
	}
	t.Errorf("no field manager %s", manager)
}

// deleteNow deletes a pod at once, as kubelet confirms a pod's end.
func deleteNow(t *testing.T, cl *cluster, p *corev1.Pod) {
	t.Helper()
	if err := cl.admin.Delete(t.Context(), p, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
}

// release removes a pod's finalizers so it can go.
func release(t *testing.T, cl *cluster, p *corev1.Pod) {
	t.Helper()
	var cur corev1.Pod
	if err := cl.admin.Get(context.Background(), client.ObjectKeyFromObject(p), &cur); err != nil {
		return
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Finalizers = nil
	if err := cl.admin.Patch(context.Background(), &cur, patch); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("release pod %s: %v", p.Name, err)
	}
}

// testLeastPrivilege syncs as a user with only the permissions the driver's
// Secret sync needs: Secrets get, list, watch, create (an apply that
// creates), patch, delete (changing owner references needs it); Pods get,
// list, watch; SecretProviderClasses get.
func testLeastPrivilege(t *testing.T, cl *cluster) {
	ns := cl.namespace(t)
	user := "keymount-sync-" + ns
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sync"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{secretsstorev1.GroupName}, Resources: []string{"secretproviderclasses"}, Verbs: []string{"get"}},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sync"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "sync"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := cl.admin.Create(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
	}
	_, cfg := cl.env.KubeconfigFor(t, user, nil)
	c, err := client.New(cfg, client.Options{Scheme: cl.scheme})
	if err != nil {
		t.Fatal(err)
	}
	spc := dbClass(t, cl, ns)
	cl.class(t, ns, "other", &secretsstorev1.SecretObject{SecretName: "db", Data: data("x", "x")})
	pod := cl.pod(t, ns, "app", "node-a", "db")
	vol := newVolume(t, map[string]string{"db/password": "pw-1", "user": "admin"})
	api, err := kube.NewAPI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := cl.nodeAs(api, "node-a", nil)
	poll.Until(t, "the role to take effect", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		return err == nil, client.IgnoreNotFound(ignoreForbidden(err))
	})

	checkCondition(t, n.sync(t, outcome(pod, spc, vol)), metav1.ConditionTrue, ReasonSynced)
	vol.write(t, map[string]string{"db/password": "pw-2", "user": "admin"})
	checkCondition(t, n.sync(t, outcome(pod, spc, vol)), metav1.ConditionTrue, ReasonSynced)
	if s := cl.secret(t, ns, "db"); string(s.Data["password"]) != "pw-2" || len(s.OwnerReferences) != 1 {
		t.Errorf("password %q, %d owner references", s.Data["password"], len(s.OwnerReferences))
	}
	// A claim check reads the other class.
	s := cl.secret(t, ns, "db")
	patch := client.MergeFrom(s.DeepCopy())
	s.Annotations[ClassAnnotation] = "other"
	if err := cl.admin.Patch(t.Context(), s, patch); err != nil {
		t.Fatal(err)
	}
	checkCondition(t, n.sync(t, outcome(pod, spc, vol)), metav1.ConditionFalse, ReasonClaimedByOtherClass)
}

func ignoreForbidden(err error) error {
	if apierrors.IsForbidden(err) {
		return nil
	}
	return err
}
