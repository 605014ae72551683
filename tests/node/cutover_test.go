package node_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	"github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/nodeenv"
	"github.com/keymount/keymount/tests/poll"
)

// TestLiveCutOverOnTheNode is the live move of
// docs/migrating-from-external-secrets.md on a real node, through the
// chart's install (controller.enabled: its guard rails in force): a running
// Deployment (restart on change on) reads, through envFrom, a Secret another
// tool wrote and owns. Its owner is a ConfigMap standing in for the
// ExternalSecret (the steps treat any owner alike). The SecretSync applied
// beside it refuses it (SecretConflict); the owner deleted with
// --cascade=orphan leaves it ownerless; annotated with the SecretSync's UID it
// is adopted. Throughout, the Deployment's one pod keeps running (the same
// pod, no restart, one ReplicaSet, no rollout), the Secret's data never
// changes, and at the end the SecretSync is its one owner.
func TestLiveCutOverOnTheNode(t *testing.T) {
	n := nodeenv.Start(t, nodeenv.Options{Helm: true, Controller: true, ScanLogs: forbidden.scan})
	ctx := t.Context()
	c := syncClient(t, n)
	ns := namespace(t, n)
	value := "v1-" + randomHex(8)
	putControllerObject(t, n, ns+"/dsn", value)
	localClass(t, n, ns, "store", `
- objectName: `+ns+`/dsn
  objectAlias: dsn
`)

	// What the other tool left: its object, and the Secret it owns.
	owner, err := n.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-env-externalsecret"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-env",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"DSN": []byte(value)}}
	if secret, err = n.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{FieldManager: "externalsecrets.external-secrets.io/app-env"}); err != nil {
		t.Fatal(err)
	}
	dep := envFromDeployment(n, ns, "app", "app-env")
	if err := c.Create(ctx, dep); err != nil {
		t.Fatalf("create the Deployment: %v", err)
	}
	running := n.WaitDeployment(t, ns, "app")
	pods := deploymentPods(t, n, running)
	if len(pods) != 1 {
		t.Fatalf("the Deployment runs %d pods, want 1", len(pods))
	}
	pod := pods[0]
	n.WaitLog(t, &pod, "probe", "the value in its environment", hasLine("env DSN="+value))

	// 1. Apply the SecretSync: it leaves the other tool's Secret alone.
	sync := &ss1.SecretSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-env"},
		Spec: ss1.SecretSyncSpec{SecretProviderClassName: "store", ServiceAccountName: "default",
			SecretObject: ss1.SecretObject{Type: string(corev1.SecretTypeOpaque), Data: []ss1.SecretObjectData{{SourcePath: "dsn", TargetKey: "DSN"}}}}}
	if err := c.Create(ctx, sync); err != nil {
		t.Fatalf("create the SecretSync: %v", err)
	}
	t.Cleanup(func() { cleanupEnvFrom(t, n, c, dep, sync) })
	waitSyncReason(t, c, ns, "app-env", ss1.ReasonSecretConflict)

	// 2. kubectl delete <owner> --cascade=orphan --wait
	orphan := metav1.DeletePropagationOrphan
	if err := n.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the owner gone and the Secret ownerless", func(ctx context.Context) (bool, error) {
		if _, err := n.Kube.CoreV1().ConfigMaps(ns).Get(ctx, owner.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, err
		}
		s, err := n.Kube.CoreV1().Secrets(ns).Get(ctx, "app-env", metav1.GetOptions{})
		return err == nil && len(s.OwnerReferences) == 0, err
	})

	// 3. kubectl annotate secret app-env keymount.io/secret-sync-uid=<uid>;
	//    kubectl annotate secretsync app-env keymount.io/refresh=<now>
	if err := c.Get(ctx, client.ObjectKeyFromObject(sync), sync); err != nil {
		t.Fatal(err)
	}
	patch := `{"metadata":{"annotations":{"` + secretsync.AnnotationSecretSyncUID + `":"` + string(sync.UID) + `"}}}`
	if _, err := n.Kube.CoreV1().Secrets(ns).Patch(ctx, "app-env", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	annotateSync(t, c, ns, "app-env", rotation.RefreshAnnotation, "cutover")
	waitSyncReady(t, c, ns, "app-env", "cutover")

	checkMovedUndisturbed(t, n, ns, secret, sync, &pod, value)
}

// checkMovedUndisturbed: after the move the Secret (the same object, the
// same value) has the SecretSync as its one owner, and the Deployment runs
// the same pod, never restarted nor rolled out.
func checkMovedUndisturbed(t *testing.T, n *nodeenv.Node, ns string, secret *corev1.Secret, sync *ss1.SecretSync, pod *corev1.Pod, value string) {
	t.Helper()
	got, err := n.Kube.CoreV1().Secrets(ns).Get(t.Context(), "app-env", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != sync.UID || string(got.Data["DSN"]) != value || len(got.Data) != 1 {
		t.Errorf("after the hand-over: owners %+v, keys %d; want the SecretSync alone and the same value", got.OwnerReferences, len(got.Data))
	}
	if got.UID != secret.UID {
		t.Errorf("the Secret was replaced (uid %s, was %s)", got.UID, secret.UID)
	}
	after := n.WaitDeployment(t, ns, "app")
	now := deploymentPods(t, n, after)
	if len(now) != 1 || now[0].UID != pod.UID {
		t.Fatalf("the Deployment's pods changed during the move: %d pods, want the same one", len(now))
	}
	for _, cs := range now[0].Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			t.Errorf("container %s restarted %d times during the move", cs.Name, cs.RestartCount)
		}
	}
	if keys := rolloutKeys(after); len(keys) > 0 {
		t.Errorf("the move restarted the Deployment: pod template annotations %v", keys)
	}
	if rs := replicaSets(t, n, after); len(rs) != 1 {
		t.Errorf("%d ReplicaSets after the move, want 1", len(rs))
	}
}

// waitSyncReason waits until the SecretSync's Ready condition has reason.
func waitSyncReason(t *testing.T, c client.Client, ns, name, reason string) {
	t.Helper()
	var last string
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(ctx context.Context) (bool, error) {
		s := &ss1.SecretSync{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
			return false, err
		}
		if r := apimeta.FindStatusCondition(s.Status.Conditions, ss1.ConditionReady); r != nil {
			last = r.Reason + ": " + r.Message
			return r.Reason == reason, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("SecretSync %s/%s never reported %s: %v (last: %s)", ns, name, reason, err, strings.TrimSpace(last))
	}
}
