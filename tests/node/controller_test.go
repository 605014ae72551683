package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/nodeenv"
	"github.com/keymount/keymount/tests/poll"
)

// controllerUID is the user keymount-controller's pod runs its containers
// as (the chart's controllerContainerSecurity): the local provider sidecar
// reads the node's files as it.
const controllerUID = 65532

// TestSecretSyncEnvFromOnTheNode is issue 20's proof on a real node: the
// chart installed with controller.enabled and restartOnChange.enabled runs
// keymount-controller (with the local provider as its sidecar) as a pod of
// the node. A Deployment annotated keymount.io/restart-on-change whose
// container reads the Secret through envFrom, created together with its
// SecretSync, reaches Ready once the controller wrote the Secret (kubelet
// retries the missing Secret). When the value changes in the store and a
// keymount.io/refresh trigger brings it into the Secret, the controller
// restarts the Deployment exactly once: one pod-template annotation, one
// new ReplicaSet, one event, and the new pod's environment holds the new
// value. A refresh that changes nothing restarts nothing.
func TestSecretSyncEnvFromOnTheNode(t *testing.T) {
	n := nodeenv.Start(t, nodeenv.Options{Helm: true, Controller: true, ScanLogs: forbidden.scan})
	ctx := t.Context()
	c := syncClient(t, n)
	ns := namespace(t, n)
	v1, v2 := "v1-"+randomHex(8), "v2-"+randomHex(8)
	putControllerObject(t, n, ns+"/dsn", v1)
	localClass(t, n, ns, "store", `
- objectName: `+ns+`/dsn
  objectAlias: dsn
`)

	// The Deployment and its SecretSync, applied together (Deployment
	// first: its pod waits for the Secret).
	dep := envFromDeployment(n, ns, "app", "app-env")
	if err := c.Create(ctx, dep); err != nil {
		t.Fatalf("create the Deployment: %v", err)
	}
	sync := &ss1.SecretSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-env"},
		Spec: ss1.SecretSyncSpec{
			SecretProviderClassName: "store", ServiceAccountName: "default",
			SecretObject: ss1.SecretObject{Type: string(corev1.SecretTypeOpaque), Data: []ss1.SecretObjectData{{SourcePath: "dsn", TargetKey: "DSN"}}},
		},
	}
	if err := c.Create(ctx, sync); err != nil {
		t.Fatalf("create the SecretSync: %v", err)
	}
	t.Cleanup(func() { cleanupEnvFrom(t, n, c, dep, sync) })

	first := n.WaitDeployment(t, ns, "app")
	waitSyncReady(t, c, ns, "app-env", "")
	pods := deploymentPods(t, n, first)
	if len(pods) != 1 {
		t.Fatalf("the Deployment runs %d pods, want 1", len(pods))
	}
	n.WaitLog(t, &pods[0], "probe", "the first value in its environment", hasLine("env DSN="+v1))
	if keys := rolloutKeys(first); len(keys) > 0 {
		t.Errorf("the Deployment was restarted before any change: pod template annotations %v", keys)
	}
	if rs := replicaSets(t, n, first); len(rs) != 1 {
		t.Errorf("%d ReplicaSets before the change, want 1", len(rs))
	}

	// The value changes in the store; a trigger refreshes the SecretSync.
	putControllerObject(t, n, ns+"/dsn", v2)
	annotateSync(t, c, ns, "app-env", rotation.RefreshAnnotation, "change-1")
	changed := waitFor(t, "the Secret with the new value", func(ctx context.Context) (*corev1.Secret, error) {
		s, err := n.Kube.CoreV1().Secrets(ns).Get(ctx, "app-env", metav1.GetOptions{})
		if err != nil || string(s.Data["DSN"]) != v2 {
			return nil, err
		}
		return s, nil
	})
	key := restart.SecretAnnotationKey("app-env")
	err := poll.Wait(ctx, nodeenv.PodTimeout, func(ctx context.Context) (bool, error) {
		d, err := n.Kube.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && d.Spec.Template.Annotations[key] != "", err
	})
	if err != nil {
		// Restart on change compares the two to the second.
		var writes []string
		for _, m := range changed.ManagedFields {
			writes = append(writes, m.Manager+" "+m.Time.UTC().Format(time.RFC3339))
		}
		t.Fatalf("waiting for the rollout annotation on the pod template: %v (the Deployment created %s, the Secret's writes %v)\n%s",
			err, first.CreationTimestamp.UTC().Format(time.RFC3339), writes, controllerRestartLog(t, n))
	}
	second := waitOnePod(t, n, ns, "app")
	pods = deploymentPods(t, n, second)
	n.WaitLog(t, &pods[0], "probe", "the new value in the new pod's environment", hasLine("env DSN="+v2))

	// A refresh that changes nothing: handled, and no further restart.
	annotateSync(t, c, ns, "app-env", rotation.RefreshAnnotation, "change-2")
	waitSyncReady(t, c, ns, "app-env", "change-2")
	d, err := n.Kube.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkRestartedOnce(t, n, first, d, key)

	cleanupEnvFrom(t, n, c, dep, sync)
	n.HelmUninstall(t)
}

// controllerRestartLog is, for a failure message, each keymount-controller
// container's restart count and the lines of its log about restarts,
// errors and start-ups (a restarted controller starts with an empty cache).
func controllerRestartLog(t *testing.T, n *nodeenv.Node) string {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	d, err := n.Kube.AppsV1().Deployments(nodeenv.ReleaseNamespace).Get(ctx, nodeenv.Release+"-controller", metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("(keymount-controller's Deployment: %v)", err)
	}
	var b strings.Builder
	for _, p := range deploymentPods(t, n, d) {
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "--- pod %s container %s (restarts %d) ---\n", p.Name, cs.Name, cs.RestartCount)
		}
		for _, l := range n.ContainerLog(t, &p, "controller") {
			if strings.Contains(l, "Successfully renewed lease") {
				continue
			}
			if strings.Contains(l, "restart") || strings.Contains(l, "rror") || strings.Contains(l, `"starting"`) || strings.Contains(l, "leader") {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String()
}

// checkRestartedOnce: between before and after, the Deployment's pod
// template changed once, by the one rollout annotation of the Secret, into
// one new ReplicaSet, with one restart event.
func checkRestartedOnce(t *testing.T, n *nodeenv.Node, before, after *appsv1.Deployment, key string) {
	t.Helper()
	if after.Generation != before.Generation+1 {
		t.Errorf("the Deployment's generation went from %d to %d, want one template change", before.Generation, after.Generation)
	}
	if keys := rolloutKeys(after); len(keys) != 1 || keys[0] != key {
		t.Errorf("pod template rollout annotations %v, want only %s", keys, key)
	}
	if rev := after.Annotations["deployment.kubernetes.io/revision"]; rev != "2" {
		t.Errorf("the Deployment's revision %q, want 2 (one rollout)", rev)
	}
	if rs := replicaSets(t, n, after); len(rs) != 2 {
		t.Errorf("%d ReplicaSets after the change, want 2 (the first and one new)", len(rs))
	}
	// The controller's recorder writes events in the background, late on
	// a loaded machine: wait for the first, then count.
	count := int32(0)
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(ctx context.Context) (bool, error) {
		events, err := n.Kube.CoreV1().Events(after.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Deployment,involvedObject.name=" + after.Name + ",reason=" + restart.ReasonRestarting,
		})
		if err != nil {
			return false, err
		}
		count = 0
		for _, e := range events.Items {
			count += max(e.Count, 1)
		}
		return count > 0, nil
	})
	if err != nil || count != 1 {
		t.Errorf("%d %s events on the Deployment, want 1 (%v)", count, restart.ReasonRestarting, err)
	}
}

// envFromDeployment is a Deployment of one probe pod on the node, opted in
// to restart on change, printing the variable DSN of the Secret secret it
// reads through envFrom.
func envFromDeployment(n *nodeenv.Node, ns, name, secret string) *appsv1.Deployment {
	pod := n.ProbePod(ns, "", "env", "DSN")
	pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret},
	}}}
	labels := map[string]string{"app": name}
	one := int32(1)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Annotations: map[string]string{rotation.RestartAnnotation: "true"},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
}

// waitOnePod waits until the Deployment rolled out and exactly one pod of
// it is left (the old one gone), and returns the Deployment.
func waitOnePod(t *testing.T, n *nodeenv.Node, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	var pods int
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(context.Context) (bool, error) {
		d = n.WaitDeployment(t, ns, name)
		pods = len(deploymentPods(t, n, d))
		return pods == 1, nil
	})
	if err != nil {
		t.Fatalf("the Deployment %s/%s still has %d pods after its rollout: %v", ns, name, pods, err)
	}
	return d
}

// deploymentPods lists the Deployment's pods not being deleted.
func deploymentPods(t *testing.T, n *nodeenv.Node, d *appsv1.Deployment) []corev1.Pod {
	t.Helper()
	list, err := n.Kube.CoreV1().Pods(d.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func replicaSets(t *testing.T, n *nodeenv.Node, d *appsv1.Deployment) []appsv1.ReplicaSet {
	t.Helper()
	list, err := n.Kube.AppsV1().ReplicaSets(d.Namespace).List(t.Context(), metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// rolloutKeys are the keymount.io/rollout-* annotations of d's pod template.
func rolloutKeys(d *appsv1.Deployment) []string {
	var out []string
	for k := range d.Spec.Template.Annotations {
		if strings.HasPrefix(k, restart.RolloutAnnotationPrefix) {
			out = append(out, k)
		}
	}
	return out
}

// waitSyncReady waits until the SecretSync is Ready for its generation and,
// with refresh set, has handled that trigger.
func waitSyncReady(t *testing.T, c client.Client, ns, name, refresh string) {
	t.Helper()
	var last ss1.SecretSyncStatus
	err := poll.Wait(t.Context(), nodeenv.PodTimeout, func(ctx context.Context) (bool, error) {
		s := &ss1.SecretSync{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
			return false, err
		}
		last = s.Status
		ready := apimeta.FindStatusCondition(s.Status.Conditions, ss1.ConditionReady)
		return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == s.Generation &&
			(refresh == "" || s.Status.HandledRefresh == refresh), nil
	})
	if err != nil {
		t.Fatalf("SecretSync %s/%s is not Ready (refresh %q handled): %v\nstatus: %+v", ns, name, refresh, err, last)
	}
}

func annotateSync(t *testing.T, c client.Client, ns, name, key, value string) {
	t.Helper()
	s := &ss1.SecretSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := `{"metadata":{"annotations":{"` + key + `":"` + value + `"}}}`
	if err := c.Patch(t.Context(), s, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("annotate SecretSync %s/%s: %v", ns, name, err)
	}
}

// syncClient is an administrator client knowing SecretSyncs.
func syncClient(t *testing.T, n *nodeenv.Node) client.Client {
	t.Helper()
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, secretsstorev1.AddToScheme, ss1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(n.Env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// putControllerObject writes an object of the local provider for the
// controller's sidecar, which reads as controllerUID (not root, as the
// node's DaemonSet provider does): its directory and file belong to that
// user. The value is forbidden in every log.
func putControllerObject(t *testing.T, n *nodeenv.Node, name, value string) {
	t.Helper()
	path := filepath.Join(n.ProviderRoot, filepath.FromSlash(name))
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(value), 0o400); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, tmp} {
		if err := os.Chown(p, controllerUID, controllerUID); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	forbidden.add(value, "the value of local object "+name)
}

// cleanupEnvFrom deletes the Deployment and the SecretSync and waits until
// the Deployment's pods and the Secret are gone.
func cleanupEnvFrom(t *testing.T, n *nodeenv.Node, c client.Client, dep *appsv1.Deployment, sync *ss1.SecretSync) {
	ctx := context.WithoutCancel(t.Context())
	fg := metav1.DeletePropagationForeground
	for _, o := range []client.Object{dep, sync} {
		if err := c.Delete(ctx, o, &client.DeleteOptions{PropagationPolicy: &fg}); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete %s: %v", o.GetName(), err)
		}
	}
	err := poll.Wait(ctx, nodeenv.PodTimeout, func(ctx context.Context) (bool, error) {
		pods, err := n.Kube.CoreV1().Pods(dep.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		_, err = n.Kube.CoreV1().Secrets(dep.Namespace).Get(ctx, sync.Name, metav1.GetOptions{})
		return len(pods.Items) == 0 && err != nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Errorf("the Deployment's pods or the SecretSync's Secret are still there: %v", err)
	}
}

// hasLine matches a line equal to want.
func hasLine(want string) func(string) bool {
	return func(l string) bool { return l == want }
}
